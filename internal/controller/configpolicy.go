package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/policystore"
)

// +kubebuilder:rbac:groups=configward.dev,resources=configpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=configward.dev,resources=configpolicies/status,verbs=get;update;patch

// SetupConfigPolicies registers the ConfigPolicy reconciler: it compiles
// each generation as the webhook does and reports whether it is in force
// (Ready), the generation it looked at, and the hash of the generation in
// force — which stays the last good one when a generation fails.
func SetupConfigPolicies(mgr ctrl.Manager) error {
	r := &configPolicies{client: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).
		Named("configpolicy").
		For(&v1alpha1.ConfigPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

type configPolicies struct {
	client client.Client
}

func (r *configPolicies) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cp v1alpha1.ConfigPolicy
	if err := r.client.Get(ctx, req.NamespacedName, &cp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := cp.DeepCopy()
	compiled, errs := policystore.Validate(ctx, &cp)
	inForce := "the built-in defaults apply where it selects (no generation of it ever compiled)"
	if cp.Status.ActiveHash != "" {
		inForce = "the last generation that compiled stays in force (activeHash)"
	}
	ready := readyCondition(cp.Generation, errs, inForce)
	if len(errs) == 0 {
		cp.Status.ActiveHash = compiled.Hash
	}
	meta.SetStatusCondition(&cp.Status.Conditions, ready)
	cp.Status.ObservedGeneration = cp.Generation
	if equality.Semantic.DeepEqual(before.Status, cp.Status) {
		return reconcile.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("ConfigPolicy status", "ready", ready.Status, "reason", ready.Reason, "activeHash", cp.Status.ActiveHash)
	return reconcile.Result{}, r.client.Status().Update(ctx, &cp)
}
