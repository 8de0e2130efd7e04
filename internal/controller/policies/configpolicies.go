// Package policies holds the controllers of configward's own policy
// objects and of what follows from them: ConfigPolicy and ConfigSchema
// status (Ready, RevisionsReady), the labels that mark governed
// namespaces, and the matchConditions of configward's workload webhooks
// (webhookscope).
package policies

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if cp.Spec.Revisions.Enabled {
		c, err := r.revisionsReady(ctx, cp)
		if err != nil {
			return reconcile.Result{}, err
		}
		meta.SetStatusCondition(&cp.Status.Conditions, c)
	} else {
		meta.RemoveStatusCondition(&cp.Status.Conditions, v1alpha1.ConditionRevisionsReady)
	}
	cp.Status.ObservedGeneration = cp.Generation
	if equality.Semantic.DeepEqual(before.Status, cp.Status) {
		return reconcile.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("ConfigPolicy status", "ready", ready.Status, "reason", ready.Reason, "activeHash", cp.Status.ActiveHash)
	return reconcile.Result{}, r.client.Status().Update(ctx, &cp)
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
	}
	return c, nil
}
