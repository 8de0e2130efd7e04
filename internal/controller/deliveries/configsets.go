package deliveries

// Declared change sets: a ConfigSet names configs a pipeline writes
// together, each carrying the set's version. Its changes are delivered by
// one record once every member carries the version (configset.Judge
// decides); until then, and after its timeout, the members' own looks
// start nothing.
//
// +kubebuilder:rbac:groups=configward.dev,resources=configsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=configward.dev,resources=configsets/status,verbs=get;update

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configset"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// configSets reconciles ConfigSets with the delivery controller's reads
// and its start.
type configSets struct{ d *deliveries }

// setupConfigSets registers the ConfigSet controller: a set is looked at
// when it, one of its members, or one of its deliveries changes, and every
// set when the ConfigPolicies in force change (delivery turned on or off,
// revisions.secrets: what decides whether its members can move together).
func setupConfigSets(mgr ctrl.Manager, d *deliveries) error {
	c := &configSets{d: d}
	members := func(kind refs.Kind) handler.MapFunc {
		return func(ctx context.Context, o client.Object) []reconcile.Request {
			return c.setsListing(ctx, o.GetNamespace(), revision.Source{Kind: kind, Name: o.GetName()})
		}
	}
	policiesChanged := make(chan event.TypedGenericEvent[*v1alpha1.ConfigSet], 1)
	d.opts.Policies.OnChange(func() {
		select {
		case policiesChanged <- event.TypedGenericEvent[*v1alpha1.ConfigSet]{Object: &v1alpha1.ConfigSet{}}:
		default: // one pending look covers every change before it
		}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("configset").
		WatchesRawSource(source.Channel(policiesChanged, handler.TypedEnqueueRequestsFromMapFunc(c.every))).
		For(&v1alpha1.ConfigSet{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(members(refs.ConfigMap))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(members(refs.Secret))).
		Watches(&v1alpha1.ConfigDelivery{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if s := o.(*v1alpha1.ConfigDelivery).Spec.ConfigSet; s != nil {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: s.Name}}}
			}
			return nil
		})).
		Complete(c)
}

// every asks for a look at every ConfigSet.
func (c *configSets) every(ctx context.Context, _ *v1alpha1.ConfigSet) []reconcile.Request {
	var list v1alpha1.ConfigSetList
	if err := c.d.cache.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ConfigSets to look at them after a ConfigPolicy change")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// setsListing are the sets of ns that list src.
func (c *configSets) setsListing(ctx context.Context, ns string, src revision.Source) []reconcile.Request {
	sets, err := c.d.sets(ctx, ns)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ConfigSets")
		return nil
	}
	var out []reconcile.Request
	for i := range sets {
		if configset.Lists(&sets[i], src) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: sets[i].Name}})
		}
	}
	return out
}

// sets lists the ConfigSets of ns from the cache.
func (d *deliveries) sets(ctx context.Context, ns string) ([]v1alpha1.ConfigSet, error) {
	var list v1alpha1.ConfigSetList
	if err := d.cache.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the ConfigSets of %s: %w", ns, err)
	}
	return list.Items, nil
}

// claimant is the ConfigSet src belongs to (configset.Claimant), nil when
// none.
func (d *deliveries) claimant(ctx context.Context, ns string, src revision.Source) (*v1alpha1.ConfigSet, error) {
	sets, err := d.sets(ctx, ns)
	if err != nil {
		return nil, err
	}
	return configset.Claimant(sets, src), nil
}

// Reconcile looks at one set: it gathers what configset.Judge needs,
// starts the delivery of a complete version, and writes the set's status.
func (c *configSets) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := c.d
	var set v1alpha1.ConfigSet
	if err := d.client.Get(ctx, req.NamespacedName, &set); err != nil {
		// A deleted set's deliveries live on: records never name it as
		// their owner, and an open one is never lost.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ns := set.Namespace
	policy, err := d.opts.Policies.For(ctx, d.client, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	sets, err := d.sets(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	seen := configset.Seen{Members: map[revision.Source]configset.Member{}, DeliveryOn: policy.Delivery != nil, ClaimedBy: map[revision.Source]string{}}
	cs := &changeSet{currents: revision.Snapshots{}, configs: map[revision.Source]inventory.Object{},
		declared: &v1alpha1.ConfigSetVersion{Name: set.Name, Version: set.Spec.Version, Generation: set.Generation}}
	seenRecs := map[string]bool{}
	for _, m := range configset.Members(&set) {
		if owner := configset.Claimant(sets, m); owner != nil && owner.Name != set.Name {
			seen.ClaimedBy[m] = owner.Name
		}
		o, err := d.inv.Get(ctx, m.Kind, ns, m.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		got := configset.Member{Exists: o.Exists, Version: o.Annotations[v1alpha1.ConfigSetVersionAnnotation], Hot: configset.Hot(o.Mode)}
		// Hot config is delivered through channels, the rest in waves of
		// workloads.
		got.Delivered = delivery.Delivered(o, policy)
		if got.Hot {
			got.Delivered = delivery.Channelled(o, policy)
		}
		if o.Exists {
			got.Current = d.inv.SnapshotName(d.opts.Keys.Current().Bytes(), o)
		}
		seen.Members[m] = got
		cs.members = append(cs.members, m)
		cs.currents[m], cs.configs[m] = got.Current, o
		recs, err := d.opts.Records.Of(ctx, ns, m)
		if err != nil {
			return reconcile.Result{}, err
		}
		for _, r := range recs {
			if !seenRecs[r.Name] {
				seenRecs[r.Name] = true
				cs.recs = append(cs.recs, r)
			}
		}
	}
	delivery.SortNewestFirst(cs.recs)
	seen.Records = cs.recs
	v := configset.Judge(&set, seen, time.Now())
	res := reconcile.Result{RequeueAfter: v.Requeue}
	if v.Start {
		// Hot members (Judge lets in no mix) are delivered through their
		// channels, once one holds other content; the others in waves of
		// the workloads that consume them, once one is behind.
		hot := seen.Members[cs.members[0]].Hot
		var begin func(*v1alpha1.ConfigDelivery) delivery.Step
		if hot {
			h, err := d.hotWaves(ctx, ns, cs.members, cs.currents, policy.Delivery.Waves)
			if err != nil {
				return reconcile.Result{}, err
			}
			if h.behind {
				begin = h.begin(cs.currents)
			}
		} else {
			consumers, err := d.setConsumers(ctx, ns, cs)
			if err != nil {
				return reconcile.Result{}, err
			}
			if len(consumers) > 0 {
				begin = func(rec *v1alpha1.ConfigDelivery) delivery.Step {
					return delivery.Begin(rec, cs.currents, consumers, time.Now())
				}
			}
		}
		if begin == nil {
			seen.NoConsumers = true
			v = configset.Judge(&set, seen, time.Now())
		} else {
			key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "ConfigSet/" + set.Name}}
			if res, err = d.start(ctx, key, cs, policy, hot, begin); err != nil {
				return res, err
			}
		}
	}
	if equalStatus(set.Status, v.Status) {
		return res, nil
	}
	set.Status = v.Status
	if err := d.client.Status().Update(ctx, &set); err != nil && !apierrors.IsConflict(err) {
		return res, err
	}
	return res, nil
}

// equalStatus says whether writing now would change nothing but the
// conditions' transition times.
func equalStatus(a, b v1alpha1.ConfigSetStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Version != b.Version || a.Delivery != b.Delivery || len(a.WaitingFor) != len(b.WaitingFor) ||
		len(a.Conditions) != len(b.Conditions) || !a.WaitingSince.Equal(b.WaitingSince) {
		return false
	}
	for i := range a.WaitingFor {
		if a.WaitingFor[i] != b.WaitingFor[i] {
			return false
		}
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
