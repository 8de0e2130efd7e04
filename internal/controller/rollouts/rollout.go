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
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
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
	// Deliveries pin the consumers a config delivery has not reached: the
	// controller re-stamps a consumer of delivered config only with the
	// revision its delivery assigns (nil: no delivery).
	Deliveries *delivery.Pinner
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
	if err := logCauses(context.Background(), mgr.GetCache(), inv, rolledKinds, opts.Causes); err != nil {
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
			pinner:   opts.Deliveries,
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
	// waited holds the workloads whose stale hash had no logged cause at
	// the last look (see firstLookWithoutCause).
	waited   sync.Map
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
	pinner   *delivery.Pinner
	flapping *flapping.Tracker
	// heldSince holds, per workload held by flapping config, the start of
	// the episode its Event was recorded for.
	heldSince sync.Map
	// unstuck holds the workloads whose last stamp written did not stick
	// whole: their next look compares the whole stamp, not only the hash.
	unstuck sync.Map
}

// key names a workload of the controller's kind in the change log.
func (r *rollout) key(nn types.NamespacedName) drift.Key {
	return drift.Key{Group: r.typ.Group, Kind: r.typ.Kind.Kind, NamespacedName: nn}
}

// firstLookWithoutCause reports whether this is the first reconcile to find
// nn's hash stale with no logged cause; the next one acts on it, with or
// without a cause by then.
func (r *rollout) firstLookWithoutCause(nn types.NamespacedName) bool {
	_, waited := r.waited.LoadOrStore(nn, true)
	if waited {
		r.waited.Delete(nn)
	}
	return !waited
}

// putBack keeps the causes of a reconcile that failed for its retry.
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

func (r *rollout) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	changed := r.causes.Take(r.key(req.NamespacedName))
	// The first look decides whether to wait for a turn at all; the stamp
	// is decided again after the wait.
	first, err := r.look(ctx, req, len(changed) > 0)
	if first.w.Obj == nil || err != nil {
		r.waited.Delete(req.NamespacedName)
		if err != nil {
			r.putBack(req.NamespacedName, changed)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if len(first.versions.Rotated) > 0 {
		// The driver reported new versions: that is the cause, logged like
		// a changed object so the drift controller names it too.
		for _, c := range csiversions.Causes(first.versions.Rotated) {
			r.causes.Add(r.key(req.NamespacedName), c, time.Now())
		}
		changed = r.causes.Take(r.key(req.NamespacedName))
	}
	if len(changed) > 0 {
		r.waited.Delete(req.NamespacedName)
	} else if r.firstLookWithoutCause(req.NamespacedName) {
		// The template is stale and no change was logged for it: the
		// change that made it stale may be in the cache already while the
		// handler that logs it has not run (this reconcile came from
		// another event). Wait the batch window for it, as a logged change
		// would have, so the Event names what changed.
		return reconcile.Result{RequeueAfter: max(r.window, time.Millisecond)}, nil
	}
	what := "its config"
	if len(changed) > 0 {
		what = strings.Join(changed, ", ")
	}
	if res, held, err := r.held(ctx, req, first, what, changed); held || err != nil {
		return res, err
	}

	// Wait for this rollout's turn, then decide again on what the cache
	// holds by then: a change made meanwhile joins this rollout.
	if err := r.pace.Wait(ctx); err != nil {
		r.putBack(req.NamespacedName, changed)
		return reconcile.Result{}, err
	}
	l, err := r.look(ctx, req, len(changed) > 0)
	if l.w.Obj == nil || err != nil {
		if err != nil {
			r.putBack(req.NamespacedName, changed)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if res, held, err := r.held(ctx, req, l, what, changed); held || err != nil {
		return res, err // it started flapping during the wait
	}
	w, want := l.w, l.d.Want
	if l.policy.Revisions {
		// A revision is rolled out only once every snapshot it names is
		// written: its pods would be refused, or read other bytes.
		if err := r.snaps.Ensure(ctx, req.Namespace, stamp.Snapshots(want)); err != nil {
			r.putBack(req.NamespacedName, changed)
			r.events.Eventf(w.Obj, nil, corev1.EventTypeWarning, "ConfigRevisionBlocked", "Rollout",
				"%s changed, but a snapshot of the new config could not be written (%v): its pods keep the revision they run until it can", what, err)
			switch {
			case revisions.BlockedReason(err) == "changed":
				return reconcile.Result{RequeueAfter: time.Second}, nil // the next look names the newer content
			case revisions.Blocked(err):
				// Nothing changes until someone acts (the Event says who):
				// look again at the pace the namespace is probed, rather
				// than retry the write as fast as the queue allows.
				return reconcile.Result{RequeueAfter: blockedRetry}, nil
			}
			return reconcile.Result{}, err
		}
	}

	before := w.Obj.DeepCopyObject().(client.Object)
	w.SetStamp(want)
	// The optimistic lock makes a concurrent writer win; the conflict
	// retries and the stamp is decided again on the fresh object.
	if err := r.client.Patch(ctx, w.Obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		// Keep the causes for the retry, which the error schedules.
		r.putBack(req.NamespacedName, changed)
		return reconcile.Result{}, err
	}
	if stored := w.Stamp(); stored != want {
		// The mutating webhook stamps what its own view computes; a
		// replica that has not seen the change yet (or the ConfigPolicy
		// that turns revisions on) writes back an older hash, or drops
		// the snapshots, and the pods would run other config than the
		// stamp says. Try again once its view has caught up, comparing
		// the whole stamp then: the hash alone may already look current.
		r.unstuck.Store(req.NamespacedName, true)
		r.putBack(req.NamespacedName, changed)
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	r.unstuck.Delete(req.NamespacedName)
	hash := want.Hash
	log := ctrl.LoggerFrom(ctx)
	if hold := w.Hold(); hold.Reason != "" {
		rolloutsSkipped.WithLabelValues(r.typ.Kind.Kind, hold.Reason).Inc()
		log.Info("config changed; pod template updated, pods not replaced", "kind", r.typ.Kind.Kind, "changed", changed, "reason", hold.Reason)
		r.events.Eventf(w.Obj, nil, corev1.EventTypeWarning, "ConfigChangedNotRolled", "Rollout",
			"%s changed: updated %s to %s, but %s: running pods keep the old config until %s",
			what, v1alpha1.ConfigHashAnnotation, hash, hold.Why, hold.Until)
		return reconcile.Result{}, nil
	}
	rolloutsTriggered.WithLabelValues(r.typ.Kind.Kind).Inc()
	if len(l.d.Unpinned) > 0 {
		log.Info("revision unpinned: its snapshots cannot be written", "kind", r.typ.Kind.Kind, "unpinned", l.d.Unpinned, "why", l.policy.SnapshotsBlocked)
		r.events.Eventf(w.Obj, nil, corev1.EventTypeWarning, "ConfigRevisionBlocked", "Rollout",
			"snapshots of %s cannot be written in namespace %s (%s): configward took them out of the pod template, so its pods start and read them as they are now. "+
				"Let configward's controller write them (its ConfigPolicy's RevisionsReady condition says what refuses it); pods are pinned again at its next change after that",
			unpinnedList(l.d.Unpinned), req.Namespace, l.policy.SnapshotsBlocked)
		return reconcile.Result{}, nil
	}
	log.Info("config changed; rolling workload", "kind", r.typ.Kind.Kind, "changed", changed, "hash", hash)
	effect := "which rolls the pods through the workload's own update strategy"
	if r.typ.NextRunTakesTemplate {
		effect = "which the next Job it starts uses; Jobs already started keep theirs"
	}
	r.events.Eventf(w.Obj, nil, corev1.EventTypeNormal, "ConfigChanged", "Rollout",
		"%s changed: updated %s to %s, %s", what, v1alpha1.ConfigHashAnnotation, hash, effect)
	return reconcile.Result{}, nil
}

// blockedRetry is how soon a rollout whose snapshot a quota, RBAC or an
// admission webhook refuses is tried again.
const blockedRetry = 15 * time.Second

// held acts on a look whose stamp a hold keeps: a Job's immutable
// template is reported once per change; flapping config holds the
// workload until it has been stable for its window, recorded once per
// episode, with the logged causes kept for the rollout that follows.
func (r *rollout) held(ctx context.Context, req reconcile.Request, l look, what string, changed []string) (reconcile.Result, bool, error) {
	switch l.d.Hold {
	case drift.Hold{}:
		r.heldSince.Delete(req.NamespacedName)
		return reconcile.Result{}, false, nil
	case drift.Flapping:
	case drift.JobImmutable:
		// A Job's pod template is immutable; the next Job picks the change up.
		if len(changed) > 0 {
			rolloutsSkipped.WithLabelValues(r.typ.Kind.Kind, drift.JobImmutable.Reason).Inc()
			r.events.Eventf(l.w.Obj, nil, corev1.EventTypeWarning, "ConfigChangedNotRolled", "Rollout",
				"%s changed, but %s: running pods keep the old config and a new Job is needed to use the new one", what, drift.JobImmutable.Why)
		}
		return reconcile.Result{}, true, nil
	case drift.ConfigMissing:
		if len(changed) > 0 {
			rolloutsSkipped.WithLabelValues(r.typ.Kind.Kind, drift.ConfigMissing.Reason).Inc()
		}
		return reconcile.Result{}, true, nil
	default:
		return reconcile.Result{}, true, nil
	}
	r.putBack(req.NamespacedName, changed)
	th, rec := l.policy.Flapping, l.flapping
	if prev, ok := r.heldSince.Swap(req.NamespacedName, rec.Since); !ok || !prev.(time.Time).Equal(rec.Since) {
		rolloutsSkipped.WithLabelValues(r.typ.Kind.Kind, drift.Flapping.Reason).Inc()
		ctrl.LoggerFrom(ctx).Info("config changed; not rolled while config it consumes is flapping", "kind", r.typ.Kind.Kind, "flapping", l.flappingKey.Object())
		r.events.Eventf(l.w.Obj, nil, corev1.EventTypeWarning, "ConfigChangedNotRolled", "Rollout",
			"%s changed, but %s is flapping (%s; last written by %q; see its ConfigFlapping Event): running pods keep the config they run until it has been unchanged for %s",
			what, l.flappingKey.Object(), th, rec.Writer, th.Window)
	}
	return reconcile.Result{RequeueAfter: time.Until(rec.Until(th)) + time.Second}, true, nil
}

// look is one look at a workload: what its template should carry
// (stamp.Decide), with what the controller needs to act on it.
type look struct {
	// w is the workload; nil when there is nothing to do (it is gone,
	// carries what it should, or a hold keeps it with nothing to report).
	w        workload.Object
	d        stamp.Decision
	policy   configpolicy.NamespacePolicy
	versions csiversions.Versions
	// flappingKey and flapping name the config that holds it, and since
	// when.
	flappingKey flapping.Key
	flapping    flapping.Record
}

// look reads the workload and decides its stamp. changed says whether
// config it consumes changed since the last reconcile.
func (r *rollout) look(ctx context.Context, req reconcile.Request, changed bool) (look, error) {
	w := r.typ.Wrap(r.typ.New())
	if err := r.client.Get(ctx, req.NamespacedName, w.Obj); err != nil {
		return look{}, err
	}
	// What the object alone says costs no look at the cache (a Job's
	// immutability is reported only when its hash is stale: see held).
	if hold, held := stamp.Held(w, nil); held && hold != drift.JobImmutable {
		if changed && hold == drift.OptedOut {
			rolloutsSkipped.WithLabelValues(r.typ.Kind.Kind, drift.OptedOut.Reason).Inc()
		}
		return look{}, nil
	}
	// Declared kinds whose template is no pod spec were refused at
	// admission; the spec read is then empty and counts nothing.
	spec, _ := w.PodSpec()
	csi := csiversions.Mounts(w, spec)
	carried := w.Stamp()
	if carried.Hash == "" && !changed && !csi {
		return look{}, nil // installing configward restarts nothing
	}
	policy, err := r.policies.For(ctx, r.client, req.Namespace)
	if err != nil {
		return look{}, err
	}
	if !policy.Rollouts {
		if changed {
			rolloutsSkipped.WithLabelValues(r.typ.Kind.Kind, drift.PolicyDisabled.Reason).Inc()
		}
		return look{}, nil
	}
	if err := r.ensureCarried(ctx, &policy, carried, req.Namespace); err != nil {
		return look{}, err
	}
	l := look{w: w, policy: policy, versions: csiversions.Versions{Record: carried.SecretVersions}}
	if csi {
		cl := csiversions.Look{Client: r.client, Inventory: r.inv, Key: r.keys.Current()}
		if l.versions, err = cl.Versions(ctx, w, spec, policy.Secrets); err != nil {
			return look{}, err
		}
		if l.versions.Write && len(l.versions.Rotated) == 0 {
			// A baseline, or versions seen changing with none new: recorded
			// on the workload's metadata, which rolls nothing.
			if err := r.recordVersions(ctx, w, l.versions); err != nil {
				return look{}, err
			}
			l.versions.Write = false
		}
		carried = w.Stamp()
	}
	facts, err := r.sources().Gather(ctx, stamp.Subject{Workload: w, Spec: spec, Policy: policy, Key: r.keys.Current().Bytes(),
		Versions: l.versions.Record, Rolled: l.versions.Rolled, Stored: &carried})
	if err != nil {
		return look{}, err
	}
	var isFlapping bool
	l.flappingKey, l.flapping, isFlapping = r.flapping.Input(policy.Flapping, req.Namespace, spec, r.inv.Rolls(ctx, req.Namespace))
	_, unstuck := r.unstuck.Load(req.NamespacedName)
	l.d = stamp.Decide(stamp.Input{Workload: w, Facts: facts,
		Look: stamp.Look{Changed: changed || len(l.versions.Rotated) > 0, Exact: unstuck, Flapping: isFlapping}})
	if !l.d.Writes(carried) && (l.d.Hold.Reason == "" || l.d.Want.Hash == carried.Hash) {
		// Nothing to write, and nothing held back to report.
		return look{}, nil
	}
	return l, nil
}

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
	return stamp.Sources{Inventory: r.inv, Deliveries: r.pinner}
}

// The rollout controller reads config and workloads, patches pod templates
// (never Jobs, whose templates are immutable), and records Events.
//
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func unpinnedList(srcs []revision.Source) string {
	names := make([]string, len(srcs))
	for i, src := range srcs {
		names[i] = src.String()
	}
	return strings.Join(names, ", ")
}
