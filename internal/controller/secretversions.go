package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/workload"
)

// onlyDeletes lets deletions through, nothing else.
var onlyDeletes = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// podStatuses is an empty SecretProviderClassPodStatus list or object, read
// unstructured: configward takes no dependency on the driver's module for
// four fields of it.
func podStatuses() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(secretversions.PodStatusKind.GroupVersion().WithKind(secretversions.PodStatusKind.Kind + "List"))
	return l
}

func podStatus() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(secretversions.PodStatusKind)
	return u
}

// versionsLook is what one look at a workload's CSI-mounted secrets found.
type versionsLook struct {
	// record is the workload's record as it should be now, encoded; write
	// says it differs from the stored one.
	record string
	write  bool
	// rotated are the classes rotated since the stored record: the record
	// is then written with the rollout, never before it.
	rotated []string
	rolled  map[string]string
}

// mountsCSI says whether w has secret versions to look at: its spec mounts
// a SecretProviderClass, or did when its record was written.
func mountsCSI(w workload.Object, spec *corev1.PodSpec) bool {
	return len(refs.CSIClasses(spec)) > 0 || w.Obj.GetAnnotations()[v1alpha1.SecretVersionsAnnotation] != ""
}

// rotationCauses names rotated classes as causes are named
// ("SecretProviderClass/db-creds").
func rotationCauses(classes []string) []string {
	out := make([]string, 0, len(classes))
	for _, c := range classes {
		out = append(out, string(refs.SecretProviderClass)+"/"+c)
	}
	return out
}

// names says whether causes name every one of want.
func names(causes, want []string) bool {
	for _, w := range want {
		if !slices.Contains(causes, w) {
			return false
		}
	}
	return true
}

// csiLook looks at the versions the Secrets Store CSI driver reports for the
// pods of one namespace. The pods and statuses are read once, on the first
// workload that mounts a class: the drift controller looks at every
// workload of a namespace in one judgement.
type csiLook struct {
	client client.Reader
	inv    *inventory.Inventory
	key    *hashkey.Key

	read     bool
	pods     []corev1.Pod
	owners   drift.Owners
	statuses []secretversions.PodStatus
}

// versions looks at the versions the pods of w report for the rollout-mode
// SecretProviderClasses its spec mounts (see internal/secretversions for
// the decision). Without the driver's kinds, or where Secrets take no part
// in rollouts, it leaves the record as it is.
func (l *csiLook) versions(ctx context.Context, w workload.Object, spec *corev1.PodSpec, secrets bool) (versionsLook, error) {
	stored := w.Obj.GetAnnotations()[v1alpha1.SecretVersionsAnnotation]
	rec, err := secretversions.Decode(stored)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("unreadable record of secret versions; starting a new baseline", "error", err.Error())
	}
	if !l.inv.CSIClasses() || !secrets {
		// Nothing to look at: the record stays as it is, since dropping it
		// would take rotated classes out of the hash and roll the workload
		// (a restart while the driver's CRDs are briefly not served).
		return versionsLook{record: stored, rolled: rec.Rolled()}, nil
	}
	ns := w.Obj.GetNamespace()
	mounted := refs.CSIClasses(spec)
	var followed []string
	for _, name := range mounted {
		o, err := l.inv.Get(ctx, refs.SecretProviderClass, ns, name)
		if err != nil {
			return versionsLook{}, err
		}
		if !o.Exists || o.Mode == inventory.Rollout {
			followed = append(followed, name)
		}
	}
	var observed secretversions.Observed
	if len(followed) > 0 {
		if err := l.readNamespace(ctx, ns); err != nil {
			return versionsLook{}, err
		}
		observed = secretversions.Observe(l.key.Bytes(), ns, followed, l.podsOf(w.Obj), l.statuses)
	}
	// A hot class is not looked at, and its part of the record stays as it
	// was: the config hash leaves it out while it is hot. Dropping it would
	// be undone by the webhook, which keeps the record of a workload that
	// mounts a class on every write.
	next, rotated := secretversions.Next(rec, l.key.ID, mounted, observed)
	enc := next.Encode()
	return versionsLook{record: enc, write: enc != stored, rotated: rotated, rolled: next.Rolled()}, nil
}

func (l *csiLook) readNamespace(ctx context.Context, ns string) error {
	if l.read {
		return nil
	}
	pods, rss, jobs, err := podsAndOwners(ctx, l.client, ns)
	if err != nil {
		return err
	}
	list := podStatuses()
	if err := l.client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing SecretProviderClassPodStatuses: %w", err)
	}
	l.statuses = make([]secretversions.PodStatus, 0, len(list.Items))
	for _, u := range list.Items {
		l.statuses = append(l.statuses, secretversions.PodStatusOf(u.Object))
	}
	l.pods, l.owners, l.read = pods, drift.OwnersOf(rss, jobs), true
	return nil
}

// podsOf names the pods w runs now: those it controls, or those a
// ReplicaSet or Job it controls does. Finished pods mount nothing.
func (l *csiLook) podsOf(w client.Object) map[string]bool {
	out := map[string]bool{}
	for i := range l.pods {
		p := &l.pods[i]
		if c := metav1.GetControllerOf(p); c != nil && drift.Live(p) && l.owners.Top(c) == w.GetUID() {
			out[p.Name] = true
		}
	}
	return out
}

// recordVersions writes a record that rolls nothing (a baseline, or the
// versions seen changing without a new one) on w's metadata, never its
// template, and leaves w as stored.
func (r *rollout) recordVersions(ctx context.Context, w workload.Object, look versionsLook) error {
	before := w.Obj.DeepCopyObject().(client.Object)
	setVersions(w, look.record)
	return r.client.Patch(ctx, w.Obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func setVersions(w workload.Object, record string) {
	a := w.Obj.GetAnnotations()
	if record == "" {
		delete(a, v1alpha1.SecretVersionsAnnotation)
	} else {
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.SecretVersionsAnnotation] = record
	}
	w.Obj.SetAnnotations(a)
}

// podStatusChanged maps a SecretProviderClassPodStatus to the workload of
// the controller's kind whose pod it describes.
func (r *rollout) podStatusChanged(ctx context.Context, obj client.Object) []reconcile.Request {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	s := secretversions.PodStatusOf(u.Object)
	if s.Pod == "" {
		return nil
	}
	var pod corev1.Pod
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: s.Pod}, &pod); err != nil {
		return nil // gone: podGone looked already
	}
	return r.workloadOf(ctx, &pod)
}

// podGone maps a deleted pod that mounted a SecretProviderClass to its
// workload: the versions it reported no longer count as seen (see
// secretversions.Next).
func (r *rollout) podGone(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || len(refs.CSIClasses(&pod.Spec)) == 0 {
		return nil
	}
	return r.workloadOf(ctx, pod)
}

// workloadOf is the workload of the controller's kind that runs pod: the
// top-level owner workload.TopOwner finds, reading each owner between from
// the cache.
func (r *rollout) workloadOf(ctx context.Context, pod *corev1.Pod) []reconcile.Request {
	top := workload.TopOwner(metav1.GetControllerOf(pod), func(ref *metav1.OwnerReference) *metav1.OwnerReference {
		// Only built-in kinds hand on (ReplicaSet, Job), read typed from
		// the informers the manager has for them.
		t, ok := r.inv.Registry().Type(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind())
		if !ok {
			return nil
		}
		owner := t.New()
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, owner); err != nil {
			return nil
		}
		return metav1.GetControllerOf(owner)
	})
	if top == nil || top.Kind != r.typ.Kind.Kind || ownerGroup(top) != r.typ.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: top.Name}}}
}

func ownerGroup(ref *metav1.OwnerReference) string {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return gv.Group
}

// Where the Secrets Store CSI driver is installed, the controller reads which
// SecretProviderClasses exist and the versions it reports per pod.
//
// +kubebuilder:rbac:groups=secrets-store.csi.x-k8s.io,resources=secretproviderclasses;secretproviderclasspodstatuses,verbs=get;list;watch
