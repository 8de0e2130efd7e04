package policies

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configschema"
)

// The schema reconciler reads ConfigMap values directly from the API server
// (the shared cache holds digests only), which is fine off the admission
// path and only happens when a schema changes.
//
// +kubebuilder:rbac:groups=configward.dev,resources=configschemas,verbs=get;list;watch
// +kubebuilder:rbac:groups=configward.dev,resources=configschemas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// readyCondition reports whether a generation compiled and is in force;
// when it did not, the message gives every problem (the same list the
// webhook refuses a new generation with) and what is in force instead.
func readyCondition(generation int64, problems field.ErrorList, inForceOnFailure string) metav1.Condition {
	if len(problems) > 0 {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCompileFailed,
			Message: fmt.Sprintf("%v; %s", problems.ToAggregate(), inForceOnFailure), ObservedGeneration: generation}
	}
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCompiled,
		Message: "this generation compiled and is in force", ObservedGeneration: generation}
}

// maxStatusViolations bounds status.violations.
const maxStatusViolations = 5

// SetupConfigSchemas registers the ConfigSchema reconciler: it reports
// whether each generation compiled (Ready), and audits the ConfigMaps the
// schema already governs when the schema is created or changed.
func SetupConfigSchemas(mgr ctrl.Manager) error {
	r := &configSchemas{client: mgr.GetClient(), values: mgr.GetAPIReader()}
	return ctrl.NewControllerManagedBy(mgr).
		Named("configschema").
		For(&v1alpha1.ConfigSchema{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

type configSchemas struct {
	client client.Client
	values client.Reader
}

func (r *configSchemas) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cs v1alpha1.ConfigSchema
	if err := r.client.Get(ctx, req.NamespacedName, &cs); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := cs.DeepCopy()
	compiled, errs := configschema.Validate(&cs)
	ready := readyCondition(cs.Generation, errs, "the last generation that compiled stays in force")
	meta.SetStatusCondition(&cs.Status.Conditions, ready)
	cs.Status.ObservedGeneration = cs.Generation

	if compiled != nil {
		var cms corev1.ConfigMapList
		if err := r.values.List(ctx, &cms, client.InNamespace(cs.Namespace)); err != nil {
			return reconcile.Result{}, err
		}
		cs.Status.GovernedConfigMaps, cs.Status.ViolatingConfigMaps, cs.Status.Violations = 0, 0, nil
		for i := range cms.Items {
			cm := &cms.Items[i]
			if !configschema.Governs(&cs, cm.Name, cm.Labels, cm.Annotations) {
				continue
			}
			cs.Status.GovernedConfigMaps++
			vs := compiled.Validate(cm.Data, cm.BinaryData)
			if len(vs) == 0 {
				continue
			}
			cs.Status.ViolatingConfigMaps++
			if len(cs.Status.Violations) < maxStatusViolations {
				cs.Status.Violations = append(cs.Status.Violations, v1alpha1.ConfigMapViolation{Name: cm.Name, Error: vs[0].String()})
			}
		}
	}
	if err := r.client.Status().Patch(ctx, &cs, client.MergeFrom(before)); err != nil {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("ConfigSchema reconciled", "ready", ready.Status, "governed", cs.Status.GovernedConfigMaps,
		"violating", cs.Status.ViolatingConfigMaps)
	return reconcile.Result{}, nil
}
