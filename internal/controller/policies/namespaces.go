package policies

import (
	"context"

	corev1 "k8s.io/api/core/v1"
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
	"github.com/configward/configward/internal/controller"
)

// The namespace labeller keeps configward's two namespace labels true:
// v1alpha1.ChangeControlLabel on namespaces under change control and
// v1alpha1.ConfigSchemasLabel on namespaces that hold a ConfigSchema. The
// Helm chart scopes the fail-closed copies of the change-control and schema
// webhooks to these labels and lets the copies for every other namespace
// fail open, so an outage of configward blocks ConfigMap and Secret writes
// only where configward enforces something. The third,
// v1alpha1.HotChannelsLabel on namespaces where delivery is on, sends their
// pods to the Pod path (pod-channels.configward.dev), which points their hot
// config at channels; other namespaces' pods never reach it. A label
// removed by hand comes back at once (the removal is itself a namespace
// event).
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch

// SetupNamespaceLabels registers the labeller. governed says whether change
// control governs a namespace; it is re-asked for every namespace whenever
// the ConfigPolicies in force change.
func SetupNamespaceLabels(mgr ctrl.Manager, policies *configpolicy.Store, governed func(*corev1.Namespace) bool) error {
	r := &namespaceLabels{client: mgr.GetClient(), governed: governed, policies: policies}
	policiesChanged := make(chan event.TypedGenericEvent[*corev1.Namespace], 1)
	policies.OnChange(func() {
		select {
		case policiesChanged <- event.TypedGenericEvent[*corev1.Namespace]{Object: &corev1.Namespace{}}:
		default: // one pending re-evaluation covers every change before it
		}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("namespace-labels").
		For(&corev1.Namespace{}, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1alpha1.ConfigSchema{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
		})).
		WatchesRawSource(source.Channel(policiesChanged, handler.TypedEnqueueRequestsFromMapFunc(r.everyNamespace))).
		Complete(r)
}

type namespaceLabels struct {
	client   client.Client
	governed func(*corev1.Namespace) bool
	policies *configpolicy.Store
}

func (r *namespaceLabels) everyNamespace(ctx context.Context, _ *corev1.Namespace) []reconcile.Request {
	return controller.EveryNamespace(ctx, r.client, "to re-label after a ConfigPolicy change")
}

func (r *namespaceLabels) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ns corev1.Namespace
	if err := r.client.Get(ctx, req.NamespacedName, &ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	var schemas v1alpha1.ConfigSchemaList
	if err := r.client.List(ctx, &schemas, client.InNamespace(ns.Name), client.Limit(1)); err != nil {
		return reconcile.Result{}, err
	}
	before := ns.DeepCopy()
	changed := setLabel(&ns, v1alpha1.ChangeControlLabel, v1alpha1.ChangeControlGoverned, r.governed(&ns))
	changed = setLabel(&ns, v1alpha1.HotChannelsLabel, "true", r.policies.Current().For(&ns).Delivery != nil) || changed
	changed = setLabel(&ns, v1alpha1.ConfigSchemasLabel, v1alpha1.ConfigSchemasPresent, len(schemas.Items) > 0) || changed
	if !changed {
		return reconcile.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("namespace labels", v1alpha1.ChangeControlLabel, ns.Labels[v1alpha1.ChangeControlLabel],
		v1alpha1.ConfigSchemasLabel, ns.Labels[v1alpha1.ConfigSchemasLabel], v1alpha1.HotChannelsLabel, ns.Labels[v1alpha1.HotChannelsLabel])
	return reconcile.Result{}, r.client.Patch(ctx, &ns, client.MergeFrom(before))
}

// setLabel makes key=value present or absent, and reports a change.
func setLabel(ns *corev1.Namespace, key, value string, present bool) bool {
	current, has := ns.Labels[key]
	switch {
	case present && (!has || current != value):
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[key] = value
		return true
	case !present && has:
		delete(ns.Labels, key)
		return true
	}
	return false
}
