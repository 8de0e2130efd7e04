package rollouts

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// deliveredInWaves reports whether changes of obj are delivered in waves:
// its consumers then move only when their wave starts, so a change need
// not put each of them through the queue ahead of the first wave.
func (r *rollout) deliveredInWaves(ctx context.Context, kind refs.Kind, obj client.Object) bool {
	if r.records == nil {
		return false
	}
	s, err := r.policies.For(ctx, r.client, obj.GetNamespace())
	if err != nil || s.Delivery == nil {
		return false
	}
	o, err := r.inv.Get(ctx, kind, obj.GetNamespace(), obj.GetName())
	return err == nil && delivery.Delivered(o, s)
}

// wavesStarted enqueues the workloads of the controller's kind that a
// delivery moves now: those of its current wave (started: their pins are
// lifted; rolled back: pinned again) and of the waves started or rolled
// back with it (an immediate delivery starts every wave; a failed bake
// rolls every wave back), and every one of a cancelled delivery, which
// plain rollouts take over. The delivery controller writes
// a wave's start before this runs, so the record is what every replica
// and every later leader reads. Earlier waves were moved when they
// started; a restarted controller finds them with its first look at
// every workload.
func (r *rollout) wavesStarted(ctx context.Context, obj client.Object) []reconcile.Request {
	rec, ok := obj.(*v1alpha1.ConfigDelivery)
	if !ok {
		return nil
	}
	moved := delivery.Moved(rec)
	var waves []v1alpha1.WaveStatus
	for _, i := range moved {
		waves = append(waves, rec.Status.Waves[i])
	}
	// Consumers created during the delivery belong to the last wave.
	last := len(moved) > 0 && moved[len(moved)-1] == len(rec.Status.Waves)-1
	kind := r.typ.RecordKind()
	src := inventory.IndexValue(refs.Kind(rec.Spec.Config.Kind), rec.Spec.Config.Name)
	seen := map[string]bool{}
	var out []reconcile.Request
	add := func(name, wave string) {
		if seen[name] {
			return
		}
		seen[name] = true
		nn := types.NamespacedName{Namespace: rec.Namespace, Name: name}
		// A cancelled delivery moves nothing any more: its plain rollout
		// names the config alone.
		note := ""
		if rec.Status.State != v1alpha1.DeliveryCancelled {
			note = fmt.Sprintf("delivery %s, wave %s", rec.Name, wave)
		}
		r.causes.Note(r.key(nn), src, note, time.Now())
		out = append(out, reconcile.Request{NamespacedName: nn})
	}
	for _, w := range waves {
		for _, t := range w.Workloads {
			if t.Kind == kind {
				add(t.Name, w.Name)
			}
		}
	}
	if last && len(waves) > 0 {
		// Consumers created during the delivery belong to the last wave
		// without being placed: they are found by what they consume (any
		// member of a change set).
		for _, m := range delivery.Members(rec) {
			consumers, err := r.inv.Consumers(ctx, []workload.Kind{r.typ.Kind}, m.Kind, rec.Namespace, m.Name)
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing the consumers of a delivered config", "delivery", rec.Name)
			}
			for _, o := range consumers {
				add(o.GetName(), waves[len(waves)-1].Name)
			}
		}
	}
	return out
}
