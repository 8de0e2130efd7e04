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
		events: mgr.GetEventRecorder("configward-delivery"), firstSeen: map[types.NamespacedName]time.Time{}, justStarted: map[types.NamespacedName]justStarted{}}
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
	if err := b.Complete(d); err != nil {
		return err
	}
	var counts client.Reader = mgr.GetCache()
	counted.Store(&counts)
	return setupConfigSets(mgr, d)
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
	// justStarted are the change sets' records created and not yet seen
	// in the cache, by member (started).
	justStarted map[types.NamespacedName]justStarted
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
	act := what(latest, src, hot || delivery.Delivered(o, settings), hot, current)
	if latest != nil && (act == place || act == advance) && delivery.Delivers(latest) != src {
		// A change set's record is placed and moved on by the look at its
		// first member, which its Events wake; the others' looks would only
		// race it.
		return reconcile.Result{}, nil
	}
	if act == start {
		if rec := d.startedUnseen(req.NamespacedName, recs); rec != "" {
			return reconcile.Result{RequeueAfter: time.Second}, nil // delivered by a change set the cache does not show yet
		}
		// A declared set's member, hot or not, is delivered with its set's
		// version, by the set's look (configsets.go), never on its own.
		owner, err := d.claimant(ctx, ns, src)
		if err != nil || owner != nil {
			d.forgetChange(req.NamespacedName)
			return reconcile.Result{}, err
		}
	}
	switch act {
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
			return d.maybeStartHot(ctx, req, src, current, settings, recs, o)
		}
		return d.maybeStart(ctx, req, src, current, settings, recs, o)
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

// what decides what a look at one config, src, does: latest is its newest
// record (nil: none; one that delivers it alone or in a change set),
// delivered whether its changes are delivered in waves now (hot: through
// channels), current the snapshot of its content now.
func what(latest *v1alpha1.ConfigDelivery, src revision.Source, delivered, hot bool, current string) action {
	switch {
	case !delivered && latest != nil && delivery.Placed(latest):
		return cancel
	case !delivered:
		return none
	case latest != nil && latest.Status.State == "":
		return place
	case latest == nil || delivery.DeliveredTo(latest, src) != current || latest.Status.State == v1alpha1.DeliveryCancelled || latest.Spec.Hot != hot:
		return start
	case !delivery.Open(latest.Status.State):
		return prune
	}
	return advance
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
