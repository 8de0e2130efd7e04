package policies

import (
	"context"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/webhookscope"
	"github.com/configward/configward/internal/workload"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;patch

// webhookScopeResync is how often the conditions are applied again
// whatever happened: a `helm upgrade --force` or a hand edit that dropped or
// changed one is mended within it.
const webhookScopeResync = time.Minute

// SetupWebhookScope keeps the webhookscope conditions on the workload
// webhooks of the named configurations (nothing when none are named): the
// owner condition always, the config condition while no ConfigPolicy in
// force has custom rules (off from the moment one has, since a custom rule
// may judge a workload that references no config). The leader alone writes
// them.
func SetupWebhookScope(mgr ctrl.Manager, policies *configpolicy.Store, synced func() bool, kinds *workload.Registry, names webhookscope.Configurations) error {
	if !names.Managed() {
		return nil
	}
	// The two sets the conditions can be, written once: the kinds never
	// change while the process runs.
	s := &webhookScope{mgr: mgr, policies: policies, synced: synced, names: names, changed: make(chan struct{}, 1),
		conditions: map[bool][]admissionregistrationv1.MatchCondition{false: webhookscope.Conditions(kinds, false), true: webhookscope.Conditions(kinds, true)}}
	policies.OnChange(func() {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	})
	return mgr.Add(s)
}

type webhookScope struct {
	mgr      ctrl.Manager
	policies *configpolicy.Store
	synced   func() bool
	names    webhookscope.Configurations
	changed  chan struct{}
	// conditions are the wanted conditions, by whether custom rules are
	// in force.
	conditions map[bool][]admissionregistrationv1.MatchCondition
}

func (s *webhookScope) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("webhook-scope")
	// Nothing is decided before every ConfigPolicy is loaded: the empty
	// set has no custom rules, and would put the config condition on
	// wrongly.
	for !s.synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	var last *bool
	wait := webhookScopeResync
	for {
		custom := s.policies.Current().Version.WantsObjects
		if err := webhookscope.Apply(ctx, s.mgr.GetAPIReader(), s.mgr.GetClient(), s.names, s.conditions[custom]); err != nil {
			log.Error(err, "could not scope the workload webhooks; retrying (until then they keep the scope they have)")
			wait = 5 * time.Second
		} else {
			if last == nil || *last != custom {
				log.Info("workload webhooks scoped", "skipWritesWithoutConfig", !custom,
					"why", map[bool]string{false: "no ConfigPolicy in force has custom rules", true: "custom rules are in force and may judge any workload"}[custom])
				last = &custom
			}
			wait = webhookScopeResync
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
		case <-time.After(wait):
		}
	}
}
