package deliveries

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// eventAction is the action of every Event the delivery controller
// records.
const eventAction = "Deliver"

// advance moves an open delivery on by one step (see delivery.Next). When
// the step depends on the gate, the controller looks once (look) at what
// the gate and the checks read, and Next decides with it.
func (d *deliveries) advance(ctx context.Context, rec *v1alpha1.ConfigDelivery) (reconcile.Result, error) {
	obs := delivery.Observation{Now: time.Now(), LastProgressWrite: d.lastProgressWrite(rec.UID)}
	step := delivery.Next(rec, obs)
	if step.NeedsGate {
		looked := obs.Now
		seen, err := d.look(ctx, rec, looked)
		if err != nil {
			return reconcile.Result{}, err
		}
		// The look takes a while; the time the step counts with is the
		// time it saw the workloads.
		obs.Now = time.Now()
		gate := delivery.Judge(rec, seen, obs.Now)
		// Checks measure a healthy wave only: Next drops what they would
		// say of one that is not, so the queries would be wasted.
		if gate.Healthy() {
			if obs.Measurements, err = d.measure(ctx, rec, seen, looked); err != nil {
				return reconcile.Result{}, err
			}
		}
		obs.Gate = &gate
		step = delivery.Next(rec, obs)
	}
	return d.take(ctx, rec, step)
}

// look reads, once, what the gate and the checks of rec read now
// (delivery.Seen), as delivery.ToRead says: the workloads of the waves
// looked at, the pods that read the delivered config, in one lookup of the
// pods index, and for hot config what its channels hold and the content
// their wanted snapshots carry.
func (d *deliveries) look(ctx context.Context, rec *v1alpha1.ConfigDelivery, now time.Time) (delivery.Seen, error) {
	src, ns := delivery.Delivers(rec), rec.Namespace
	reads := delivery.ToRead(rec, now)
	seen := delivery.Seen{Workloads: map[v1alpha1.DeliveryTarget]workload.Object{}, Channels: map[string]string{}, Contents: map[string]string{}}
	for _, t := range reads.Targets {
		w, found, err := d.get(ctx, ns, t)
		if err != nil {
			return seen, err
		}
		if found {
			seen.Workloads[t] = w
		}
	}
	if rec.Spec.Hot {
		for _, m := range delivery.Members(rec) {
			held, err := channel.List(ctx, d.cache, ns, m.Kind, m.Name)
			if err != nil {
				return seen, err
			}
			for _, h := range held {
				seen.Channels[h.Name] = h.Content
			}
		}
		for _, c := range reads.Judged {
			if _, isChannel := seen.Channels[c.Channel]; isChannel {
				continue
			}
			o, err := d.inv.Get(ctx, c.Config.Kind, ns, c.Channel)
			if err != nil {
				return seen, err
			}
			if o.Exists {
				seen.Squatted = append(seen.Squatted, c.Channel)
			}
		}
	}
	key := d.opts.Keys.Current().Bytes()
	for _, s := range reads.Snapshots {
		o, err := d.inv.Get(ctx, s.Config.Kind, ns, s.Snapshot)
		if err != nil {
			return seen, err
		}
		if o.Exists {
			// Reports name a channel's content as its original's.
			seen.Contents[s.Snapshot] = reload.ContentID(key, ns, string(s.Config.Kind), s.Config.Name, o.KeyDigests)
		}
	}
	seen.Pods = map[string][]*corev1.Pod{}
	// Hot config's pods, by the channel they mount; restart-based
	// config's, by the original (Names).
	byKind := map[refs.Kind][]string{src.Kind: reads.Names}
	for _, c := range reads.Channels {
		byKind[c.Config.Kind] = append(byKind[c.Config.Kind], c.Channel)
	}
	for kind, names := range byKind {
		if len(names) == 0 {
			continue
		}
		pods, err := d.inv.PodsReading(ctx, ns, kind, names...)
		if err != nil {
			return seen, err
		}
		maps.Copy(seen.Pods, pods)
	}
	// A change set's pods: those that read any member, each once, under
	// the first member's name (delivery.Seen).
	for _, m := range reads.Members {
		if m == src {
			continue
		}
		more, err := d.inv.PodsReading(ctx, ns, m.Kind, m.Name)
		if err != nil {
			return seen, err
		}
		for _, p := range more[m.Name] {
			if !slices.ContainsFunc(seen.Pods[src.Name], func(q *corev1.Pod) bool { return q.UID == p.UID }) {
				seen.Pods[src.Name] = append(seen.Pods[src.Name], p)
			}
		}
	}
	if rec.Spec.Hot {
		d.reportUnplaced(rec, seen)
	}
	return seen, nil
}

// maxUnplacedSeen bounds the pods remembered as reported.
const maxUnplacedSeen = 10000

// reportUnplaced says, once per pod, of the pods that name a judged wave's
// channel without configward having placed them there (stored before
// channels were refused to their creators, or created while the Pod path
// was down) that no gate counts them: a Warning Event on the pod.
func (d *deliveries) reportUnplaced(rec *v1alpha1.ConfigDelivery, seen delivery.Seen) {
	for _, i := range delivery.Judged(rec) {
		w := rec.Status.Waves[i]
		for _, c := range delivery.WaveChannels(rec, &w) {
			d.reportUnplacedOn(rec, w.Name, c, seen.Pods[c.Channel])
		}
	}
}

// reportUnplacedOn reports the pods among pods that mount channel c of
// wave without configward having placed them there.
func (d *deliveries) reportUnplacedOn(rec *v1alpha1.ConfigDelivery, wave string, c delivery.MemberChannel, pods []*corev1.Pod) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil || channel.Placed(p, c.Channel, wave) {
			continue
		}
		d.mu.Lock()
		if len(d.unplacedSeen) >= maxUnplacedSeen || d.unplacedSeen == nil {
			d.unplacedSeen = map[types.UID]bool{}
		}
		first := !d.unplacedSeen[p.UID]
		d.unplacedSeen[p.UID] = true
		d.mu.Unlock()
		if first {
			d.events.Eventf(p, rec, corev1.EventTypeWarning, "ChannelNotPlaced", "Deliver",
				"pod %s names %s, the channel of wave %s, but configward did not place it there: no gate of delivery %s counts it. Recreate it from its workload, or name the original %s.",
				p.Name, c.Channel, wave, rec.Name, c.Config.Name)
		}
	}
}

// take applies a step and asks for the next look when it says.
func (d *deliveries) take(ctx context.Context, rec *v1alpha1.ConfigDelivery, step delivery.Step) (reconcile.Result, error) {
	if err := d.apply(ctx, rec, step); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: step.Requeue}, nil
}

// apply writes a step's status to rec, then counts its metrics and records
// its Events. The write carries rec's resourceVersion, so a stale leader's
// write fails before anything acts on it.
func (d *deliveries) apply(ctx context.Context, rec *v1alpha1.ConfigDelivery, step delivery.Step) error {
	if step.ProgressWritten {
		d.progressWritten(rec.UID)
	}
	if step.Write {
		rec.Status = delivery.Observe(step.Status, rec.Generation, metav1.Now())
		if err := d.client.Status().Update(ctx, rec); err != nil {
			return err
		}
	}
	for _, o := range step.Metrics.Waves {
		deliveryWaves.WithLabelValues(string(o)).Inc()
	}
	if step.Metrics.Finished != "" {
		deliveriesFinished.WithLabelValues(string(step.Metrics.Finished)).Inc()
	}
	d.record(ctx, rec, step.Events)
	return nil
}

// record records a step's Events: on the delivered config, each member of
// a change set (read once, and only when an Event goes there), or on each
// workload named that is still there.
func (d *deliveries) record(ctx context.Context, rec *v1alpha1.ConfigDelivery, events []delivery.Event) {
	var configs []client.Object
	configsRead := false
	for _, e := range events {
		if len(e.Workloads) == 0 {
			if !configsRead {
				for _, m := range delivery.Members(rec) {
					if o := d.configObject(ctx, rec.Namespace, m); o != nil {
						configs = append(configs, o)
					}
				}
				configsRead = true
			}
			for _, config := range configs {
				d.events.Eventf(config, rec, e.Type, e.Reason, eventAction, "%s", e.Message)
			}
			continue
		}
		for _, t := range e.Workloads {
			if w, found, err := d.get(ctx, rec.Namespace, t); err == nil && found {
				d.events.Eventf(w.Obj, rec, e.Type, e.Reason, eventAction, "%s", e.Message)
			}
		}
	}
}

// get reads a delivery target from the cache.
func (d *deliveries) get(ctx context.Context, ns string, t v1alpha1.DeliveryTarget) (workload.Object, bool, error) {
	for _, typ := range d.types {
		if typ.RecordKind() != t.Kind {
			continue
		}
		obj := typ.New()
		if err := d.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: t.Name}, obj); err != nil {
			return workload.Object{}, false, client.IgnoreNotFound(err)
		}
		return typ.Wrap(obj), true, nil
	}
	return workload.Object{}, false, nil
}

// lastProgressWrite is when the gate progress of record uid was last
// written by the throttle (zero: never).
func (d *deliveries) lastProgressWrite(uid types.UID) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastWrite[uid]
}

func (d *deliveries) progressWritten(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lastWrite[uid] = time.Now()
}

// configObject is the delivered ConfigMap or Secret from the cache (the
// values it holds there are digests), for the Events recorded on it; nil
// when it is gone.
func (d *deliveries) configObject(ctx context.Context, ns string, src revision.Source) client.Object {
	obj := inventory.NewObject(src.Kind)
	key := client.ObjectKey{Namespace: ns, Name: src.Name}
	if err := d.cache.Get(ctx, key, obj); err != nil {
		ctrl.LoggerFrom(ctx).Info("no Event on the delivered config", "error", err.Error())
		return nil
	}
	return obj
}
