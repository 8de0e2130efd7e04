// Package deliveries is the delivery controller. It moves each
// ConfigDelivery on: it starts one when delivered config changes, and at
// each look gathers what the pure state machine (delivery.Next) needs (the
// record, the health of the current wave's workloads, the time), writes the
// status it returns once, guarded by the record's resourceVersion, before
// anything acts on it, then records its Events and metrics. The record is
// all it keeps: a restarted or new leader carries a delivery on from it.
package deliveries

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/configward/configward/internal/analysis"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/controller/revisions"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

// The delivery controller moves each ConfigDelivery on: it starts one when
// delivered config changes, writes each wave's start before the rollout
// controllers re-stamp the wave's workloads (they read the record), judges
// the wave's health, soaks it, waits for approval, halts on failure (and
// rolls the failed wave back where the policy says so), and acts on the
// requests people write into spec.request. The record is all it keeps: a
// restarted or new leader carries a delivery on from it. What each look
// decides is delivery.Next's, a pure function, so every transition can be
// tested without a cluster; this controller gathers what Next needs,
// writes the step it returns, and records the step's Events and metrics.
//
// +kubebuilder:rbac:groups=configward.dev,resources=configdeliveries,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=configward.dev,resources=configdeliveries/status,verbs=get;update

var (
	deliveriesStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "configward_deliveries_started_total",
		Help: "Config deliveries started: content changes of config delivered in waves.",
	})
	deliveryWaves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_delivery_waves_total",
		Help: "Waves of config deliveries by outcome: started, completed (healthy through the soak, or promoted), failed.",
	}, []string{"outcome"})
	deliveriesFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_deliveries_finished_total",
		Help: "Config deliveries that left a state, by the state they reached: Succeeded, Halted, Superseded, Cancelled.",
	}, []string{"state"})
)

func init() { metrics.Registry.MustRegister(deliveriesStarted, deliveryWaves, deliveriesFinished) }

// Options configure the delivery controller.
type Options struct {
	Policies  *configpolicy.Store
	Snapshots *revisions.Snapshotter
	Keys      *hashkey.Source
	// Records reads the ConfigDeliveries from the cache.
	Records *deliveryrecords.Reader
	// BatchWindow: a delivery starts this long after the change it
	// delivers was first seen, so several changes made together are one
	// delivery.
	BatchWindow time.Duration
	// Keep is how many finished deliveries of each config are kept.
	Keep int
	// Flapping tells config that changes too often to deliver (nil: none
	// does).
	Flapping *flapping.Tracker
	// Prometheus is the chart's Prometheus for analysis checks.
	Prometheus PrometheusDefault
	// AllowedAddresses, when set, is the only places analysis checks may
	// connect to (the chart's analysis.allowedAddresses), held on the
	// address a name resolves to at connect time.
	AllowedAddresses *analysis.Addresses
	// Namespace is configward's own: the only one whose Secrets the
	// controller reads for analysis credentials.
	Namespace string
	// Secrets reads those Secrets past the cache (which holds digests):
	// the manager's API reader.
	Secrets client.Reader
	// Governed says whether change control governs a namespace: only there
	// is a break-glass write recorded, and only there does a delivery honour
	// one (nil: nowhere).
	Governed func(ctx context.Context, namespace string) (bool, error)
}

// DefaultKept is how many finished deliveries of one config
// stay, newest first; older ones are deleted.
const DefaultKept = 5

// Setup registers the delivery controller. Its requests name a
// config ("ConfigMap/app" in a namespace), not an object of one kind.
func Setup(mgr ctrl.Manager, inv *inventory.Inventory, opts Options) error {
	if opts.Keep == 0 {
		opts.Keep = DefaultKept
	}
	d := &deliveries{client: mgr.GetClient(), cache: mgr.GetCache(), inv: inv, opts: opts, lastWrite: map[types.UID]time.Time{},
		events: mgr.GetEventRecorder("configward-delivery"), firstSeen: map[types.NamespacedName]time.Time{}}
	for _, k := range inv.WatchedKinds() {
		if t, _ := inv.Registry().Type(k.GroupKind()); t.Rolled() {
			d.types = append(d.types, t)
		}
	}
	configKey := func(kind refs.Kind) handler.MapFunc {
		return func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{deliveryKey(o.GetNamespace(), revision.Source{Kind: kind, Name: o.GetName()})}
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("delivery").
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(configKey(refs.ConfigMap))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(configKey(refs.Secret))).
		Watches(&v1alpha1.ConfigDelivery{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			rec := o.(*v1alpha1.ConfigDelivery)
			return []reconcile.Request{deliveryKey(rec.Namespace, delivery.Delivers(rec))}
		}))
	for _, t := range d.types {
		// A workload's status moves its wave's gate; it names the config
		// it consumes.
		b = b.Watches(t.New(), handler.EnqueueRequestsFromMapFunc(d.consumed))
	}
	// A ConfigPolicy that turns delivery off cancels the open deliveries of
	// the namespaces it governed at once, not at their next poll.
	policiesChanged := make(chan event.TypedGenericEvent[*v1alpha1.ConfigDelivery], 1)
	opts.Policies.OnChange(func() {
		select {
		case policiesChanged <- event.TypedGenericEvent[*v1alpha1.ConfigDelivery]{Object: &v1alpha1.ConfigDelivery{}}:
		default: // one pending look covers every change before it
		}
	})
	b = b.WatchesRawSource(source.Channel(policiesChanged, handler.TypedEnqueueRequestsFromMapFunc(d.placed)))
	return b.Complete(d)
}

// placed asks for a look at the config of every placed delivery, after
// the policies in force changed.
func (d *deliveries) placed(ctx context.Context, _ *v1alpha1.ConfigDelivery) []reconcile.Request {
	var list v1alpha1.ConfigDeliveryList
	if err := d.cache.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing deliveries to look at them after a ConfigPolicy change")
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for i := range list.Items {
		rec := &list.Items[i]
		if r := deliveryKey(rec.Namespace, delivery.Delivers(rec)); delivery.Placed(rec) && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

type deliveries struct {
	client client.Client
	// cache reads the delivered config's identity for its Events (the
	// client refuses ConfigMap reads: the cache holds digests).
	cache  client.Reader
	inv    *inventory.Inventory
	opts   Options
	types  []*workload.Type
	events recorder.EventRecorder

	mu sync.Mutex
	// firstSeen is when a change not delivered yet was first seen, for
	// the batch window.
	firstSeen map[types.NamespacedName]time.Time
	// lastWrite is when a record's gate progress was last written.
	lastWrite map[types.UID]time.Time
	// unplacedSeen are the pods said to name a channel configward did not
	// place them on, so each is said once (bounded: cleared when full).
	unplacedSeen map[types.UID]bool
}

// deliveryKey is the request of one config's deliveries.
func deliveryKey(namespace string, src revision.Source) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: src.String()}}
}

// consumed maps a workload to the configs it consumes.
func (d *deliveries) consumed(_ context.Context, o client.Object) []reconcile.Request {
	w, ok := d.inv.Registry().For(o)
	if !ok || w.Controlled() {
		return nil
	}
	spec, _ := w.PodSpec()
	var out []reconcile.Request
	for _, c := range refs.ConsumedBy(spec) {
		out = append(out, deliveryKey(o.GetNamespace(), revision.Source{Kind: c.Kind, Name: c.Name}))
	}
	return out
}

func (d *deliveries) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kind, name, ok := strings.Cut(req.Name, "/")
	if !ok {
		return reconcile.Result{}, nil
	}
	src, ns := revision.Source{Kind: refs.Kind(kind), Name: name}, req.Namespace
	settings, err := d.opts.Policies.For(ctx, d.client, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	recs, err := d.opts.Records.Of(ctx, ns, src)
	if err != nil {
		return reconcile.Result{}, err
	}
	latest := delivery.Latest(recs, src)
	o, err := d.inv.Get(ctx, src.Kind, ns, src.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Hot config is delivered through its channels.
	hot := delivery.Channelled(o, settings)
	current := ""
	if o.Exists {
		current = d.inv.SnapshotName(d.opts.Keys.Current().Bytes(), o)
	}
	switch what(latest, hot || delivery.Delivered(o, settings), hot, current) {
	case cancel:
		why := "delivery is off for the namespace: plain rollouts take every consumer to the current content"
		if settings.Delivery != nil {
			why = "the config is gone or no longer rollout-mode: nothing is delivered"
		}
		return reconcile.Result{}, d.apply(ctx, latest, delivery.Finish(latest, v1alpha1.DeliveryCancelled, delivery.ReasonNotDelivered, why, "", time.Now()))
	case place:
		if latest.Spec.Hot {
			return d.placeHot(ctx, latest, recs, src, current)
		}
		return d.place(ctx, latest, recs, src, current, settings)
	case start:
		if hot {
			return d.maybeStartHot(ctx, req, src, current, settings, recs, o.Annotations)
		}
		return d.maybeStart(ctx, req, src, current, settings, recs, o.Annotations)
	case prune:
		d.forgetChange(req.NamespacedName)
		return reconcile.Result{}, d.prune(ctx, recs)
	case advance:
		d.forgetChange(req.NamespacedName)
		return d.advance(ctx, latest)
	}
	return reconcile.Result{}, nil
}

// action is what a look at one config's deliveries does.
type action int

const (
	none action = iota
	// cancel the latest delivery: the config is no longer delivered.
	cancel
	// place the latest record, whose creator stopped before it wrote the
	// placement.
	place
	// start a delivery of the content of now, once the batch window has
	// passed and a consumer is behind it.
	start
	// prune the finished records beyond those kept.
	prune
	// advance the open delivery of the content of now by one step.
	advance
)

// what decides what a look at one config's deliveries does: latest is its
// newest record (nil: none), delivered whether its changes are delivered in
// waves now (hot: through channels), current the snapshot of its content
// now.
func what(latest *v1alpha1.ConfigDelivery, delivered, hot bool, current string) action {
	switch {
	case !delivered && latest != nil && delivery.Placed(latest):
		return cancel
	case !delivered:
		return none
	case latest != nil && latest.Status.State == "":
		return place
	case latest == nil || latest.Status.To != current || latest.Status.State == v1alpha1.DeliveryCancelled || latest.Spec.Hot != hot:
		return start
	case !delivery.Open(latest.Status.State):
		return prune
	}
	return advance
}

// maybeStart starts a delivery of current once a consumer is behind it and
// the batch window since the change was first seen has passed.
func (d *deliveries) maybeStart(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery, annotations map[string]string) (reconcile.Result, error) {
	consumers, behind, err := d.consumers(ctx, req.Namespace, src, current, s)
	if err != nil || !behind {
		d.forgetChange(req.NamespacedName)
		return reconcile.Result{}, err
	}
	return d.start(ctx, req, src, current, s, recs, annotations, false, func(rec *v1alpha1.ConfigDelivery) delivery.Step {
		return delivery.Begin(rec, current, consumers, time.Now())
	})
}

// start starts the next delivery of src's content current, once the batch
// window since the change was first seen has passed and the config is not
// flapping: it writes the snapshot of current, creates the record (hot: of
// hot config), supersedes the open ones, and takes the record's first step
// (begin). A snapshot that cannot be written halts the delivery before its
// first wave, saying why, instead of retrying unseen. annotations are the
// config's: a break-glass write's reason there skips approvals, or asks for
// an immediate delivery (delivery.BreakGlass).
func (d *deliveries) start(ctx context.Context, req reconcile.Request, src revision.Source, current string, s configpolicy.NamespacePolicy, recs []*v1alpha1.ConfigDelivery,
	annotations map[string]string, hot bool, begin func(*v1alpha1.ConfigDelivery) delivery.Step) (reconcile.Result, error) {
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
	var seen map[string]string
	if reason := strings.TrimSpace(annotations[v1alpha1.BreakGlassAnnotation]); reason != "" {
		seen = map[string]string{v1alpha1.BreakGlassSeenAnnotation: reason}
	}
	rec := &v1alpha1.ConfigDelivery{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: delivery.RecordName(src, seq+1), Annotations: seen},
		Spec: v1alpha1.ConfigDeliverySpec{
			Config:   v1alpha1.ConfigRef{Kind: string(src.Kind), Name: src.Name},
			Sequence: seq + 1, Policy: s.DeliveryPolicy, Settings: configpolicy.DeliveryDefaults(*s.Delivery), Hot: hot,
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

// prune deletes the finished deliveries of a config beyond the newest
// Keep; open ones are never deleted.
func (d *deliveries) prune(ctx context.Context, recs []*v1alpha1.ConfigDelivery) error {
	kept := 0
	for _, r := range recs {
		if delivery.Open(r.Status.State) {
			continue
		}
		if kept++; kept <= d.opts.Keep {
			continue
		}
		if err := d.client.Delete(ctx, r); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// TryRecord returns a trial write of a delivery record in a namespace: a
// server-side dry run of its create, which every admission webhook judges
// (configward's own lets only configward's controller write records).
func TryRecord(c client.Client) func(ctx context.Context, namespace string) error {
	return func(ctx context.Context, namespace string) error {
		rec := &v1alpha1.ConfigDelivery{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "configward-trial"},
			Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: string(refs.ConfigMap), Name: "configward-trial"}, Sequence: 1, Policy: "configward-trial",
				Settings: configpolicy.DeliveryDefaults(v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "all"}}})},
		}
		if err := c.Create(ctx, rec, client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
}
