// Package revisions keeps config history in step: the Snapshotter writes the
// immutable snapshots a revision names before the revision is rolled out
// (the rollout and delivery controllers call it), and the revisions
// controller deletes, per namespace, the snapshots nothing that can still
// create pods names any more, and says which pods started unpinned.
package revisions

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/controller"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

// The revisions controller keeps each namespace's config snapshots in step
// with what can still create pods there. A snapshot lives as long as a
// workload's template, a ReplicaSet or ControllerRevision of its history, a
// Job or a pod names it; then it is deleted. The tie is computed here, not
// kept in owner references: a snapshot shared by a thousand Deployments
// would otherwise carry thousands of them, rewritten on every new
// ReplicaSet, beside up to 1 MiB of data. It also writes the snapshots a
// template names that are not written yet (a pipeline that applies a
// workload with new config at once), and says so for every pod that
// started without its revision's config (created while configward's Pod
// path was down).
//
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch

var (
	snapshotsDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "configward_snapshots_deleted_total",
		Help: "Config snapshots the controller deleted once nothing that can create pods named them.",
	})
	snapshotsKept = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configward_snapshots",
		Help: "Config snapshots in a namespace (ConfigMaps and Secrets configward copied for revisions).",
	}, []string{"namespace"})
	podsNotPinned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "configward_pods_not_pinned_total",
		Help: "Pods whose template names config snapshots but whose references name the originals: created while configward's Pod path was down (it fails open), they read the originals' live bytes.",
	})
)

func init() { metrics.Registry.MustRegister(snapshotsDeleted, snapshotsKept, podsNotPinned) }

// Options configure the revisions controller.
type Options struct {
	Policies  *configpolicy.Store
	Snapshots *Snapshotter
	// Grace is how long a snapshot no one names is kept: a template that
	// names a snapshot just written may not be in the cache yet.
	Grace time.Duration
}

// Setup registers the revisions controller, which reconciles
// namespaces.
func Setup(mgr ctrl.Manager, inv *inventory.Inventory, opts Options) error {
	r := &revisions{client: mgr.GetClient(), cache: mgr.GetCache(), inv: inv, opts: opts,
		events: mgr.GetEventRecorder("configward-revisions"), unnamedSince: map[types.UID]time.Time{}, reported: map[types.UID]string{}}
	for _, k := range inv.WatchedKinds() {
		if t, _ := inv.Registry().Type(k.GroupKind()); t.Rolled() {
			r.types = append(r.types, t)
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("revisions")
	watched := []client.Object{&corev1.Pod{}, &appsv1.ReplicaSet{}, &appsv1.ControllerRevision{}, &batchv1.Job{},
		&corev1.ConfigMap{}, &corev1.Secret{}}
	for _, t := range r.types {
		watched = append(watched, t.New())
	}
	for _, obj := range watched {
		b = b.Watches(obj, controller.NamespaceOf(nil))
	}
	return b.Complete(r)
}

type revisions struct {
	client client.Client
	// cache lists snapshots (see snapshots).
	cache  client.Reader
	inv    *inventory.Inventory
	opts   Options
	types  []*workload.Type
	events recorder.EventRecorder

	mu sync.Mutex
	// unnamedSince is when a snapshot was first seen named by nothing.
	unnamedSince map[types.UID]time.Time
	// reported holds the pods already reported as not pinned, with their
	// namespace.
	reported map[types.UID]string
}

// named is what the objects of a namespace name: the snapshots (by kind
// and name), and the revisions whose snapshots must exist because they
// can still create pods.
type named struct {
	snapshots map[revision.Source]bool
	creators  []revision.Snapshots
	pods      []*corev1.Pod
	bare      []*corev1.Pod
}

func (r *revisions) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	settings, err := r.opts.Policies.For(ctx, r.client, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	snaps, err := r.snapshots(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !settings.Revisions && len(snaps) == 0 {
		// Nothing to write, keep or report here: most namespaces.
		snapshotsKept.DeleteLabelValues(ns)
		return reconcile.Result{}, nil
	}
	n, err := r.named(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	if settings.Revisions {
		key := r.opts.Snapshots.keys.Current().Bytes()
		for _, p := range n.bare {
			// What the bare Pod's stamp names, as the webhook decided it.
			w, _ := r.inv.Registry().For(p)
			facts, err := stamp.Sources{Inventory: r.inv}.Gather(ctx, stamp.Subject{Workload: w, Spec: &p.Spec, Policy: settings, Key: key})
			if err != nil {
				return reconcile.Result{}, err
			}
			n.creators = append(n.creators, facts.Snapshots)
		}
		for _, snaps := range n.creators {
			if err := r.opts.Snapshots.Ensure(ctx, ns, snaps); err != nil {
				// The rollout that named it says why; pods wait.
				ctrl.LoggerFrom(ctx).Info("a snapshot a revision names cannot be written", "namespace", ns, "error", err.Error())
			}
		}
	}
	r.reportUnpinned(ns, n.pods)
	requeue, err := r.collect(ctx, ns, n, snaps)
	if settings.Revisions && settings.SnapshotsBlocked != "" {
		// Nothing may name a snapshot that is not written while writes
		// are blocked: a trial write tells when they are not any more.
		if perr := r.opts.Snapshots.Probe(ctx, ns); perr != nil && !Blocked(perr) {
			return reconcile.Result{}, perr
		}
		requeue = probeAgain(requeue)
	}
	return reconcile.Result{RequeueAfter: requeue}, err
}

// blockedProbes is how often a namespace where snapshots cannot be written
// is tried again.
const blockedProbes = 15 * time.Second

// probeAgain is when to look at a namespace where snapshot writes are
// blocked again, given when collect would: no later than blockedProbes.
// (Its own function so that the bound is tested without a cluster.)
func probeAgain(requeue time.Duration) time.Duration {
	return min(nonZero(requeue, blockedProbes), blockedProbes)
}

func nonZero(d, otherwise time.Duration) time.Duration {
	if d == 0 {
		return otherwise
	}
	return d
}

// snapshots lists the namespace's snapshots from the cache: the manager's
// client refuses ConfigMap reads (they hold digests only), which is all a
// snapshot's identity needs.
func (r *revisions) snapshots(ctx context.Context, ns string) ([]client.Object, error) {
	sel := client.MatchingLabels{v1alpha1.SnapshotLabel: v1alpha1.SnapshotLabelValue}
	var cms corev1.ConfigMapList
	if err := r.cache.List(ctx, &cms, client.InNamespace(ns), sel); err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	var secrets corev1.SecretList
	if err := r.cache.List(ctx, &secrets, client.InNamespace(ns), sel); err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	var snaps []client.Object
	for i := range cms.Items {
		snaps = append(snaps, &cms.Items[i])
	}
	for i := range secrets.Items {
		snaps = append(snaps, &secrets.Items[i])
	}
	return snaps, nil
}

// named reads what the namespace's objects name, from the cache.
func (r *revisions) named(ctx context.Context, ns string) (named, error) {
	n := named{snapshots: map[revision.Source]bool{}}
	add := n.add
	in := []client.ListOption{client.InNamespace(ns), client.UnsafeDisableDeepCopy}
	// Top-level workloads of every rolled kind, and what their own
	// controllers keep: ReplicaSets, Jobs (a CronJob's), ControllerRevisions.
	for _, t := range r.types {
		list := t.NewList()
		if err := r.client.List(ctx, list, in...); err != nil {
			return n, fmt.Errorf("listing %s: %w", t.Resource, err)
		}
		for _, obj := range workload.Items(list) {
			v, _ := t.Wrap(obj).TemplateAnnotation(v1alpha1.ConfigSnapshotsAnnotation)
			add(v, true)
		}
	}
	var crs appsv1.ControllerRevisionList
	if err := r.client.List(ctx, &crs, in...); err != nil {
		return n, fmt.Errorf("listing controllerrevisions: %w", err)
	}
	for i := range crs.Items {
		add(inventory.RevisionAnnotations(&crs.Items[i])[v1alpha1.ConfigSnapshotsAnnotation], true)
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, in...); err != nil {
		return n, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		add(p.Annotations[v1alpha1.ConfigSnapshotsAnnotation], false)
		if !workload.Controlled(p) {
			// A bare Pod names only the snapshots written when it was
			// created; the content it reads gets one now, for the next.
			n.bare = append(n.bare, p)
		}
		// What it mounts counts too: it read those bytes at start.
		for _, c := range refs.ConsumedBy(&p.Spec) {
			n.snapshots[revision.Source{Kind: c.Kind, Name: c.Name}] = true
		}
		n.pods = append(n.pods, p)
	}
	return n, r.namedByChannels(ctx, ns, n)
}

// add counts the snapshots a config-snapshots annotation names; creates
// says its object can still create pods, so they must exist. (A method,
// not a closure in named, so that what names a snapshot is tested without
// a cluster.)
func (n *named) add(annotation string, creates bool) {
	snaps, err := revision.Decode(annotation)
	if err != nil || len(snaps) == 0 {
		return
	}
	for src, snap := range snaps {
		n.snapshots[revision.Source{Kind: src.Kind, Name: snap}] = true
	}
	if creates {
		n.creators = append(n.creators, snaps)
	}
}

// namedByChannels adds what hot config's channels hold and what its
// deliveries may write into them (their From, each wave's From, and To):
// a rollback or a wave not reached yet writes it back.
func (r *revisions) namedByChannels(ctx context.Context, ns string, n named) error {
	in := []client.ListOption{client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: v1alpha1.ChannelLabelValue}}
	var cms corev1.ConfigMapList
	if err := r.cache.List(ctx, &cms, in...); err != nil {
		return fmt.Errorf("listing channels: %w", err)
	}
	for i := range cms.Items {
		n.snapshots[revision.Source{Kind: refs.ConfigMap, Name: channel.Content(cms.Items[i].Annotations)}] = true
	}
	var secrets corev1.SecretList
	if err := r.cache.List(ctx, &secrets, in...); err != nil {
		return fmt.Errorf("listing channels: %w", err)
	}
	for i := range secrets.Items {
		n.snapshots[revision.Source{Kind: refs.Secret, Name: channel.Content(secrets.Items[i].Annotations)}] = true
	}
	var recs v1alpha1.ConfigDeliveryList
	if err := r.client.List(ctx, &recs, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing configdeliveries: %w", err)
	}
	for i := range recs.Items {
		for _, src := range deliveryNames(&recs.Items[i]) {
			n.snapshots[src] = true
		}
	}
	return nil
}

// deliveryNames are the snapshots a delivery may still write into hot
// config's channels: none for a delivery of rollout config (its revisions
// name theirs). Its own function so that it is tested without a cluster.
func deliveryNames(rec *v1alpha1.ConfigDelivery) []revision.Source {
	if !rec.Spec.Hot {
		return nil
	}
	kind := refs.Kind(rec.Spec.Config.Kind)
	var out []revision.Source
	for _, snap := range append([]string{rec.Status.From, rec.Status.To}, waveFroms(rec)...) {
		out = append(out, revision.Source{Kind: kind, Name: snap})
	}
	return out
}

func waveFroms(rec *v1alpha1.ConfigDelivery) []string {
	var out []string
	for _, w := range rec.Status.Waves {
		out = append(out, w.From)
	}
	return out
}

// reportUnpinned records, once per pod, a pod that names snapshots in its
// annotation but reads the originals: it started while the Pod path was
// down (the webhook fails open), on the originals' live bytes.
func (r *revisions) reportUnpinned(ns string, pods []*corev1.Pod) {
	live := map[types.UID]bool{}
	for _, p := range pods {
		live[p.UID] = true
	}
	r.mu.Lock()
	for uid, podNS := range r.reported {
		if podNS == ns && !live[uid] {
			delete(r.reported, uid)
		}
	}
	r.mu.Unlock()
	for _, p := range pods {
		unpinned, snaps := readsOriginals(p)
		r.mu.Lock()
		_, seen := r.reported[p.UID]
		first := len(unpinned) > 0 && !seen
		if first {
			r.reported[p.UID] = p.Namespace
		}
		r.mu.Unlock()
		if first {
			podsNotPinned.Inc()
			r.events.Eventf(p, nil, corev1.EventTypeWarning, "ConfigRevisionNotPinned", "Pin",
				"the pod reads %v, not its revision's snapshots (%s): it was created while configward's Pod path was not reachable, so it runs on their live bytes; delete it to have it recreated on its revision's config",
				unpinned, snaps.Encode())
		}
	}
}

// readsOriginals lists the originals ("ConfigMap/app") a pod reads whose
// snapshots its config-snapshots annotation names, with what it names: a
// pod the Pod path pinned reads the snapshots instead, and lists none. Its
// own function so that it is tested without a cluster.
func readsOriginals(p *corev1.Pod) ([]string, revision.Snapshots) {
	snaps, err := revision.Decode(p.Annotations[v1alpha1.ConfigSnapshotsAnnotation])
	if err != nil || len(snaps) == 0 {
		return nil, nil
	}
	var unpinned []string
	for _, c := range refs.ConsumedBy(&p.Spec) {
		if _, ok := snaps[revision.Source{Kind: c.Kind, Name: c.Name}]; ok {
			unpinned = append(unpinned, string(c.Kind)+"/"+c.Name)
		}
	}
	return unpinned, snaps
}

// collect deletes the namespace's snapshots that nothing has named for the
// grace period, and says when to look again for the others.
func (r *revisions) collect(ctx context.Context, ns string, n named, snaps []client.Object) (time.Duration, error) {
	if len(snaps) == 0 {
		snapshotsKept.DeleteLabelValues(ns)
	} else {
		snapshotsKept.WithLabelValues(ns).Set(float64(len(snaps)))
	}
	now, next := time.Now(), time.Duration(0)
	for _, s := range snaps {
		kind := refs.ConfigMap
		if _, ok := s.(*corev1.Secret); ok {
			kind = refs.Secret
		}
		if n.snapshots[revision.Source{Kind: kind, Name: s.GetName()}] {
			r.forget(s.GetUID())
			continue
		}
		if wait := graceLeft(r.unnamed(s.GetUID(), now), s.GetCreationTimestamp().Time, r.opts.Grace, now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		// The UID and version it was judged at: a snapshot written again
		// under the same name meanwhile is not deleted.
		uid, rv := s.GetUID(), s.GetResourceVersion()
		err := r.client.Delete(ctx, s, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("deleting snapshot %s/%s: %w", ns, s.GetName(), err)
		}
		r.forget(uid)
		r.opts.Snapshots.Forget(ns, s.GetName())
		snapshotsDeleted.Inc()
	}
	if next > 0 {
		next += time.Second
	}
	return next, nil
}

// graceLeft is how long a snapshot first seen named by nothing at since,
// and created at created, is still kept at now: the grace counts from the
// later of the two. Zero or less: delete it. Its own function so that it
// is tested without a cluster.
func graceLeft(since, created time.Time, grace time.Duration, now time.Time) time.Duration {
	if created.After(since) {
		since = created
	}
	return since.Add(grace).Sub(now)
}

func (r *revisions) unnamed(uid types.UID, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.unnamedSince[uid]; ok {
		return t
	}
	r.unnamedSince[uid] = now
	return now
}

func (r *revisions) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.unnamedSince, uid)
}
