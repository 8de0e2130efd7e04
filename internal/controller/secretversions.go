package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/workload"
)

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

// secretVersions looks at the versions the pods of w report for the
// rollout-mode SecretProviderClasses its spec mounts (see
// internal/secretversions for the decision). Without the driver's kinds,
// or where Secrets take no part in rollouts, it finds nothing to record.
func (r *rollout) secretVersions(ctx context.Context, w workload.Object, spec *corev1.PodSpec, secrets bool) (versionsLook, error) {
	stored := w.Obj.GetAnnotations()[v1alpha1.SecretVersionsAnnotation]
	rec, err := secretversions.Decode(stored)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("unreadable record of secret versions; starting a new baseline", "error", err.Error())
	}
	var classes []string
	if r.inv.CSIClasses() && secrets {
		for _, name := range refs.CSIClasses(spec) {
			o, err := r.inv.Get(ctx, refs.SecretProviderClass, w.Obj.GetNamespace(), name)
			if err != nil {
				return versionsLook{}, err
			}
			if !o.Exists || o.Mode == inventory.Rollout {
				classes = append(classes, name)
			}
		}
	}
	var observed secretversions.Observed
	key := r.keys.Current()
	if len(classes) > 0 {
		pods, err := r.podsOf(ctx, w.Obj)
		if err != nil {
			return versionsLook{}, err
		}
		list := podStatuses()
		if err := r.client.List(ctx, list, client.InNamespace(w.Obj.GetNamespace())); err != nil {
			return versionsLook{}, fmt.Errorf("listing SecretProviderClassPodStatuses: %w", err)
		}
		statuses := make([]secretversions.PodStatus, 0, len(list.Items))
		for _, u := range list.Items {
			statuses = append(statuses, secretversions.PodStatusOf(u.Object))
		}
		observed = secretversions.Observe(key.Bytes(), w.Obj.GetNamespace(), classes, pods, statuses)
	}
	next, rotated := secretversions.Next(rec, key.ID, classes, observed)
	enc := next.Encode()
	return versionsLook{record: enc, write: enc != stored, rotated: rotated, rolled: next.Rolled()}, nil
}

// podsOf names the pods w runs now: those it controls, or those a
// ReplicaSet or Job it controls does. Finished pods mount nothing.
func (r *rollout) podsOf(ctx context.Context, w client.Object) (map[string]bool, error) {
	ns := client.InNamespace(w.GetNamespace())
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, ns, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	mine := map[types.UID]bool{w.GetUID(): true}
	// Pods of a ReplicaSet (a Deployment's, an Argo Rollout's) or of a Job
	// (a CronJob's) are the workload's through it.
	var rss appsv1.ReplicaSetList
	if err := r.client.List(ctx, &rss, ns, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing replicasets: %w", err)
	}
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, ns, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	var between []metav1.Object
	for i := range rss.Items {
		between = append(between, &rss.Items[i])
	}
	for i := range jobs.Items {
		between = append(between, &jobs.Items[i])
	}
	for _, o := range between {
		if c := metav1.GetControllerOf(o); c != nil && c.UID == w.GetUID() {
			mine[o.GetUID()] = true
		}
	}
	out := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if c := metav1.GetControllerOf(p); c != nil && mine[c.UID] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[p.Name] = true
		}
	}
	return out, nil
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
// the controller's kind whose pod it describes: the pod's controller, or
// its controller's (a Deployment's ReplicaSet, a CronJob's Job).
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
		return nil // gone: its status goes with it
	}
	owner := metav1.GetControllerOf(&pod)
	for hop := 0; owner != nil && hop < 2; hop++ {
		if owner.Kind == r.typ.Kind.Kind && ownerGroup(owner) == r.typ.Group {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: owner.Name}}}
		}
		var next client.Object
		switch owner.Kind {
		case "ReplicaSet":
			next = &appsv1.ReplicaSet{}
		case "Job":
			next = &batchv1.Job{}
		default:
			return nil
		}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: owner.Name}, next); err != nil {
			return nil
		}
		owner = metav1.GetControllerOf(next)
	}
	return nil
}

func ownerGroup(ref *metav1.OwnerReference) string {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return gv.Group
}

// Where the Secrets Store CSI driver is installed, the controller reads which
// SecretProviderClasses exist and the versions it reports per pod.
//
// +kubebuilder:rbac:groups=secrets-store.csi.x-k8s.io,resources=secretproviderclasses;secretproviderclasspodstatuses,verbs=get;list;watch
