package inventory

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// A workload's history is what its own controller keeps of its earlier
// templates: the ReplicaSets of a Deployment (or of an Argo Rollout), the
// ControllerRevisions of a StatefulSet or DaemonSet. `kubectl rollout
// undo` copies one of them back; configward reads them to tell a rollback
// from any other write, and to know which config snapshots can still
// create pods.

// Revision is one template of a workload's history, as configward stamped it.
type Revision struct {
	Hash, Snapshots string
}

// TransformControllerRevision keeps of a ControllerRevision its metadata and,
// of the template it holds, only configward's two annotations: the whole
// template would double what the cache holds of every StatefulSet and
// DaemonSet for nothing configward reads.
func TransformControllerRevision(obj any) (any, error) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return obj, nil
	}
	annotations := RevisionAnnotations(cr) // a revision of another shape keeps nothing
	kept := map[string]string{}
	for _, k := range []string{v1alpha1.ConfigHashAnnotation, v1alpha1.ConfigSnapshotsAnnotation} {
		if v, ok := annotations[k]; ok {
			kept[k] = v
		}
	}
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": kept}}}})
	out := &appsv1.ControllerRevision{TypeMeta: cr.TypeMeta, ObjectMeta: slimMeta(cr.ObjectMeta), Revision: cr.Revision,
		Data: runtime.RawExtension{Raw: raw}}
	return out, nil
}

// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch

// WatchHistory registers the informer of ControllerRevisions (ReplicaSets
// are a workload kind, watched already), so History answers from memory.
func WatchHistory(ctx context.Context, c cache.Cache) error {
	if _, err := c.GetInformer(ctx, &appsv1.ControllerRevision{}); err != nil {
		return fmt.Errorf("starting informer for ControllerRevisions: %w", err)
	}
	return nil
}

// History lists the revisions the workload with uid keeps in namespace,
// from the cache: its ReplicaSets and ControllerRevisions.
func (inv *Inventory) History(ctx context.Context, namespace string, uid types.UID) ([]Revision, error) {
	var out []Revision
	var rss appsv1.ReplicaSetList
	if err := inv.reader.List(ctx, &rss, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range rss.Items {
		if ownedBy(rss.Items[i].OwnerReferences, uid) {
			a := rss.Items[i].Spec.Template.Annotations
			out = append(out, Revision{Hash: a[v1alpha1.ConfigHashAnnotation], Snapshots: a[v1alpha1.ConfigSnapshotsAnnotation]})
		}
	}
	var crs appsv1.ControllerRevisionList
	if err := inv.reader.List(ctx, &crs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range crs.Items {
		if ownedBy(crs.Items[i].OwnerReferences, uid) {
			a := RevisionAnnotations(&crs.Items[i])
			out = append(out, Revision{Hash: a[v1alpha1.ConfigHashAnnotation], Snapshots: a[v1alpha1.ConfigSnapshotsAnnotation]})
		}
	}
	return out, nil
}

// RevisionAnnotations reads configward's annotations of the template a
// ControllerRevision holds (as the cache keeps it, or as stored).
func RevisionAnnotations(cr *appsv1.ControllerRevision) map[string]string {
	var data struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(cr.Data.Raw, &data)
	return data.Spec.Template.Metadata.Annotations
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.UID == uid {
			return true
		}
	}
	return false
}
