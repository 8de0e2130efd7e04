package deliveries

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
)

// A hot config's delivery moves no workload: its record's waves are the
// policy's, each with the channel its pods mount, and the channels
// controller writes each wave's channel once the record says the wave
// started (delivery.ChannelContent). The gate is the wave's pods: their
// reload agents' reports, readiness and restarts.

// maybeStartHot starts a delivery of current once a channel of src holds
// other content (see start).
func (d *deliveries) maybeStartHot(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery, annotations map[string]string) (reconcile.Result, error) {
	waves, from, pods, outside, behind, err := d.hotWaves(ctx, req.Namespace, src, current, s.Delivery.Waves)
	if err != nil || !behind {
		d.forgetChange(req.NamespacedName)
		return reconcile.Result{}, err
	}
	return d.start(ctx, req, src, current, s, recs, annotations, true, func(rec *v1alpha1.ConfigDelivery) delivery.Step {
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
	mounting, err := d.podsMounting(ctx, ns)
	if err != nil {
		return nil, "", 0, nil, false, err
	}
	for _, p := range mounting[src.Name] {
		outside = append(outside, p.Name)
	}
	for _, w := range policyWaves {
		ch := channel.Name(src.Name, w.Name)
		ws := v1alpha1.WaveStatus{Name: w.Name, Approval: w.Approval, Channel: ch, From: held[w.Name].Content}
		seen := map[v1alpha1.DeliveryTarget]bool{}
		for _, p := range mounting[ch] {
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

// podsMounting lists the live pods of ns by each ConfigMap or Secret name
// they reference, from the cache.
func (d *deliveries) podsMounting(ctx context.Context, ns string) (map[string][]*corev1.Pod, error) {
	var list corev1.PodList
	if err := d.client.List(ctx, &list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := map[string][]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		seen := map[string]bool{}
		for _, r := range refs.FromPodSpec(&p.Spec) {
			if !seen[r.Name] {
				seen[r.Name] = true
				out[r.Name] = append(out[r.Name], p)
			}
		}
	}
	return out, nil
}

// ownerOf is the top-level workload of pod, as a delivery target.
func (d *deliveries) ownerOf(ctx context.Context, pod *corev1.Pod) (v1alpha1.DeliveryTarget, bool) {
	reg := d.inv.Registry()
	top := reg.TopOwnerOf(ctx, d.client, pod)
	if top == nil {
		return v1alpha1.DeliveryTarget{}, false
	}
	t, ok := reg.Type(schema.FromAPIVersionAndKind(top.APIVersion, top.Kind).GroupKind())
	if !ok {
		return v1alpha1.DeliveryTarget{}, false
	}
	return v1alpha1.DeliveryTarget{Kind: t.RecordKind(), Name: top.Name}, true
}

// hotGate judges the pods of started wave i of hot config into g (see
// delivery.HotHealthOf).
func (d *deliveries) hotGate(ctx context.Context, rec *v1alpha1.ConfigDelivery, i int, g *delivery.Gate) error {
	wave := &rec.Status.Waves[i]
	src := delivered(rec)
	snap, err := d.inv.Get(ctx, src.Kind, rec.Namespace, delivery.HotWant(rec, i))
	if err != nil {
		return err
	}
	if !snap.Exists {
		g.Progressing = append(g.Progressing, "the snapshot "+delivery.HotWant(rec, i)+" the channel takes (not in the cache yet)")
		return nil
	}
	// The wave's pods can have the content only once its channel does.
	var ch client.Object = &corev1.ConfigMap{}
	if src.Kind == refs.Secret {
		ch = &corev1.Secret{}
	}
	if err := d.cache.Get(ctx, types.NamespacedName{Namespace: rec.Namespace, Name: wave.Channel}, ch); client.IgnoreNotFound(err) != nil {
		return err
	}
	if held := channel.Content(ch.GetAnnotations()); held != delivery.HotWant(rec, i) {
		g.Progressing = append(g.Progressing, "channel "+wave.Channel+" (not written with the content yet)")
		return nil
	}
	// Reports name a channel's content as its original's (see the reload
	// reports' handler).
	want := reload.ContentID(d.opts.Keys.Current().Bytes(), rec.Namespace, string(src.Kind), src.Name, snap.KeyDigests)
	mounting, err := d.podsMounting(ctx, rec.Namespace)
	if err != nil {
		return err
	}
	s := configpolicy.DeliveryDefaults(rec.Spec.Settings)
	propagation := time.Duration(*s.PropagationSeconds) * time.Second
	now := time.Now()
	for _, p := range mounting[wave.Channel] {
		state, msg := delivery.HotHealthOf(p, src.String(), want, wave.StartedAt.Time, propagation, now)
		g.Add(v1alpha1.DeliveryTarget{Kind: "Pod", Name: p.Name}, state, msg)
	}
	return nil
}
