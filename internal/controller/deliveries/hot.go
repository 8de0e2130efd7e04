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
// other content and the batch window since the change was first seen has
// passed: of src alone, or of the change set it belongs to (gatherSet).
func (d *deliveries) maybeStartHot(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery, config inventory.Object) (reconcile.Result, error) {
	cs := single(src, current, config, recs)
	h, err := d.hotWaves(ctx, req.Namespace, cs.members, cs.currents, s.Delivery.Waves)
	if err != nil || !h.behind {
		d.forgetChange(req.NamespacedName)
		return reconcile.Result{}, err
	}
	if wait := d.batchWait(req.NamespacedName); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if cs, err = d.gatherSet(ctx, req.Namespace, cs, s, true); err != nil {
		return reconcile.Result{}, err
	}
	if cs.set() {
		if h, err = d.hotWaves(ctx, req.Namespace, cs.members, cs.currents, s.Delivery.Waves); err != nil {
			return reconcile.Result{}, err
		}
	}
	return d.start(ctx, req, cs, s, true, h.begin(cs.currents))
}

// placeHot writes the waves of a hot record whose status is empty (its
// creator stopped before it could).
func (d *deliveries) placeHot(ctx context.Context, rec *v1alpha1.ConfigDelivery, recs []*v1alpha1.ConfigDelivery, src revision.Source, current string) (reconcile.Result, error) {
	cs := &changeSet{members: []revision.Source{src}, currents: revision.Snapshots{src: current}}
	if delivery.IsSet(rec) {
		var err error
		if cs, recs, err = d.unplacedSet(ctx, rec, recs); err != nil {
			return reconcile.Result{}, err
		}
	}
	h, err := d.hotWaves(ctx, rec.Namespace, cs.members, cs.currents, rec.Spec.Settings.Waves)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := d.supersede(ctx, rec, recs); err != nil {
		return reconcile.Result{}, err
	}
	return d.take(ctx, rec, h.begin(cs.currents)(rec))
}

// hotLook is what hotWaves saw of the channels of hot config: per wave
// of the policy, its channels, what each holds, and the workloads with
// live pods mounting one; from is what most channels of each member hold,
// pods how many pods mount one, outside the pods that mount an original
// itself (created before delivery was on, or while the Pod path was down),
// and behind whether a channel holds other content than its member's
// current (none written yet: nothing to deliver, the channels controller
// writes them with the current content).
type hotLook struct {
	waves   []v1alpha1.WaveStatus
	from    revision.Snapshots
	pods    int
	outside []string
	behind  bool
}

// begin is the first step of a record delivering currents through the
// channels seen.
func (h hotLook) begin(currents revision.Snapshots) func(*v1alpha1.ConfigDelivery) delivery.Step {
	return func(rec *v1alpha1.ConfigDelivery) delivery.Step {
		return delivery.BeginHot(rec, currents, h.from, h.waves, h.pods, h.outside, time.Now())
	}
}

// hotWaves looks at the channels of members, delivered together as one
// (a change set) or alone, whose contents now are currents (see hotLook).
// A wave names the first member's channel and what it holds; for a set,
// Froms says what each member's channel holds.
func (d *deliveries) hotWaves(ctx context.Context, ns string, members []revision.Source, currents revision.Snapshots, policyWaves []v1alpha1.Wave) (hotLook, error) {
	h := hotLook{from: revision.Snapshots{}}
	held := map[revision.Source]map[string]channel.Held{}
	mounting := map[revision.Source]map[string][]*corev1.Pod{}
	outside := map[string]bool{}
	for _, m := range members {
		hm, err := channel.List(ctx, d.cache, ns, m.Kind, m.Name)
		if err != nil {
			return h, err
		}
		var contents []string
		for _, c := range hm {
			contents = append(contents, c.Content)
			h.behind = h.behind || c.Content != currents[m]
		}
		held[m], h.from[m] = hm, delivery.MostCommon(contents)
		names := []string{m.Name}
		for _, w := range policyWaves {
			names = append(names, channel.Name(m.Name, w.Name))
		}
		if mounting[m], err = d.inv.PodsReading(ctx, ns, m.Kind, names...); err != nil {
			return h, err
		}
		for _, p := range mounting[m][m.Name] {
			if p.DeletionTimestamp == nil && !outside[p.Name] {
				outside[p.Name] = true
				h.outside = append(h.outside, p.Name)
			}
		}
	}
	set := len(members) > 1
	for _, w := range policyWaves {
		first := members[0]
		ws := v1alpha1.WaveStatus{Name: w.Name, Approval: w.Approval, Channel: channel.Name(first.Name, w.Name), From: held[first][w.Name].Content}
		froms := revision.Snapshots{}
		counted := map[string]bool{}
		seen := map[v1alpha1.DeliveryTarget]bool{}
		for _, m := range members {
			if c := held[m][w.Name].Content; set && c != "" {
				froms[m] = c
			}
			ch := channel.Name(m.Name, w.Name)
			for _, p := range mounting[m][ch] {
				if p.DeletionTimestamp != nil || !channel.Placed(p, ch, w.Name) || counted[p.Name] {
					continue
				}
				counted[p.Name] = true
				if t, ok := d.ownerOf(ctx, p); ok && !seen[t] {
					seen[t] = true
					ws.Workloads = append(ws.Workloads, t)
				}
			}
		}
		h.pods += len(counted)
		ws.Froms = froms.Encode()
		h.waves = append(h.waves, ws)
	}
	return h, nil
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
