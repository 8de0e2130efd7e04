package deliveries

// Starting a delivery: when a change of a config becomes a delivery (its
// batch window and flapping), what the delivery takes (its snapshot, its
// consumers, a break-glass write's reason), and the records it supersedes.

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/controller/revisions"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

// maybeStart starts a delivery of current once a consumer is behind it and
// the batch window since the change was first seen has passed.
func (d *deliveries) maybeStart(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery, config inventory.Object) (reconcile.Result, error) {
	consumers, behind, err := d.consumers(ctx, req.Namespace, src, current, s)
	if err != nil || !behind {
		d.forgetChange(req.NamespacedName)
		return reconcile.Result{}, err
	}
	return d.start(ctx, req, src, current, s, recs, config, false, func(rec *v1alpha1.ConfigDelivery) delivery.Step {
		return delivery.Begin(rec, current, consumers, time.Now())
	})
}

// start starts the next delivery of src's content current, once the batch
// window since the change was first seen has passed and the config is not
// flapping: it writes the snapshot of current, creates the record (hot: of
// hot config), supersedes the open ones, and takes the record's first step
// (begin). A snapshot that cannot be written halts the delivery before its
// first wave, saying why, instead of retrying unseen. config is the
// config as the look saw it: a break-glass write's reason in its
// annotations skips approvals, or asks for an immediate delivery
// (delivery.BreakGlass), and the record keeps its resourceVersion.
func (d *deliveries) start(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery,
	config inventory.Object, hot bool, begin func(*v1alpha1.ConfigDelivery) delivery.Step) (reconcile.Result, error) {
	if wait := d.batchWait(req.NamespacedName); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if rec, held := d.opts.Flapping.Object(s.Flapping, req.Namespace, src.Kind, src.Name); held {
		// No snapshot and no delivery of content that is replaced every
		// refresh; the look once it has settled starts one, of the content
		// it settled on.
		return reconcile.Result{RequeueAfter: time.Until(rec.Until(s.Flapping)) + time.Second}, nil
	}
	// The delivered content's snapshot exists before any template or
	// channel takes it: a wave's pods would be refused otherwise, and a
	// channel is written from it.
	blocked := d.opts.Snapshots.Ensure(ctx, req.Namespace, revision.Snapshots{src: current})
	if blocked != nil && !revisions.Blocked(blocked) {
		return reconcile.Result{}, fmt.Errorf("writing the snapshot of %s %s/%s to deliver: %w", src.Kind, req.Namespace, src.Name, blocked)
	}
	var seq int64
	for _, r := range recs {
		seq = max(seq, r.Spec.Sequence)
	}
	governed := false
	if d.opts.Governed != nil {
		var err error
		if governed, err = d.opts.Governed(ctx, req.Namespace); err != nil {
			return reconcile.Result{}, err
		}
	}
	annotations := config.Annotations
	var seen map[string]string
	if reason := strings.TrimSpace(annotations[v1alpha1.BreakGlassAnnotation]); reason != "" {
		seen = map[string]string{v1alpha1.BreakGlassSeenAnnotation: reason}
	}
	rec := &v1alpha1.ConfigDelivery{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: delivery.RecordName(src, seq+1), Annotations: seen},
		Spec: v1alpha1.ConfigDeliverySpec{
			Config:                v1alpha1.ConfigRef{Kind: string(src.Kind), Name: src.Name},
			ConfigResourceVersion: config.ResourceVersion,
			Sequence:              seq + 1, Policy: s.DeliveryPolicy, Settings: configpolicy.DeliveryDefaults(*s.Delivery), Hot: hot,
			BreakGlass: delivery.BreakGlass(annotations, delivery.Latest(recs, src), governed, d.opts.Keys.Current().Bytes(), current),
		},
	}
	if err := d.client.Create(ctx, rec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil // the cache is behind our own create
		}
		return reconcile.Result{}, err
	}
	if err := d.supersede(ctx, rec, recs); err != nil {
		return reconcile.Result{}, err
	}
	d.forgetChange(req.NamespacedName)
	deliveriesStarted.Inc()
	res, err := d.take(ctx, rec, begin(rec))
	if err != nil || blocked == nil {
		return res, err
	}
	why := fmt.Sprintf("the snapshot of the delivered content cannot be written (%v): no wave can take it, and every consumer keeps the revision it runs. "+
		"Once configward's controller can write it (see the RevisionsReady condition of ConfigPolicy %s), resume the delivery or change the config again", blocked, s.DeliveryPolicy)
	return reconcile.Result{}, d.apply(ctx, rec, delivery.Finish(rec, v1alpha1.DeliveryHalted, delivery.ReasonSnapshotsBlocked, why, "", time.Now()))
}

// supersede ends the open deliveries among older that rec replaces.
func (d *deliveries) supersede(ctx context.Context, rec *v1alpha1.ConfigDelivery, older []*v1alpha1.ConfigDelivery) error {
	for _, old := range older {
		if old.Name != rec.Name && delivery.Placed(old) {
			why := "a newer content of the config is delivered by " + rec.Name + "; workloads this delivery moved keep its revision until that one reaches them"
			if err := d.apply(ctx, old, delivery.Finish(old, v1alpha1.DeliverySuperseded, delivery.ReasonNewerContent, why, "", time.Now())); err != nil {
				return err
			}
		}
	}
	return nil
}

// place writes the placement of a record whose status is empty (its
// creator stopped before it could), ending older open deliveries first.
func (d *deliveries) place(ctx context.Context, rec *v1alpha1.ConfigDelivery, recs []*v1alpha1.ConfigDelivery, src revision.Source, current string, s configpolicy.NamespacePolicy) (reconcile.Result, error) {
	consumers, _, err := d.consumers(ctx, rec.Namespace, src, current, s)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := d.supersede(ctx, rec, recs); err != nil {
		return reconcile.Result{}, err
	}
	return d.take(ctx, rec, delivery.Begin(rec, current, consumers, time.Now()))
}

// consumers lists the top-level workloads that consume src, with the
// snapshot of src their template names, and whether any of them is behind
// current.
func (d *deliveries) consumers(ctx context.Context, ns string, src revision.Source, current string, s configpolicy.NamespacePolicy) ([]delivery.Consumer, bool, error) {
	var kinds []workload.Kind
	for _, t := range d.types {
		kinds = append(kinds, t.Kind)
	}
	objs, err := d.inv.Consumers(ctx, kinds, src.Kind, ns, src.Name)
	if err != nil {
		return nil, false, err
	}
	key := d.opts.Keys.Current().Bytes()
	var out []delivery.Consumer
	behind := false
	for _, o := range objs {
		w, ok := d.inv.Registry().For(o)
		if !ok || w.Controlled() {
			continue
		}
		if _, ref := w.TemplateRef(); ref {
			continue
		}
		carried := w.Stamp()
		c := delivery.Consumer{Kind: w.Type.RecordKind(), Name: o.GetName(), Labels: o.GetLabels(), From: stamp.Snapshots(carried)[src]}
		out = append(out, c)
		if behind || w.RolloutsDisabled() {
			continue
		}
		if c.From != "" {
			behind = c.From != current
			continue
		}
		// Stamped before revisions: behind when its hash is stale without
		// the delivery's pins, so turning delivery on delivers nothing by
		// itself.
		if carried.Hash != "" {
			spec, _ := w.PodSpec()
			facts, err := stamp.Sources{Inventory: d.inv}.Gather(ctx, stamp.Subject{Workload: w, Spec: spec, Policy: s, Key: key, Unpinned: true,
				Versions: carried.SecretVersions, Rolled: secretversions.RolledIn(carried.SecretVersions), Stored: &carried})
			if err != nil {
				return nil, false, err
			}
			behind = stamp.Decide(stamp.Input{Workload: w, Facts: facts, Look: stamp.Look{Changed: true}}).Want.Hash != carried.Hash
		}
	}
	return out, behind, nil
}

func (d *deliveries) batchWait(nn types.NamespacedName) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	first, ok := d.firstSeen[nn]
	if !ok {
		first = time.Now()
		d.firstSeen[nn] = first
	}
	return time.Until(first.Add(d.opts.BatchWindow))
}

func (d *deliveries) forgetChange(nn types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.firstSeen, nn)
}
