package revisions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/revision"
)

// Config snapshots are written only here, by the controller's identity,
// from values read from the API server (the cache holds digests only), and
// deleted by the revisions controller once nothing that can create pods
// names them.
//
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=create;delete

var (
	snapshotsWritten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_snapshots_written_total",
		Help: "Config snapshots the controller wrote, by kind (ConfigMap, Secret).",
	}, []string{"kind"})
	snapshotsBlocked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_snapshots_blocked_total",
		Help: "Config snapshots the controller could not write, by reason: quota (a ResourceQuota), forbidden (RBAC, or an admission webhook refused it), changed (the original's content moved on before it was copied), missing (the original is gone), error.",
	}, []string{"reason"})
	namespacesBlocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configward_snapshots_blocked_namespace",
		Help: "1 for a namespace where the controller cannot write config snapshots now (a quota, RBAC or an admission webhook refuses them; the namespace carries configward.dev/snapshots-blocked): its workloads' new revisions name no snapshot that is not written, and their pods read the originals.",
	}, []string{"namespace"})
)

func init() { metrics.Registry.MustRegister(snapshotsWritten, snapshotsBlocked, namespacesBlocked) }

// Snapshotter writes the snapshots a revision names.
type Snapshotter struct {
	inv *inventory.Inventory
	// live reads originals, with their values, from the API server.
	live   client.Reader
	client client.Client
	keys   *hashkey.Source
	// written holds the snapshots (namespace/name) this process created
	// that the cache had not shown yet when last asked: a thousand
	// workloads naming one new snapshot are reconciled faster than the
	// create comes back through the watch, and each would read the
	// original and try the create again.
	written sync.Map
}

// NewSnapshotter writes snapshots with the manager's client, reading
// originals through its API reader.
func NewSnapshotter(mgr ctrl.Manager, inv *inventory.Inventory, keys *hashkey.Source) *Snapshotter {
	return &Snapshotter{inv: inv, live: mgr.GetAPIReader(), client: mgr.GetClient(), keys: keys}
}

// Blocked reports whether err is a write that cannot succeed until someone
// acts (a quota, RBAC, an admission webhook), as opposed to a race with
// the original's content or a passing error.
func Blocked(err error) bool {
	switch BlockedReason(err) {
	case "quota", "forbidden":
		return true
	}
	return false
}

// blocked is why a snapshot could not be written; the revision that names
// it must not be rolled out.
type blocked struct {
	reason string
	err    error
}

func (b *blocked) Error() string { return b.err.Error() }
func (b *blocked) Unwrap() error { return b.err }

// BlockedReason is the metric reason of err, "" when err is nil.
func BlockedReason(err error) string {
	var b *blocked
	switch {
	case err == nil:
		return ""
	case errors.As(err, &b):
		return b.reason
	}
	return "error"
}

// Ensure writes every snapshot of snaps that is not in the cache yet, each
// copied from its original as the API server holds it now. An original
// whose content no longer gives the snapshot's name changed again since
// the revision was named: that snapshot can no longer be written.
func (s *Snapshotter) Ensure(ctx context.Context, namespace string, snaps revision.Snapshots) error {
	for _, src := range snaps.Sorted() {
		name := snaps[src]
		ok, err := s.inv.SnapshotWritten(ctx, namespace, src, name)
		if err != nil {
			return err
		}
		written := namespace + "/" + name
		if ok {
			s.written.Delete(written) // the cache has it from now on
			continue
		}
		if _, ok := s.written.Load(written); ok {
			continue
		}
		if err := s.write(ctx, namespace, src, name); err != nil {
			snapshotsBlocked.WithLabelValues(BlockedReason(err)).Inc()
			if Blocked(err) {
				s.block(ctx, namespace, err)
			}
			return err
		}
		s.written.Store(written, true)
		s.unblock(ctx, namespace)
	}
	return nil
}

// maxBlockedNote bounds the annotation that says why writes are blocked.
const maxBlockedNote = 512

// block marks namespace as one where snapshots cannot be written, with
// why: the webhook and the controller then name no snapshot that is not
// written there, so workloads' new pods start on the originals instead of
// being refused until someone fixes the cause.
func (s *Snapshotter) block(ctx context.Context, namespace string, err error) {
	if s.setBlocked(ctx, namespace, blockedNote(err)) {
		ctrl.LoggerFrom(ctx).Error(err, "config snapshots cannot be written; new revisions in the namespace start unpinned until they can", "namespace", namespace)
	}
	namespacesBlocked.WithLabelValues(namespace).Set(1)
}

// blockedNote is the annotation that says why writes are blocked: the
// reason, then the refusal, bounded. Its own function so that it is
// tested without a cluster.
func blockedNote(err error) string {
	note := BlockedReason(err) + ": " + err.Error()
	if len(note) > maxBlockedNote {
		note = note[:maxBlockedNote-3] + "..."
	}
	return note
}

// unblock takes namespace's mark off, once a snapshot was written there.
func (s *Snapshotter) unblock(ctx context.Context, namespace string) {
	if s.setBlocked(ctx, namespace, "") {
		ctrl.LoggerFrom(ctx).Info("config snapshots can be written again", "namespace", namespace)
	}
	namespacesBlocked.DeleteLabelValues(namespace)
}

// setBlocked sets namespace's SnapshotsBlockedAnnotation to note ("" takes
// it off), and reports whether that changed it.
func (s *Snapshotter) setBlocked(ctx context.Context, namespace, note string) bool {
	var ns corev1.Namespace
	if err := s.client.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		return false
	}
	if ns.Annotations[v1alpha1.SnapshotsBlockedAnnotation] == note {
		return false
	}
	before := ns.DeepCopy()
	if note == "" {
		delete(ns.Annotations, v1alpha1.SnapshotsBlockedAnnotation)
	} else {
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		ns.Annotations[v1alpha1.SnapshotsBlockedAnnotation] = note
	}
	if err := s.client.Patch(ctx, &ns, client.MergeFrom(before)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "marking whether config snapshots can be written", "namespace", namespace)
		return false
	}
	return true
}

// probeName is the ConfigMap a trial write is made of: it looks like a
// snapshot, so that everything that would judge a real one judges it.
const probeName = "configward-snapshot-probe"

// Probe tries a server-side dry run of a snapshot write in namespace (a
// quota, RBAC and every admission webhook judge it as they would a real
// one, and nothing is stored). It marks or unmarks the namespace by the
// answer, and returns the refusal, nil when the write would succeed.
func (s *Snapshotter) Probe(ctx context.Context, namespace string) error {
	err := s.TryWrite(ctx, namespace)
	if Blocked(err) {
		s.block(ctx, namespace, err)
		return err
	}
	if err == nil {
		s.unblock(ctx, namespace)
	}
	return err
}

// TryWrite is a server-side dry run of a snapshot write in namespace,
// classified as Ensure's writes are (see BlockedReason).
func (s *Snapshotter) TryWrite(ctx context.Context, namespace string) error {
	probe := revision.ConfigMapSnapshot(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: probeName}}, probeName+"-dry-run")
	err := s.client.Create(ctx, probe, client.DryRunAll)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err) && isQuota(err):
		return &blocked{"quota", fmt.Errorf("a ResourceQuota refuses config snapshots in namespace %s: %w", namespace, err)}
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
		return &blocked{"forbidden", fmt.Errorf("writing a config snapshot in namespace %s is refused: %w", namespace, err)}
	}
	return fmt.Errorf("trying a config snapshot write in namespace %s: %w", namespace, err)
}

func (s *Snapshotter) write(ctx context.Context, namespace string, src revision.Source, name string) error {
	// The values live only in this call: copied, never logged or kept. A
	// kind of no content (nothing but ConfigMaps and Secrets) is refused
	// by the read.
	obj, keyDigests, err := inventory.ReadLive(ctx, s.live, src.Kind, types.NamespacedName{Namespace: namespace, Name: src.Name})
	if err != nil {
		return readFailed(src, namespace, err)
	}
	content := digest.Content(keyDigests, nil)
	var snap client.Object
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		snap = revision.ConfigMapSnapshot(o, name)
	case *corev1.Secret:
		snap = revision.SecretSnapshot(o, name)
	}
	if revision.SnapshotName(s.keys.Current().Bytes(), namespace, src.Kind, src.Name, content) != name {
		return &blocked{"changed", fmt.Errorf("%s %s/%s changed again before snapshot %s of it was written", src.Kind, namespace, src.Name, name)}
	}
	err = s.client.Create(ctx, snap)
	switch {
	case err == nil:
		snapshotsWritten.WithLabelValues(string(src.Kind)).Inc()
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil // written by an earlier attempt; the cache is behind
	case apierrors.IsForbidden(err) && isQuota(err):
		return &blocked{"quota", fmt.Errorf("a ResourceQuota refused snapshot %s of %s %s/%s: %w", name, src.Kind, namespace, src.Name, err)}
	case apierrors.IsForbidden(err):
		return &blocked{"forbidden", fmt.Errorf("writing snapshot %s of %s %s/%s was refused (%s): %w", name, src.Kind, namespace, src.Name, refusalHint(err), err)}
	}
	return fmt.Errorf("writing snapshot %s of %s %s/%s: %w", name, src.Kind, namespace, src.Name, err)
}

func readFailed(src revision.Source, namespace string, err error) error {
	if apierrors.IsNotFound(err) {
		return &blocked{"missing", fmt.Errorf("%s %s/%s is gone, so the snapshot of it cannot be written", src.Kind, namespace, src.Name)}
	}
	return fmt.Errorf("reading %s %s/%s: %w", src.Kind, namespace, src.Name, err)
}

// refusalHint says where to look for a refusal: an admission webhook's,
// or RBAC's.
func refusalHint(err error) string {
	if strings.Contains(err.Error(), "admission webhook") {
		return "an admission webhook refuses configward's controller; if it is configward's own, start it with --configward-service-accounts naming the controller, as the chart does"
	}
	return "RBAC; the chart grants it with revisions.enabled"
}

// isQuota reports whether a refusal came from a ResourceQuota.
func isQuota(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && strings.Contains(status.Status().Message, "exceeded quota")
}

// Forget drops a deleted snapshot from what this process remembers having
// written, so that naming the same content again writes it again.
func (s *Snapshotter) Forget(namespace, name string) { s.written.Delete(namespace + "/" + name) }
