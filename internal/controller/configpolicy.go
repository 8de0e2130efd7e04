package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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
func SetupConfigPolicies(mgr ctrl.Manager, policies *configpolicy.Store) error {
	r := &configPolicies{client: mgr.GetClient(), policies: policies}
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
		Complete(r)
}

type configPolicies struct {
	client   client.Client
	policies *configpolicy.Store
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
	cp.Status.ObservedGeneration = cp.Generation
	if equality.Semantic.DeepEqual(before.Status, cp.Status) {
		return reconcile.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("ConfigPolicy status", "ready", ready.Status, "reason", ready.Reason, "activeHash", cp.Status.ActiveHash)
	return reconcile.Result{}, r.client.Status().Update(ctx, &cp)
}
