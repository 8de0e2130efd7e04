package rollouts

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/csiversions"
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

// recordVersions writes a record that rolls nothing (a baseline, or the
// versions seen changing without a new one) on w's metadata, never its
// template, and leaves w as stored.
func (r *rollout) recordVersions(ctx context.Context, w workload.Object, look csiversions.Versions) error {
	before := w.Obj.DeepCopyObject().(client.Object)
	setVersions(w, look.Record)
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
	reg := r.inv.Registry()
	top := reg.TopOwnerOf(ctx, r.client, pod)
	if top == nil {
		return nil
	}
	if t, ok := reg.TypeOfOwner(top); !ok || t != r.typ {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: top.Name}}}
}

// Where the Secrets Store CSI driver is installed, the controller reads which
// SecretProviderClasses exist and the versions it reports per pod.
//
// +kubebuilder:rbac:groups=secrets-store.csi.x-k8s.io,resources=secretproviderclasses;secretproviderclasspodstatuses,verbs=get;list;watch
