package deliveries

// Starting a delivery: when a change of a config becomes a delivery (its
// batch window and flapping), what the delivery takes (its snapshot, its
// consumers, a break-glass write's reason), and the records it supersedes.

import (
	"context"
	"fmt"
	"slices"
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
// the batch window since the change was first seen has passed: of src
// alone, or of the change set it belongs to (gatherSet).
func (d *deliveries) maybeStart(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery, config inventory.Object) (reconcile.Result, error) {
	consumers, behind, err := d.consumers(ctx, req.Namespace, src, current, s)
	if err != nil || !behind {
		d.forgetChange(req.NamespacedName)
		return reconcile.Result{}, err
	}
	// The set is gathered once the window has passed, so every change
	// made within it is seen.
	if wait := d.batchWait(req.NamespacedName); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	cs, err := d.gatherSet(ctx, req.Namespace, single(src, current, config, recs), s, false)
	if err != nil {
		return reconcile.Result{}, err
	}
	if cs.set() {
		if consumers, err = d.setConsumers(ctx, req.Namespace, cs); err != nil {
			return reconcile.Result{}, err
		}
	}
	return d.start(ctx, req, cs, s, false, func(rec *v1alpha1.ConfigDelivery) delivery.Step {
		return delivery.Begin(rec, cs.currents, consumers, time.Now())
	})
}

// start starts the next delivery of cs's content, once the batch window
// since the change was first seen has passed and no member is flapping:
// it writes the snapshots of every member's content, creates the record
// (hot: of hot config; a change set's names every member), supersedes the
// open ones of every member, and takes the record's first step (begin). A
// snapshot that cannot be written halts the delivery before its first
// wave, saying why, instead of retrying unseen. A break-glass write's
// reason in a config's annotations skips approvals, or asks for an
// immediate delivery (delivery.BreakGlass; of a set, only when every
// member's change was one), and the record keeps each member's
// resourceVersion.
func (d *deliveries) start(ctx context.Context, req reconcile.Request, cs *changeSet, s configpolicy.NamespacePolicy, hot bool, begin func(*v1alpha1.ConfigDelivery) delivery.Step) (reconcile.Result, error) {
	if wait := d.batchWait(req.NamespacedName); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	for _, m := range cs.members {
		if rec, held := d.opts.Flapping.Object(s.Flapping, req.Namespace, m.Kind, m.Name); held {
			// No snapshot and no delivery of content that is replaced every
			// refresh; the look once it has settled starts one, of the
			// content it settled on.
			return reconcile.Result{RequeueAfter: time.Until(rec.Until(s.Flapping)) + time.Second}, nil
		}
	}
	first := cs.members[0]
	// The delivered content's snapshots exist before any template or
	// channel takes them: a wave's pods would be refused otherwise, and a
	// channel is written from them.
	blocked := d.opts.Snapshots.Ensure(ctx, req.Namespace, cs.currents)
	if blocked != nil && !revisions.Blocked(blocked) {
		return reconcile.Result{}, fmt.Errorf("writing the snapshots of %s in %s to deliver: %w", strings.Join(sourceNames(cs.members), ", "), req.Namespace, blocked)
	}
	// The sequence counts the deliveries of the first member, which names
	// the record; every record that delivers it is among cs.recs.
	var seq int64
	for _, r := range cs.recs {
		if slices.Contains(delivery.Members(r), first) {
			seq = max(seq, r.Spec.Sequence)
		}
	}
	governed := false
	if d.opts.Governed != nil {
		var err error
		if governed, err = d.opts.Governed(ctx, req.Namespace); err != nil {
			return reconcile.Result{}, err
		}
	}
	breakGlass := func(m revision.Source) *v1alpha1.BreakGlassDelivery {
		return delivery.BreakGlass(cs.configs[m].Annotations, delivery.Latest(cs.recs, m), governed, d.opts.Keys.Current().Bytes(), cs.currents[m])
	}
	var seen map[string]string
	if reason := strings.TrimSpace(cs.configs[first].Annotations[v1alpha1.BreakGlassAnnotation]); reason != "" {
		seen = map[string]string{v1alpha1.BreakGlassSeenAnnotation: reason}
	}
	rec := &v1alpha1.ConfigDelivery{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: delivery.RecordName(first, seq+1), Annotations: seen},
		Spec: v1alpha1.ConfigDeliverySpec{
			Config:   memberRefs(cs.members[:1], cs.configs)[0],
			Sequence: seq + 1, Policy: s.DeliveryPolicy, Settings: configpolicy.DeliveryDefaults(*s.Delivery), Hot: hot,
			BreakGlass: breakGlass(first),
		},
	}
	if cs.set() {
		rec.Spec.Members = memberRefs(cs.members, cs.configs)
		rec.Spec.BreakGlass = setBreakGlass(cs.members, breakGlass)
	}
	if cs.declared != nil {
		rec.Name = delivery.SetRecordName(cs.declared.Name, cs.declared.Generation)
		rec.Spec.ConfigSet = cs.declared
	}
	if err := d.client.Create(ctx, rec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil // the cache is behind our own create
		}
		return reconcile.Result{}, err
	}
	d.started(req.Namespace, rec.Name, cs.members)
	if err := d.supersede(ctx, rec, cs.recs); err != nil {
		return reconcile.Result{}, err
	}
	// The change is delivered: the next one waits its own batch window
	// (req names a member, or a ConfigSet).
	d.forgetChange(req.NamespacedName)
	for _, m := range cs.members {
		d.forgetChange(deliveryKey(req.Namespace, m).NamespacedName)
	}
	deliveriesStarted.Inc()
	res, err := d.take(ctx, rec, begin(rec))
	if err != nil || blocked == nil {
		return res, err
	}
	why := fmt.Sprintf("the snapshot of the delivered content cannot be written (%v): no wave can take it, and every consumer keeps the revision it runs. "+
		"Once configward's controller can write it (see the RevisionsReady condition of ConfigPolicy %s), resume the delivery or change the config again", blocked, s.DeliveryPolicy)
	return reconcile.Result{}, d.apply(ctx, rec, delivery.Finish(rec, v1alpha1.DeliveryHalted, delivery.ReasonSnapshotsBlocked, why, "", time.Now()))
}

func sourceNames(srcs []revision.Source) []string {
	out := make([]string, len(srcs))
	for i, s := range srcs {
		out[i] = s.String()
	}
	return out
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
// creator stopped before it could), ending older open deliveries first. A
// change set's members deliver their content now.
func (d *deliveries) place(ctx context.Context, rec *v1alpha1.ConfigDelivery, recs []*v1alpha1.ConfigDelivery, src revision.Source, current string, s configpolicy.NamespacePolicy) (reconcile.Result, error) {
	consumers, _, err := d.consumers(ctx, rec.Namespace, src, current, s)
	if err != nil {
		return reconcile.Result{}, err
	}
	currents := revision.Snapshots{src: current}
	if delivery.IsSet(rec) {
		var cs *changeSet
		if cs, recs, err = d.unplacedSet(ctx, rec, recs); err != nil {
			return reconcile.Result{}, err
		}
		if consumers, err = d.setConsumers(ctx, rec.Namespace, cs); err != nil {
			return reconcile.Result{}, err
		}
		currents = cs.currents
	}
	if err := d.supersede(ctx, rec, recs); err != nil {
		return reconcile.Result{}, err
	}
	return d.take(ctx, rec, delivery.Begin(rec, currents, consumers, time.Now()))
}

// unplacedSet is the change set of record rec, whose creator stopped
// before placing it: its members with their content now, and recs with
// the records of every member added (each once), which it supersedes.
func (d *deliveries) unplacedSet(ctx context.Context, rec *v1alpha1.ConfigDelivery, recs []*v1alpha1.ConfigDelivery) (*changeSet, []*v1alpha1.ConfigDelivery, error) {
	cs := &changeSet{members: delivery.Members(rec), currents: revision.Snapshots{}}
	for _, m := range cs.members {
		o, err := d.inv.Get(ctx, m.Kind, rec.Namespace, m.Name)
		if err != nil {
			return nil, nil, err
		}
		if o.Exists {
			cs.currents[m] = d.inv.SnapshotName(d.opts.Keys.Current().Bytes(), o)
		}
		more, err := d.opts.Records.Of(ctx, rec.Namespace, m)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range more {
			if !slices.ContainsFunc(recs, func(o *v1alpha1.ConfigDelivery) bool { return o.Name == r.Name }) {
				recs = append(recs, r)
			}
		}
	}
	return cs, recs, nil
}

// consumers lists the top-level workloads that consume src, with the
// snapshot of src their template names, and whether any of them is behind
// current.
func (d *deliveries) consumers(ctx context.Context, ns string, src revision.Source, current string, s configpolicy.NamespacePolicy) ([]delivery.Consumer, bool, error) {
	ws, err := d.consumersOf(ctx, ns, src)
	if err != nil {
		return nil, false, err
	}
	key := d.opts.Keys.Current().Bytes()
	var out []delivery.Consumer
	behind := false
	for _, w := range ws {
		carried := w.Stamp()
		c := delivery.Consumer{Kind: w.Type.RecordKind(), Name: w.Obj.GetName(), Labels: w.Obj.GetLabels(), From: stamp.Snapshots(carried)[src]}
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

// consumersOf are the top-level workloads that consume src: a workload
// another controls, or whose template another object holds, is rolled by
// that one, never placed itself.
func (d *deliveries) consumersOf(ctx context.Context, ns string, src revision.Source) ([]workload.Object, error) {
	var kinds []workload.Kind
	for _, t := range d.types {
		kinds = append(kinds, t.Kind)
	}
	objs, err := d.inv.Consumers(ctx, kinds, src.Kind, ns, src.Name)
	if err != nil {
		return nil, err
	}
	var out []workload.Object
	for _, o := range objs {
		w, ok := d.inv.Registry().For(o)
		if !ok || w.Controlled() {
			continue
		}
		if _, ref := w.TemplateRef(); ref {
			continue
		}
		out = append(out, w)
	}
	return out, nil
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

// started remembers, for a while, that a record was created that delivers
// members: until the cache shows it, a look at another member would take
// that member's change for one no delivery has started and start a second.
func (d *deliveries) started(ns, record string, members []revision.Source) {
	if len(members) < 2 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.justStarted) > maxJustStarted {
		clear(d.justStarted)
	}
	for _, m := range members {
		d.justStarted[deliveryKey(ns, m).NamespacedName] = justStarted{record: record, at: time.Now()}
	}
}

// startedUnseen is the record started for nn's config that recs (the
// cache's) do not show yet ("" when none, or when it is seen or old).
func (d *deliveries) startedUnseen(nn types.NamespacedName, recs []*v1alpha1.ConfigDelivery) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.justStarted[nn]
	if !ok {
		return ""
	}
	if time.Since(j.at) > justStartedFor || slices.ContainsFunc(recs, func(r *v1alpha1.ConfigDelivery) bool { return r.Name == j.record }) {
		delete(d.justStarted, nn)
		return ""
	}
	return j.record
}

// justStarted is a record created for a change set, and when.
type justStarted struct {
	record string
	at     time.Time
}

// justStartedFor bounds how long a created record is waited for in the
// cache; maxJustStarted how many are remembered.
const (
	justStartedFor = 30 * time.Second
	maxJustStarted = 10000
)
