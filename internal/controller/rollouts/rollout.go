// Package rollouts is the rollout controller. It closes the config-hash
// loop for changes that never touch the workload: when a ConfigMap, a
// Secret or a CSI-mounted secret's version changes, every top-level
// workload that consumes it and whose template no longer carries the stamp
// its config gives (stamp.Decide) is written that stamp, which starts the
// workload's own rolling update; it then checks that the whole stamp stuck.
// Workloads another one controls (the ReplicaSets of a Deployment, the Jobs
// of a CronJob) are never patched: their owner's rollout replaces them.
// Rollouts are batched per workload, paced by one rate across kinds, held
// while config they consume is flapping, and moved by open deliveries only
// when their wave starts.
package rollouts

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/controller/revisions"
	"github.com/configward/configward/internal/csiversions"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

var (
	rolloutsTriggered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_rollouts_triggered_total",
		Help: "Workloads whose config hash the rollout controller updated, starting a rollout, by kind.",
	}, []string{"kind"})
	rolloutsSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_rollouts_skipped_total",
		Help: "Workloads whose consumed config changed but whose running pods were not replaced, by kind and reason: " +
			"opted-out, policy-disabled, flapping, config-missing and job-immutable leave the template as it is; on-delete, paused, replicaset and declared " +
			"(a custom kind's notRolledWhen) get the new hash, but their own update strategy does not replace running pods.",
	}, []string{"kind", "reason"})
)

func init() { metrics.Registry.MustRegister(rolloutsTriggered, rolloutsSkipped) }

// Options tune the rollout controller.
type Options struct {
	// BatchWindow is how long after the first config change a workload waits
	// before it is re-stamped, so that several objects changed together
	// (one `kubectl apply` of three ConfigMaps) give one rollout.
	BatchWindow time.Duration
	// Policies say, per namespace, what the ConfigPolicies in force say of
	// rollouts, revisions, delivery and flapping (nil: none is).
	Policies *configpolicy.Store
	// Snapshots writes the config snapshots a revision names before the
	// revision is rolled out, where revisions are on.
	Snapshots *revisions.Snapshotter
	// Rate is how many workloads per second may be re-stamped, across every
	// kind, so that one ConfigMap shared by a thousand workloads does not
	// restart them all in the same second. Zero means unpaced.
	Rate float64
	// Keys hold the installation's key the hash is keyed with. When it
	// changes (a rotation), every stamped workload is re-examined, and so
	// re-stamped once, at Rate.
	Keys *hashkey.Source
	// Records are the delivery records, which pin the consumers a config
	// delivery has not reached: the controller re-stamps a consumer of
	// delivered config only with the revision its delivery assigns (nil:
	// no delivery).
	Records *deliveryrecords.Reader
	// Causes is where the controller records which config objects changed
	// for which workload; the drift controller reads it. Nil: a log of
	// its own.
	Causes *drift.Causes
	// Flapping tells the config that changes too often to roll its consumers
	// (nil: none does).
	Flapping *flapping.Tracker
}

// Setup registers one rollout controller per rolled workload kind
// the inventory watches (built-in and declared custom kinds; see
// inventory.Start), all paced by one rate.
func Setup(mgr ctrl.Manager, inv *inventory.Inventory, opts Options) error {
	pace := rate.NewLimiter(rate.Inf, 0)
	if opts.Causes == nil {
		opts.Causes = drift.NewCauses()
	}
	if opts.Rate > 0 {
		pace = rate.NewLimiter(rate.Limit(opts.Rate), max(1, int(opts.Rate)))
	}
	reg := inv.Registry()
	var rolled []*workload.Type
	var rolledKinds []workload.Kind
	for _, k := range inv.WatchedKinds() {
		if t, _ := reg.Type(k.GroupKind()); t.Rolled() { // not a Pod: its spec is immutable
			rolled, rolledKinds = append(rolled, t), append(rolledKinds, k)
		}
	}
	logged := newLoggedChanges(rolled, inv.ConfigKinds())
	if err := logCauses(context.Background(), mgr.GetCache(), inv, rolledKinds, opts.Causes, logged.notify); err != nil {
		return err
	}
	for _, t := range rolled {
		r := &rollout{
			client:   mgr.GetClient(),
			inv:      inv,
			typ:      t,
			events:   mgr.GetEventRecorder("configward-rollout"),
			window:   opts.BatchWindow,
			policies: opts.Policies,
			snaps:    opts.Snapshots,
			pace:     pace,
			keys:     opts.Keys,
			causes:   opts.Causes,
			records:  opts.Records,
			flapping: opts.Flapping,
		}
		obj := t.New()
		rotated := make(chan event.GenericEvent, 1)
		opts.Keys.OnChange(func(*hashkey.Key) {
			select {
			case rotated <- event.GenericEvent{Object: obj}:
			default:
			}
		})
		b := ctrl.NewControllerManagedBy(mgr)
		for kind, ch := range logged[t] {
			b = b.WatchesRawSource(source.Channel(ch, r.configChanged(kind)))
		}
		if inv.CSIClasses() {
			// The versions the Secrets Store CSI driver reports per pod: a
			// rotation rolls the pods' workload once.
			b = b.Watches(csiversions.PodStatusObject(), handler.EnqueueRequestsFromMapFunc(r.podStatusChanged)).
				Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podGone), builder.WithPredicates(onlyDeletes)).
				Watches(inventory.ClassMetadata(), r.configChanged(refs.SecretProviderClass))
		}
		err := b.
			Named(controllerName(t)).
			// The workload's own create and template changes: catches hashes
			// that went stale while configward was down or the webhook was
			// bypassed. Status updates do not change the generation.
			For(obj, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Watches(&corev1.ConfigMap{}, r.configChanged(refs.ConfigMap)).
			Watches(&corev1.Secret{}, r.configChanged(refs.Secret)).
			WatchesRawSource(source.Channel(rotated, handler.EnqueueRequestsFromMapFunc(r.everyWorkload))).
			Watches(&v1alpha1.ConfigDelivery{}, handler.EnqueueRequestsFromMapFunc(r.wavesStarted)).
			Complete(r)
		if err != nil {
			return fmt.Errorf("setting up the %s rollout controller: %w", t.GroupKind(), err)
		}
	}
	return nil
}

// controllerName names a kind's rollout controller. Names must be unique
// in a manager, and a declared kind may share its Kind with a built-in one
// (apps.kruise.io StatefulSet), so a declared kind's name carries its
// group; built-in ones keep the names their metrics have always had.
func controllerName(t *workload.Type) string {
	name := "rollout-" + strings.ToLower(t.Kind.Kind)
	if t.Custom() {
		name += "-" + strings.ReplaceAll(t.Group, ".", "-")
	}
	return name
}

type rollout struct {
	client   client.Client
	inv      *inventory.Inventory
	typ      *workload.Type
	events   recorder.EventRecorder
	window   time.Duration
	policies *configpolicy.Store
	snaps    *revisions.Snapshotter
	pace     *rate.Limiter
	keys     *hashkey.Source
	causes   *drift.Causes
	records  *deliveryrecords.Reader
	flapping *flapping.Tracker
	// What the controller keeps between looks, per workload: waited, the
	// last look found its hash stale with no logged change (step.wait);
	// episodes, the flapping episode reported (time.Time); unstuck, its
	// last stamp written did not stick whole, so the next look compares
	// the whole stamp, not only the hash; turns, its reserved turn at the
	// pace (*rate.Reservation).
	waited, episodes, unstuck, turns sync.Map
}

// key names a workload of the controller's kind in the change log.
func (r *rollout) key(nn types.NamespacedName) drift.Key {
	return drift.Key{Group: r.typ.Group, Kind: r.typ.Kind.Kind, NamespacedName: nn}
}

// putBack keeps the causes of a reconcile that did not roll them out (it
// failed, or waits) for the next look.
func (r *rollout) putBack(nn types.NamespacedName, changed []string) {
	r.causes.PutBack(r.key(nn), changed, time.Now())
}

// everyWorkload lists every workload of the controller's kind, for a key
// rotation: each stamped one gets a hash under the new key.
func (r *rollout) everyWorkload(ctx context.Context, _ client.Object) []reconcile.Request {
	list := r.typ.NewList()
	if err := r.client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing workloads after the config-hash key changed", "kind", r.typ.Kind.Kind)
		return nil
	}
	var out []reconcile.Request
	for _, o := range workload.Items(list) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return out
}

// Reconcile looks at a workload once, decides a step (next), and acts on
// it; the changes logged for the workload go back to the log when the
// step did not roll them out.
func (r *rollout) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	changed := r.causes.Take(r.key(req.NamespacedName))
	s, w, err := r.look(ctx, req, changed)
	res, keep := reconcile.Result{}, true
	if err == nil {
		res, keep, err = r.act(ctx, req.NamespacedName, s, w, next(s, r.window))
	}
	if keep || err != nil {
		r.putBack(req.NamespacedName, s.changed)
	}
	return res, err
}

// look reads what one step decides on: the workload, what its template
// should carry (stamp.Early, else stamp.Gather once and stamp.Decide), the
// flapping config that may hold it, and what the controller keeps in
// memory for it. Before the facts are gathered, the snapshots its revision
// names are written where they are not yet, and the CSI secret versions
// its pods report are read (a rotation is a change: logged, and in
// changed).
func (r *rollout) look(ctx context.Context, req reconcile.Request, changed []string) (seen, workload.Object, error) {
	nn := req.NamespacedName
	s := seen{now: time.Now(), kind: r.typ.Kind.Kind, changed: changed, nextRun: r.typ.NextRunTakesTemplate}
	_, s.waited = r.waited.Load(nn)
	if t, ok := r.turns.Load(nn); ok {
		s.turn = t.(turn).at
	}
	if e, ok := r.episodes.Load(nn); ok {
		s.episode, s.reported = e.(time.Time), true
	}
	w := r.typ.Wrap(r.typ.New())
	if err := r.client.Get(ctx, nn, w.Obj); err != nil {
		return s, w, client.IgnoreNotFound(err)
	}
	s.found, s.carried, s.hold = true, w.Stamp(), w.Hold()
	policy, err := r.policies.For(ctx, r.client, req.Namespace)
	if err != nil {
		return s, w, err
	}
	// Declared kinds whose template is no pod spec were refused at
	// admission; the spec read is then empty and counts nothing.
	spec, _ := w.PodSpec()
	csi := csiversions.Mounts(w, spec)
	if s.decision, s.early = stamp.Early(stamp.Input{Workload: w, Facts: stamp.Facts{Policy: policy},
		Look: stamp.Look{Changed: len(changed) > 0, Rotations: csi}}); s.early {
		return s, w, nil
	}
	if err := r.ensureCarried(ctx, &policy, s.carried, req.Namespace); err != nil {
		return s, w, err
	}
	versions := csiversions.Versions{Record: s.carried.SecretVersions}
	if csi {
		if versions, err = r.csiVersions(ctx, w, spec, policy); err != nil {
			return s, w, err
		}
		if len(versions.Rotated) > 0 {
			// The driver reported new versions: that is the cause, logged
			// like a changed object so the drift controller names it too.
			for _, c := range csiversions.Causes(versions.Rotated) {
				r.causes.Add(r.key(nn), c, s.now)
			}
			s.changed = append(s.changed, r.causes.Take(r.key(nn))...)
		}
		s.carried = w.Stamp()
	}
	facts, err := r.sources().Gather(ctx, stamp.Subject{Workload: w, Spec: spec, Policy: policy, Key: r.keys.Current().Bytes(),
		Versions: versions.Record, Rolled: versions.Rolled, Stored: &s.carried})
	if err != nil {
		return s, w, err
	}
	var isFlapping bool
	s.flappingKey, s.flapping, isFlapping = r.flapping.Input(policy.Flapping, req.Namespace, spec, r.inv.Rolls(ctx, req.Namespace))
	s.threshold, s.revisions, s.snapshotsBlocked = policy.Flapping, policy.Revisions, policy.SnapshotsBlocked
	_, unstuck := r.unstuck.Load(nn)
	s.decision = stamp.Decide(stamp.Input{Workload: w, Facts: facts,
		Look: stamp.Look{Changed: len(s.changed) > 0, Exact: unstuck, Flapping: isFlapping}})
	return s, w, nil
}

// csiVersions reads the secret versions w's pods report; a baseline, or
// versions seen changing with none new, is recorded on the workload's
// metadata at once (it rolls nothing).
func (r *rollout) csiVersions(ctx context.Context, w workload.Object, spec *corev1.PodSpec, policy configpolicy.NamespacePolicy) (csiversions.Versions, error) {
	cl := csiversions.Look{Client: r.client, Inventory: r.inv, Key: r.keys.Current()}
	v, err := cl.Versions(ctx, w, spec, policy.Secrets)
	if err != nil || !v.Write || len(v.Rotated) > 0 {
		return v, err
	}
	if err := r.recordVersions(ctx, w, v); err != nil {
		return v, err
	}
	v.Write = false
	return v, nil
}

// turn is a workload's reserved turn at the controller-wide pace.
type turn struct {
	at          time.Time
	reservation *rate.Reservation
}

// act carries out st for the workload w the look saw: it remembers what
// the next look reads, takes the workload's turn, writes the snapshots and
// the stamp, checks that the stamp stuck, then records the Events and
// metrics. keep says the logged changes go back to the log.
func (r *rollout) act(ctx context.Context, nn types.NamespacedName, s seen, w workload.Object, st step) (reconcile.Result, bool, error) {
	r.remember(nn, s.now, st)
	if !s.found {
		r.unstuck.Delete(nn)
	}
	res := reconcile.Result{RequeueAfter: st.requeue}
	if st.write != nil {
		var done bool
		var err error
		if res, done, err = r.write(ctx, nn, s, w, st); !done {
			return res, true, err
		}
	}
	r.report(ctx, w, s, st)
	return res, st.keep, nil
}

// remember keeps what the next look at nn reads.
func (r *rollout) remember(nn types.NamespacedName, now time.Time, st step) {
	switch {
	case st.wait:
		r.waited.Store(nn, true)
	case st.forgetWait:
		r.waited.Delete(nn)
	}
	switch {
	case st.rememberEpisode:
		r.episodes.Store(nn, st.episode)
	case st.forgetEpisode:
		r.episodes.Delete(nn)
	}
	if !st.cancelTurn {
		return
	}
	if t, ok := r.turns.LoadAndDelete(nn); ok {
		// Given back: the rate's next turn goes to another workload.
		t.(turn).reservation.CancelAt(now)
	}
}

// write takes the workload's turn (waiting for it by a requeue), writes
// the snapshots its stamp names, then the stamp, and checks that the whole
// stamp stuck. done says the stamp is written; otherwise res says when to
// look again, or err why not.
func (r *rollout) write(ctx context.Context, nn types.NamespacedName, s seen, w workload.Object, st step) (res reconcile.Result, done bool, err error) {
	if st.takeTurn {
		res := r.pace.ReserveN(s.now, 1)
		if wait := res.DelayFrom(s.now); wait > 0 {
			r.turns.Store(nn, turn{at: s.now.Add(wait), reservation: res})
			return reconcile.Result{RequeueAfter: wait}, false, nil
		}
	}
	r.turns.Delete(nn) // taken
	if len(st.snapshots) > 0 {
		if err := r.snaps.Ensure(ctx, nn.Namespace, st.snapshots); err != nil {
			r.events.Eventf(w.Obj, nil, corev1.EventTypeWarning, EventBlocked, "Rollout",
				"%s changed, but a snapshot of the new config could not be written (%v): its pods keep the revision they run until it can", st.what, err)
			switch {
			case revisions.BlockedReason(err) == "changed":
				return reconcile.Result{RequeueAfter: time.Second}, false, nil // the next look names the newer content
			case revisions.Blocked(err):
				// Nothing changes until someone acts (the Event says who):
				// look again at the pace the namespace is probed, rather
				// than retry the write as fast as the queue allows.
				return reconcile.Result{RequeueAfter: blockedRetry}, false, nil
			}
			return reconcile.Result{}, false, err
		}
	}
	before := w.Obj.DeepCopyObject().(client.Object)
	w.SetStamp(*st.write)
	// The optimistic lock makes a concurrent writer win; the conflict
	// retries and the stamp is decided again on the fresh object.
	if err := r.client.Patch(ctx, w.Obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, false, err
	}
	if w.Stamp() != *st.write {
		// The mutating webhook stamps what its own view computes; a
		// replica that has not seen the change yet (or the ConfigPolicy
		// that turns revisions on) writes back an older hash, or drops
		// the snapshots, and the pods would run other config than the
		// stamp says. Try again once its view has caught up, comparing
		// the whole stamp then: the hash alone may already look current.
		r.unstuck.Store(nn, true)
		return reconcile.Result{RequeueAfter: retryStuck}, false, nil
	}
	r.unstuck.Delete(nn)
	return reconcile.Result{RequeueAfter: st.requeue}, true, nil
}

// report records a step's Events, metrics and log line.
func (r *rollout) report(ctx context.Context, w workload.Object, s seen, st step) {
	if st.skipped != "" {
		rolloutsSkipped.WithLabelValues(s.kind, st.skipped).Inc()
	}
	if st.triggered {
		rolloutsTriggered.WithLabelValues(s.kind).Inc()
	}
	if st.log != "" {
		ctrl.LoggerFrom(ctx).Info(st.log, "kind", s.kind, "changed", s.changed, "hash", s.decision.Want.Hash, "hold", st.skipped, "flapping", s.flappingKey.Object())
	}
	for _, e := range st.events {
		r.events.Eventf(w.Obj, nil, e.typ, e.reason, "Rollout", "%s", e.message)
	}
}

// blockedRetry is how soon a rollout whose snapshot a quota, RBAC or an
// admission webhook refuses is tried again.
const blockedRetry = 15 * time.Second

// ensureCarried writes the snapshots the workload's revision names, if
// they are not yet: its pods are refused until they are, and the webhook
// names them the moment a workload is created. Where a write is blocked,
// policy learns it at once (the namespace's mark reaches the caches a
// moment later), so that this look already leaves them out.
func (r *rollout) ensureCarried(ctx context.Context, policy *configpolicy.NamespacePolicy, carried workload.Stamp, namespace string) error {
	if !policy.Revisions || carried.Snapshots == "" {
		return nil
	}
	err := r.snaps.Ensure(ctx, namespace, stamp.Snapshots(carried))
	switch {
	case err == nil:
		return nil
	case revisions.Blocked(err):
		if policy.SnapshotsBlocked == "" {
			policy.SnapshotsBlocked = revisions.BlockedReason(err) + ": " + err.Error()
		}
		return nil
	case revisions.BlockedReason(err) != "error":
		// The original changed or went meanwhile: the look decides on what
		// the config is now.
		return nil
	}
	return err
}

func (r *rollout) sources() stamp.Sources {
	return stamp.Sources{Inventory: r.inv, Records: r.records}
}

// The rollout controller reads config and workloads, patches pod templates
// (never Jobs, whose templates are immutable), and records Events.
//
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
