package deliveries

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// eventAction is the action of every Event the delivery controller
// records.
const eventAction = "Deliver"

// advance moves an open delivery on by one step (see delivery.Next). The
// gate of the current wave is read only when the step depends on it.
func (d *deliveries) advance(ctx context.Context, rec *v1alpha1.ConfigDelivery) (reconcile.Result, error) {
	obs := delivery.Observation{Now: time.Now(), LastProgressWrite: d.lastProgressWrite(rec.UID)}
	step := delivery.Next(rec, obs)
	if step.NeedsGate {
		var g delivery.Gate
		// The bake judges only its checks; a wave, the workloads of every
		// wave judged (one, or every wave of an immediate delivery).
		for _, i := range delivery.Judged(rec) {
			gate := d.gate
			if rec.Spec.Hot {
				gate = d.hotGate
			}
			if err := gate(ctx, rec, i, &g); err != nil {
				return reconcile.Result{}, err
			}
		}
		// Checks measure a healthy wave only: Next drops what they would
		// say of one that is not, so the queries would be wasted.
		var ms []delivery.Measurement
		if g.Healthy() {
			var err error
			if ms, err = d.measure(ctx, rec); err != nil {
				return reconcile.Result{}, err
			}
		}
		// The gate's reads take a while; the time the step counts with is
		// the time it saw the workloads.
		obs.Gate, obs.Measurements, obs.Now = &g, ms, time.Now()
		step = delivery.Next(rec, obs)
	}
	return d.take(ctx, rec, step)
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
		rec.Status = step.Status
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

// record records a step's Events: on the delivered config (read once, and
// only when an Event goes there), or on each workload named that is still
// there.
func (d *deliveries) record(ctx context.Context, rec *v1alpha1.ConfigDelivery, events []delivery.Event) {
	var config client.Object
	configRead := false
	for _, e := range events {
		if len(e.Workloads) == 0 {
			if !configRead {
				config, configRead = d.configObject(ctx, rec), true
			}
			if config != nil {
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

// gate judges the workloads of started wave i into g (see
// delivery.HealthOf).
func (d *deliveries) gate(ctx context.Context, rec *v1alpha1.ConfigDelivery, i int, g *delivery.Gate) error {
	src := delivered(rec)
	for _, t := range rec.Status.Waves[i].Workloads {
		w, found, err := d.get(ctx, rec.Namespace, t)
		if err != nil {
			return err
		}
		if !found {
			continue // deleted: nothing to wait for
		}
		to := rec.Status.To
		if delivery.RolledBack(rec, i) {
			to = t.From
		}
		pods, err := d.pods(ctx, w)
		if err != nil {
			return err
		}
		state, msg := delivery.HealthOf(w, src, to, pods)
		g.Add(t, state, msg)
	}
	return nil
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

// pods lists a workload's pods by its selector, from the cache.
func (d *deliveries) pods(ctx context.Context, w workload.Object) ([]*corev1.Pod, error) {
	sel := w.Selector()
	if sel == nil {
		return nil, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil, nil
	}
	var list corev1.PodList
	if err := d.client.List(ctx, &list, client.InNamespace(w.Obj.GetNamespace()), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if p := &list.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
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
func (d *deliveries) configObject(ctx context.Context, rec *v1alpha1.ConfigDelivery) client.Object {
	var obj client.Object = &corev1.ConfigMap{}
	if rec.Spec.Config.Kind == string(refs.Secret) {
		obj = &corev1.Secret{}
	}
	key := client.ObjectKey{Namespace: rec.Namespace, Name: rec.Spec.Config.Name}
	if err := d.cache.Get(ctx, key, obj); err != nil {
		ctrl.LoggerFrom(ctx).Info("no Event on the delivered config", "error", err.Error())
		return nil
	}
	return obj
}
