// Package policies holds the controllers of configward's own policy
// objects and of what follows from them: ConfigPolicy and ConfigSchema
// status (Ready, RevisionsReady), the labels that mark governed
// namespaces, and the matchConditions of configward's workload webhooks
// (webhookscope).
package policies

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
)

// +kubebuilder:rbac:groups=configward.dev,resources=configpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=configward.dev,resources=configpolicies/status,verbs=get;update;patch

// SetupConfigPolicies registers the ConfigPolicy reconciler: it reports
// what is in force as the store that applies the policies (the same as the
// webhook's) holds it: whether this generation is in force (Ready, with
// every problem, alone or with the other policies, when it is not), the
// generation it looked at, and the hash of the generation in force, which
// stays the last good one when a generation fails. Any change of the set
// in force reports every policy again: deleting the policy another clashed
// with puts the other in force.
//
// Where a policy turns revisions on, RevisionsReady says whether configward's
// controller can write what they need: its RBAC, a trial write (a
// server-side dry run, which quotas, RBAC and admission webhooks judge as
// a real write, configward's own among them) of a snapshot and, with
// delivery, of a delivery record, in a namespace the policy selects, and
// the namespaces where real writes fail now. It is judged at start, on
// any change, and again every trialEvery while it is False.
func SetupConfigPolicies(mgr ctrl.Manager, policies *configpolicy.Store, trials WriteTrials) error {
	r := &configPolicies{client: mgr.GetClient(), policies: policies, trials: trials}
	setChanged := make(chan event.TypedGenericEvent[*v1alpha1.ConfigPolicy], 1)
	policies.OnChange(func() {
		select {
		case setChanged <- event.TypedGenericEvent[*v1alpha1.ConfigPolicy]{Object: &v1alpha1.ConfigPolicy{}}:
		default:
		}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("configpolicy").
		For(&v1alpha1.ConfigPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(setChanged, handler.TypedEnqueueRequestsFromMapFunc(r.everyPolicy))).
		// A namespace where snapshot writes start or stop failing changes
		// the RevisionsReady of the policies that select it.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return r.everyPolicy(ctx, nil)
		}), builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		Complete(r)
}

// WriteTrials try, by a server-side dry run in a namespace, the writes
// revisions and delivery need of configward's controller; each returns
// the refusal, nil when the write would succeed.
type WriteTrials struct {
	Snapshot, Record func(ctx context.Context, namespace string) error
}

// trialEvery is how often a RevisionsReady that is False is judged again.
const trialEvery = 30 * time.Second

var trialRefused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configward_write_trial_refused",
	Help: "1 while the last trial write (a server-side dry run) of what revisions and delivery need of configward's controller was refused, by object: snapshot, delivery-record. The RevisionsReady condition of the ConfigPolicy says by whom.",
}, []string{"object"})

func init() { metrics.Registry.MustRegister(trialRefused) }

type configPolicies struct {
	client   client.Client
	policies *configpolicy.Store
	trials   WriteTrials
}

func (r *configPolicies) everyPolicy(ctx context.Context, _ *v1alpha1.ConfigPolicy) []reconcile.Request {
	var list v1alpha1.ConfigPolicyList
	if err := r.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ConfigPolicies to report the set in force")
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, cp := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: cp.Name}}
	}
	return out
}

func (r *configPolicies) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cp v1alpha1.ConfigPolicy
	if err := r.client.Get(ctx, req.NamespacedName, &cp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	outcome, seen := r.policies.OutcomeOf(cp.Name)
	if !seen || outcome.Generation < cp.Generation {
		// The store loads from the same informer and has not got to this
		// generation yet; its change will enqueue every policy again.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	before := cp.DeepCopy()
	inForce := "the built-in defaults apply where it selects (no generation of it ever compiled)"
	if c, ok := r.policies.InForce(cp.Name); ok {
		cp.Status.ActiveHash = c.Hash
		inForce = fmt.Sprintf("generation %d, the last that compiled, stays in force (activeHash)", c.Generation)
	}
	ready := readyCondition(cp.Generation, outcome.Problems, inForce)
	meta.SetStatusCondition(&cp.Status.Conditions, ready)
	var again time.Duration
	if cp.Spec.Revisions.Enabled {
		c, err := r.revisionsReady(ctx, cp)
		if err != nil {
			return reconcile.Result{}, err
		}
		meta.SetStatusCondition(&cp.Status.Conditions, c)
		if c.Status == metav1.ConditionFalse {
			again = trialEvery
		}
	} else {
		meta.RemoveStatusCondition(&cp.Status.Conditions, v1alpha1.ConditionRevisionsReady)
	}
	cp.Status.ObservedGeneration = cp.Generation
	if equality.Semantic.DeepEqual(before.Status, cp.Status) {
		return reconcile.Result{RequeueAfter: again}, nil
	}
	ctrl.LoggerFrom(ctx).Info("ConfigPolicy status", "ready", ready.Status, "reason", ready.Reason, "activeHash", cp.Status.ActiveHash)
	return reconcile.Result{RequeueAfter: again}, r.client.Status().Update(ctx, &cp)
}

// revisionsReady says whether configward's controller may write and delete
// the snapshots the policy's revisions need (the chart grants it with
// revisions.enabled and revisions.secrets): without it, the revisions the
// policy turns on would never be rolled out.
func (r *configPolicies) revisionsReady(ctx context.Context, cp v1alpha1.ConfigPolicy) (metav1.Condition, error) {
	resources := []string{"configmaps"}
	if cp.Spec.Revisions.Secrets {
		resources = append(resources, "secrets")
	}
	var missing []string
	for _, res := range resources {
		for _, verb := range []string{"create", "delete"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: res}}}
			if err := r.client.Create(ctx, review); err != nil {
				return metav1.Condition{}, fmt.Errorf("asking whether the controller may %s %s: %w", verb, res, err)
			}
			if !review.Status.Allowed {
				missing = append(missing, verb+" "+res)
			}
		}
	}
	c := metav1.Condition{Type: v1alpha1.ConditionRevisionsReady, ObservedGeneration: cp.Generation,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSnapshotsWritable, Message: "configward's controller may write and delete the config snapshots revisions need"}
	if len(missing) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonSnapshotsForbidden
		c.Message = fmt.Sprintf("configward's controller may not %s cluster-wide, so no revision it turns on can be rolled out: install the chart with revisions.enabled=true%s",
			strings.Join(missing, ", "), map[bool]string{true: " and revisions.secrets=true", false: ""}[cp.Spec.Revisions.Secrets])
		return c, nil
	}
	selected, blocked, err := r.selected(ctx, cp)
	if err != nil {
		return metav1.Condition{}, err
	}
	if len(blocked) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonSnapshotsBlocked
		c.Message = "config snapshots cannot be written in " + strings.Join(blocked, "; ") +
			": new revisions there name no snapshot that is not written, and their pods read the originals. configward tries again every few seconds"
		return c, nil
	}
	if len(selected) == 0 {
		return c, nil
	}
	if refused := r.tryWrites(ctx, cp, selected[0]); refused != "" {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonSnapshotsRefused
		c.Message = refused
	}
	return c, nil
}

// selected lists the namespaces cp selects, sorted, and those of them where
// snapshot writes fail now, each with why.
func (r *configPolicies) selected(ctx context.Context, cp v1alpha1.ConfigPolicy) (selected, blocked []string, err error) {
	sel := labels.Everything()
	if cp.Spec.NamespaceSelector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(cp.Spec.NamespaceSelector); err != nil {
			return nil, nil, nil // refused at admission; selects nobody
		}
	}
	var list corev1.NamespaceList
	if err := r.client.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, nil, fmt.Errorf("listing the namespaces a ConfigPolicy selects: %w", err)
	}
	for _, ns := range list.Items {
		if ns.DeletionTimestamp != nil {
			continue
		}
		selected = append(selected, ns.Name)
		if why := ns.Annotations[v1alpha1.SnapshotsBlockedAnnotation]; why != "" {
			blocked = append(blocked, fmt.Sprintf("namespace %s (%s)", ns.Name, why))
		}
	}
	slices.Sort(selected)
	slices.Sort(blocked)
	return selected, blocked, nil
}

// tryWrites tries the writes cp's revisions (and delivery) need in
// namespace, and says what refuses them ("" when nothing does).
func (r *configPolicies) tryWrites(ctx context.Context, cp v1alpha1.ConfigPolicy, namespace string) string {
	trials := []struct {
		object string
		try    func(context.Context, string) error
		needed bool
	}{
		{"snapshot", r.trials.Snapshot, true},
		{"delivery-record", r.trials.Record, cp.Spec.Delivery != nil},
	}
	var refused []string
	for _, t := range trials {
		if !t.needed || t.try == nil {
			continue
		}
		err := t.try(ctx, namespace)
		if err == nil {
			trialRefused.WithLabelValues(t.object).Set(0)
			continue
		}
		trialRefused.WithLabelValues(t.object).Set(1)
		ctrl.LoggerFrom(ctx).Error(err, "configward's controller cannot write what revisions need", "configpolicy", cp.Name, "object", t.object, "namespace", namespace)
		refused = append(refused, fmt.Sprintf("a trial write of a %s in namespace %s was refused (%v)", strings.ReplaceAll(t.object, "-", " "), namespace, err))
	}
	if len(refused) == 0 {
		return ""
	}
	return strings.Join(refused, "; ") + ". Where configward's own webhook refuses it, start the webhook with --configward-service-accounts naming the controller's service account (the chart does)"
}
