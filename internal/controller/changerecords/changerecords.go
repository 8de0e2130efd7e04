// Package changerecords keeps the count of content changes that tells
// flapping config (internal/flapping) across restarts and failovers: every
// replica feeds the tracker from its informers, and the leader stores the
// records in one ConfigMap in configward's namespace, announces config that
// starts or stops flapping (ConfigFlapping Events, a gauge), and forgets
// records once their window has passed.
package changerecords

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
)

// The records of recent content changes live in one ConfigMap in
// configward's namespace, written by the leader only (the chart's Role
// ...-config-changes, in that namespace alone, grants the writes).
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

var configFlapping = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configward_config_flapping",
	Help: "1 for each ConfigMap or Secret whose content changes past its flapping threshold: its changes roll no consumer, take no snapshot and start no delivery until it has been stable for the threshold's window.",
}, []string{"kind", "namespace", "name"})

func init() { metrics.Registry.MustRegister(configFlapping) }

// Options set up the counting of content changes.
type Options struct {
	Tracker *flapping.Tracker
	// Policies give each namespace's flapping threshold.
	Policies *configpolicy.Store
	// Record names the ConfigMap the leader keeps the records in, so that a
	// restart or failover does not reset the count.
	Record types.NamespacedName
	// Pass is how often the leader settles, announces and stores (default
	// 2 s).
	Pass time.Duration
}

// Setup counts the content changes of every rollout-mode ConfigMap
// and Secret on every replica (the standby's count is warm when it takes over), and runs
// the leader's keeper, which announces each object that starts flapping
// (a ConfigFlapping Event naming its writer), each that settles
// (ConfigStable), and stores the records.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Pass == 0 {
		opts.Pass = 2 * time.Second
	}
	ctx := context.Background()
	for _, kind := range inventory.ContentKinds() {
		informer, err := mgr.GetCache().GetInformer(ctx, inventory.NewObject(kind))
		if err != nil {
			return fmt.Errorf("watching %ss for their change rate: %w", kind, err)
		}
		_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, new any) {
				o, okOld := old.(client.Object)
				n, okNew := new.(client.Object)
				if !okOld || !okNew || !inventory.DataChanged(o, n) || client.ObjectKeyFromObject(n) == opts.Record {
					return
				}
				mode, _ := inventory.ModeOf(n.GetAnnotations())
				if mode == inventory.Ignore {
					return // nobody needs to react: nothing to hold
				}
				s, err := opts.Policies.For(ctx, mgr.GetCache(), n.GetNamespace())
				if err != nil {
					ctrl.Log.Error(err, "reading the flapping threshold; counting the change with the default", "namespace", n.GetNamespace())
					s.Flapping = flapping.Default
				}
				if !holds(mode, s, n) {
					return
				}
				opts.Tracker.Observe(recordKey(kind, n), flapping.Change{At: time.Now(), Version: n.GetResourceVersion()}, inventory.Writer(n), s.Flapping)
			},
		})
		if err != nil {
			return fmt.Errorf("watching %ss for their change rate: %w", kind, err)
		}
	}
	k := &keeper{opts: opts, cache: mgr.GetCache(), live: mgr.GetAPIReader(), client: mgr.GetClient(),
		events: mgr.GetEventRecorder("configward-flapping")}
	// Loaded before the manager starts, so that no rollout controller of
	// a restarted process acts before it knows what is flapping; the
	// leader loads again when it starts leading, for what the previous
	// leader stored since.
	k.load(ctx)
	return mgr.Add(k)
}

// holds says whether content changes of n (in mode, in a namespace with
// settings s) are what flapping holds: a rollout-mode object's roll its
// consumers, a hot one's are delivered where delivery is on. Its own
// function so that it is tested without a cluster.
func holds(mode inventory.Mode, s configpolicy.NamespacePolicy, n client.Object) bool {
	if mode == inventory.Ignore {
		return false // nobody needs to react
	}
	if _, _, isChannel := channel.Of(n.GetLabels(), n.GetAnnotations()); mode == inventory.Hot && (s.Delivery == nil || isChannel) {
		// Its changes reach the app with no delivery to hold (where
		// delivery is off), or are configward's own (a channel).
		return false
	}
	return true
}

func recordKey(kind refs.Kind, obj client.Object) flapping.Key {
	return flapping.Key{Kind: string(kind), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// keeper is the leader's part of the flapping count: Events, the gauge, the stored
// records.
type keeper struct {
	opts   Options
	cache  client.Reader
	live   client.Reader
	client client.Client
	events recorder.EventRecorder
}

func (k *keeper) NeedLeaderElection() bool { return true }

// load merges the stored records into the tracker.
func (k *keeper) load(ctx context.Context) {
	log := ctrl.Log.WithName("flapping")
	var stored corev1.ConfigMap
	err := k.live.Get(ctx, k.opts.Record, &stored)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		// Counting goes on from what this replica saw; the next store
		// writes over what could not be read.
		log.Error(err, "reading the stored change records; counting from this process's own", "configmap", k.opts.Record)
	default:
		if err := k.opts.Tracker.Load(stored.Data); err != nil {
			log.Error(err, "reading the stored change records", "configmap", k.opts.Record)
		}
	}
}

func (k *keeper) Start(ctx context.Context) error {
	k.load(ctx)
	tick := time.NewTicker(k.opts.Pass)
	defer tick.Stop()
	for {
		k.pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-k.opts.Tracker.Started():
		}
	}
}

// pass announces what started or stopped flapping and stores the records.
func (k *keeper) pass(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("flapping")
	now := time.Now()
	thresholds := map[flapping.Key]flapping.Threshold{}
	for _, key := range k.opts.Tracker.Keys() {
		s, err := k.opts.Policies.For(ctx, k.cache, key.Namespace)
		if err != nil {
			continue // the next pass
		}
		th := s.Flapping
		thresholds[key] = th
		rec, _ := k.opts.Tracker.Get(key)
		switch next(rec, th, now) {
		case stillFlapping:
			// Announced by an earlier leader: this one's gauge says so too.
			configFlapping.WithLabelValues(key.Kind, key.Namespace, key.Name).Set(1)
		case announce:
			obj := k.object(ctx, key)
			if obj == nil {
				continue
			}
			configFlapping.WithLabelValues(key.Kind, key.Namespace, key.Name).Set(1)
			k.events.Eventf(obj, nil, corev1.EventTypeWarning, "ConfigFlapping", "Rollout",
				"%s changed content %d times in %s (its threshold: %s), last written by %q: configward stops rolling its consumers for it, "+
					"takes no snapshot of it and starts no delivery for it until it has been unchanged for %s. "+
					"Make its writer's output stable (a template with a random salt, a generator re-minting, two writers fighting), or mark it configward.dev/reload: hot or ignore if its consumers need no restart",
				key.Object(), rec.InWindow(th, now), th.Window, th, writerName(rec.Writer), th.Window)
			log.Info("config flapping; its consumers are not rolled", "kind", key.Kind, "namespace", key.Namespace, "name", key.Name,
				"changes", rec.InWindow(th, now), "window", th.Window, "writer", rec.Writer)
			k.opts.Tracker.Update(key, func(r *flapping.Record) bool { r.Announced = true; return true })
		case settle:
			settled := false
			k.opts.Tracker.Update(key, func(r *flapping.Record) bool { settled = r.Settle(th, now); return settled })
			if !settled {
				continue
			}
			configFlapping.DeleteLabelValues(key.Kind, key.Namespace, key.Name)
			if obj := k.object(ctx, key); obj != nil && rec.Announced {
				k.events.Eventf(obj, nil, corev1.EventTypeNormal, "ConfigStable", "Rollout",
					"%s has been unchanged for %s: changes of it roll its consumers again, and those held while it was flapping roll now, paced",
					key.Object(), th.Window)
			}
		}
	}
	k.opts.Tracker.Forget(now, forgetAfter(thresholds))
	k.store(ctx)
}

// step is what a pass does about one record.
type step int

const (
	// nothing: not flapping, no episode to end.
	nothing step = iota
	// announce: it started flapping; announce it (an Event, the gauge).
	announce
	// stillFlapping: flapping and announced already, by this leader or an
	// earlier one; the gauge says so.
	stillFlapping
	// settle: its episode is over; end it, and say so if it was announced.
	settle
)

// next decides a pass's step for rec under th at now. Its own function so
// that it is tested without a cluster.
func next(rec flapping.Record, th flapping.Threshold, now time.Time) step {
	switch {
	case rec.Flapping(th, now) && rec.Announced:
		return stillFlapping
	case rec.Flapping(th, now):
		return announce
	case !rec.Since.IsZero():
		return settle
	}
	return nothing
}

// forgetAfter is the threshold each record is forgotten by: the one a pass
// read for its namespace, else the longest window (a namespace whose
// policies could not be read keeps its records until they can be).
func forgetAfter(thresholds map[flapping.Key]flapping.Threshold) func(flapping.Key) flapping.Threshold {
	return func(key flapping.Key) flapping.Threshold {
		if th, ok := thresholds[key]; ok {
			return th
		}
		return flapping.Threshold{Window: flapping.MaxWindow} // unknown: keep it
	}
}

func writerName(w string) string {
	if w == "" {
		return "an unknown field manager"
	}
	return w
}

// object reads the cached ConfigMap or Secret an Event is recorded on; nil
// when it is gone.
func (k *keeper) object(ctx context.Context, key flapping.Key) client.Object {
	obj := inventory.NewObject(refs.Kind(key.Kind))
	if err := k.cache.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		return nil
	}
	return obj
}

// store writes the records when they changed since the last store.
func (k *keeper) store(ctx context.Context) {
	data, ok := k.opts.Tracker.Encode()
	if !ok {
		return
	}
	err := k.write(ctx, data)
	if err != nil {
		k.opts.Tracker.Unstored()
		ctrl.LoggerFrom(ctx).WithName("flapping").Error(err, "storing the change records; they stay in memory and are stored at the next pass", "configmap", k.opts.Record)
	}
}

func (k *keeper) write(ctx context.Context, data map[string]string) error {
	var cm corev1.ConfigMap
	err := k.live.Get(ctx, k.opts.Record, &cm)
	if apierrors.IsNotFound(err) {
		cm.Namespace, cm.Name = k.opts.Record.Namespace, k.opts.Record.Name
		cm.Labels = map[string]string{"app.kubernetes.io/managed-by": "configward"}
		cm.Data = data
		return k.client.Create(ctx, &cm)
	}
	if err != nil {
		return err
	}
	cm.Data = data
	return k.client.Update(ctx, &cm)
}
