package rollouts

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// configChanged enqueues, after the batch window, the consumers of a
// ConfigMap or Secret whose content or reload mode changed, or of a
// SecretProviderClass whose reload mode changed. Deletions are
// ignored on purpose: rolling a workload onto config that no longer exists
// would replace running pods with pods that cannot start. What changed is
// logged apart from this, by logCauses, which then tells the rollout of
// the change again (GenericFunc, through loggedChanges).
func (r *rollout) configChanged(kind refs.Kind) handler.EventHandler {
	enqueue := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if r.deliveredInWaves(ctx, kind, obj) {
			return // its delivery's waves enqueue the consumers (wavesStarted)
		}
		for _, key := range rolledConsumers(ctx, r.inv, []workload.Kind{r.typ.Kind}, kind, obj) {
			q.AddAfter(reconcile.Request{NamespacedName: key.NamespacedName}, r.window)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// Objects listed at start-up did not change; a real creation
			// turns a missing reference into content.
			if !e.IsInInitialList {
				enqueue(ctx, e.Object, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if inventory.ContentChanged(e.ObjectOld, e.ObjectNew) {
				enqueue(ctx, e.ObjectNew, q)
			}
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}

// loggedChanges tells each rollout controller (by its kind) of a changed
// ConfigMap, Secret or SecretProviderClass (by its kind) once the change
// is in the log. The controller's own watch of the object and logCauses
// are two handlers of one informer, called in no set order: a workload
// configward never stamped rolls only for a logged change (stamp.Early:
// installing configward restarts nothing), so when the watch's enqueue
// is looked at first (a zero batch window) the look finds no change and
// the workload would keep its old config. The look this enqueues comes
// after the log, and finds it.
type loggedChanges map[*workload.Type]map[refs.Kind]chan event.GenericEvent

// loggedChangesBuffer bounds what waits for a controller that does not run:
// a standby replica's controllers start only when it leads.
const loggedChangesBuffer = 1024

func newLoggedChanges(rolled []*workload.Type, kinds map[refs.Kind]client.Object) loggedChanges {
	out := loggedChanges{}
	for _, t := range rolled {
		out[t] = map[refs.Kind]chan event.GenericEvent{}
		for k := range kinds {
			out[t][k] = make(chan event.GenericEvent, loggedChangesBuffer)
		}
	}
	return out
}

// notify tells every rollout controller that obj, of kind, changed and is
// logged. It never blocks the informer: when a controller's buffer is full
// (a standby's, or a burst), its own watch still enqueues the consumers.
// What waits is the object's name, never the cached object: the enqueue
// reads the rest from the cache when it runs.
func (l loggedChanges) notify(kind refs.Kind, obj client.Object) {
	name := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	for _, byKind := range l {
		select {
		case byKind[kind] <- event.GenericEvent{Object: name}:
		default:
		}
	}
}

// logCauses records in causes, for every top-level workload of the rolled
// kinds that consumes a ConfigMap or Secret whose content changed, that it
// changed. It is registered on the cache's informers before the manager
// starts, not by the rollout controllers when they start: a change made
// once the informers have synced (the process reports ready) is then named
// in the rollout's Event even when the controllers' own watches start after
// it, which would see the changed object only as part of their initial list.
// Once an object's change is logged for some workload, logged is told.
func logCauses(ctx context.Context, c cache.Cache, inv *inventory.Inventory, rolled []workload.Kind, causes *drift.Causes, logged func(refs.Kind, client.Object)) error {
	for kind, obj := range inv.ConfigKinds() {
		informer, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %ss for the change log: %w", kind, err)
		}
		log := func(o any, created bool) {
			obj, ok := o.(client.Object)
			if !ok {
				return
			}
			consumers := rolledConsumers(ctx, inv, rolled, kind, obj)
			for _, key := range consumers {
				if created && !key.startedWithout(obj) {
					// Informers deliver in their own order: under load a
					// ConfigMap created before its consumer may reach this
					// handler after the consumer reached the cache. Its
					// pods started with it, so for them it changed nothing.
					continue
				}
				causes.Add(key.Key, inventory.IndexValue(kind, obj.GetName()), time.Now())
			}
			if len(consumers) > 0 {
				logged(kind, obj)
			}
		}
		_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, isInInitialList bool) {
				if !isInInitialList {
					log(o, true)
				}
			},
			UpdateFunc: func(old, new any) {
				o, okOld := old.(client.Object)
				n, okNew := new.(client.Object)
				if okOld && okNew && inventory.ContentChanged(o, n) {
					log(n, false)
				}
			},
		})
		if err != nil {
			return fmt.Errorf("watching %ss for the change log: %w", kind, err)
		}
	}
	return nil
}

// consumer is a workload rolledConsumers names, with when it was created.
type consumer struct {
	drift.Key
	created metav1.Time
}

// startedWithout says the workload may have started without obj: it was
// not created in a later second than obj (creation times are to the
// second; in the same one the order is unknown, and a creation counts as
// the change it may be).
func (c consumer) startedWithout(obj client.Object) bool {
	created := obj.GetCreationTimestamp()
	return !created.Truncate(time.Second).Before(c.created.Truncate(time.Second))
}

// rolledConsumers names the workloads of kinds that consume obj and are
// rolled by their own rollout controller: not those another workload
// controls, which their owner's rollout replaces.
func rolledConsumers(ctx context.Context, inv *inventory.Inventory, kinds []workload.Kind, kind refs.Kind, obj client.Object) []consumer {
	consumers, err := inv.Consumers(ctx, kinds, kind, obj.GetNamespace(), obj.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing consumers", "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
		return nil
	}
	var out []consumer
	for _, c := range consumers {
		if workload.Controlled(c) {
			continue
		}
		t, ok := inv.Registry().TypeOf(c)
		if !ok {
			continue // listed for one of kinds, so never
		}
		out = append(out, consumer{Key: drift.Key{Group: t.Group, Kind: t.Kind.Kind,
			NamespacedName: types.NamespacedName{Namespace: c.GetNamespace(), Name: c.GetName()}}, created: c.GetCreationTimestamp()})
	}
	return out
}
