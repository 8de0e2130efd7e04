package deliveries

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/revision"
)

// A hot config's delivery moves no workload: its record's waves are the
// policy's, each with the channel its pods mount, and the channels
// controller writes each wave's channel once the record says the wave
// started (delivery.ChannelContent). The gate is the wave's pods: their
// reload agents' reports, readiness and restarts.

// maybeStartHot starts a delivery of current once a channel of src holds
// other content (see start).
func (d *deliveries) maybeStartHot(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery, config inventory.Object) (reconcile.Result, error) {
	waves, from, pods, outside, behind, err := d.hotWaves(ctx, req.Namespace, src, current, s.Delivery.Waves)
	if err != nil || !behind {
		d.forgetChange(req.NamespacedName)
		return reconcile.Result{}, err
	}
	return d.start(ctx, req, single(src, current, config, recs), s, true, func(rec *v1alpha1.ConfigDelivery) delivery.Step {
		return delivery.BeginHot(rec, current, from, waves, pods, outside, time.Now())
	})
}

// placeHot writes the waves of a hot record whose status is empty (its
// creator stopped before it could).
func (d *deliveries) placeHot(ctx context.Context, rec *v1alpha1.ConfigDelivery, recs []*v1alpha1.ConfigDelivery, src revision.Source, current string) (reconcile.Result, error) {
	waves, from, pods, outside, _, err := d.hotWaves(ctx, rec.Namespace, src, current, rec.Spec.Settings.Waves)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := d.supersede(ctx, rec, recs); err != nil {
		return reconcile.Result{}, err
	}
	return d.take(ctx, rec, delivery.BeginHot(rec, current, from, waves, pods, outside, time.Now()))
}

// hotWaves builds the waves of a delivery of src's content current: per
// wave of the policy, its channel, what the channel holds, and the
// workloads with live pods mounting it; from is what most channels hold,
// pods how many pods mount one, outside the pods that mount the original
// itself (created before delivery was on, or while the Pod path was down),
// and behind whether a channel holds other content than current (none
// written yet: nothing to deliver, the channels controller writes them
// with the current content).
func (d *deliveries) hotWaves(ctx context.Context, ns string, src revision.Source, current string, policyWaves []v1alpha1.Wave) (waves []v1alpha1.WaveStatus, from string, pods int, outside []string, behind bool, err error) {
	held, err := channel.List(ctx, d.cache, ns, src.Kind, src.Name)
	if err != nil {
		return nil, "", 0, nil, false, err
	}
	var contents []string
	for _, h := range held {
		contents = append(contents, h.Content)
		behind = behind || h.Content != current
	}
	names := []string{src.Name}
	for _, w := range policyWaves {
		names = append(names, channel.Name(src.Name, w.Name))
	}
	mounting, err := d.inv.PodsReading(ctx, ns, src.Kind, names...)
	if err != nil {
		return nil, "", 0, nil, false, err
	}
	for _, p := range mounting[src.Name] {
		if p.DeletionTimestamp == nil {
			outside = append(outside, p.Name)
		}
	}
	for _, w := range policyWaves {
		ch := channel.Name(src.Name, w.Name)
		ws := v1alpha1.WaveStatus{Name: w.Name, Approval: w.Approval, Channel: ch, From: held[w.Name].Content}
		seen := map[v1alpha1.DeliveryTarget]bool{}
		for _, p := range mounting[ch] {
			if p.DeletionTimestamp != nil || !channel.Placed(p, ch, w.Name) {
				continue
			}
			pods++
			if t, ok := d.ownerOf(ctx, p); ok && !seen[t] {
				seen[t] = true
				ws.Workloads = append(ws.Workloads, t)
			}
		}
		waves = append(waves, ws)
	}
	return waves, delivery.MostCommon(contents), pods, outside, behind, nil
}

// ownerOf is the top-level workload of pod, as a delivery target.
func (d *deliveries) ownerOf(ctx context.Context, pod *corev1.Pod) (v1alpha1.DeliveryTarget, bool) {
	reg := d.inv.Registry()
	top := reg.TopOwnerOf(ctx, d.client, pod)
	if top == nil {
		return v1alpha1.DeliveryTarget{}, false
	}
	t, ok := reg.TypeOfOwner(top)
	if !ok {
		return v1alpha1.DeliveryTarget{}, false
	}
	return v1alpha1.DeliveryTarget{Kind: t.RecordKind(), Name: top.Name}, true
}
