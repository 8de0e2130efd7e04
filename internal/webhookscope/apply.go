package webhookscope

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the field manager of the condition: server-side apply
// keeps what it owns (the condition, nothing else) apart from what Helm and
// cert-manager's CA injector write to the same configurations.
const FieldOwner = "configward-webhook-scope"

// Configurations names the webhook configurations holding configward's
// workload webhooks (the chart's release name for both).
type Configurations struct {
	Mutating, Validating string
}

// Managed says whether the configurations are named, i.e. whether this
// process keeps the condition on them.
func (c Configurations) Managed() bool { return c.Mutating != "" && c.Validating != "" }

// Apply makes conditions the matchConditions configward keeps on both
// workload webhooks (taking off those of Names it no longer wants): by
// server-side apply, so only the conditions configward owns come and go. A
// configuration that does not exist is an error, never created: an apply
// would create it. The reader reads from the API server (the
// configurations are not cached: that would need the right to list every
// webhook configuration).
func Apply(ctx context.Context, r client.Reader, w client.Writer, names Configurations, conditions []admissionregistrationv1.MatchCondition) error {
	for _, cfg := range []struct {
		kind, name, webhook string
		mutating            bool
		obj                 client.Object
	}{
		{"MutatingWebhookConfiguration", names.Mutating, ConfigHashWebhook, true, &admissionregistrationv1.MutatingWebhookConfiguration{}},
		{"ValidatingWebhookConfiguration", names.Validating, ValidateWorkloadWebhook, false, &admissionregistrationv1.ValidatingWebhookConfiguration{}},
	} {
		if err := r.Get(ctx, client.ObjectKey{Name: cfg.name}, cfg.obj); err != nil {
			return fmt.Errorf("reading %s %s to scope its workload webhook: %w", cfg.kind, cfg.name, err)
		}
		if slices.Equal(Current(cfg.obj, cfg.webhook), conditions) {
			continue
		}
		var matchConditions []*admissionregistrationv1ac.MatchConditionApplyConfiguration
		for _, c := range conditions {
			matchConditions = append(matchConditions, admissionregistrationv1ac.MatchCondition().WithName(c.Name).WithExpression(c.Expression))
		}
		// With no conditions the configuration names no webhook: applying
		// it releases every condition this field manager owned.
		var apply runtime.ApplyConfiguration
		if cfg.mutating {
			ac := admissionregistrationv1ac.MutatingWebhookConfiguration(cfg.name)
			if len(matchConditions) > 0 {
				ac.WithWebhooks(admissionregistrationv1ac.MutatingWebhook().WithName(cfg.webhook).WithMatchConditions(matchConditions...))
			}
			apply = ac
		} else {
			ac := admissionregistrationv1ac.ValidatingWebhookConfiguration(cfg.name)
			if len(matchConditions) > 0 {
				ac.WithWebhooks(admissionregistrationv1ac.ValidatingWebhook().WithName(cfg.webhook).WithMatchConditions(matchConditions...))
			}
			apply = ac
		}
		if err := w.Apply(ctx, apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying configward's matchConditions to %s %s: %w", cfg.kind, cfg.name, err)
		}
	}
	return nil
}

// Current is the conditions of Names on the named webhook of a
// configuration, in Names' order.
func Current(obj client.Object, webhook string) []admissionregistrationv1.MatchCondition {
	var conditions []admissionregistrationv1.MatchCondition
	switch c := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			if w.Name == webhook {
				conditions = w.MatchConditions
			}
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			if w.Name == webhook {
				conditions = w.MatchConditions
			}
		}
	}
	var out []admissionregistrationv1.MatchCondition
	for _, name := range Names {
		for _, m := range conditions {
			if m.Name == name {
				out = append(out, m)
			}
		}
	}
	return out
}
