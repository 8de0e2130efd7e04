package inventory

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/configward/configward/internal/workload"
)

// ControllerCacheOptions is CacheOptions for `configward controller`: a
// ReplicaSet or Job that a workload of reg controls (every ReplicaSet of a
// Deployment, every Job of a CronJob) keeps its metadata, its status and
// its template's metadata, and loses its spec. What the controller reads
// of such an object (audited against every reader it runs):
//
//   - the owner walk from a pod to its top-level workload (drift.OwnersOf,
//     Registry.TopOwnerOf) reads its owners;
//   - a workload's history (History) and the snapshots that may still
//     create pods (the revisions controller) read its template's
//     annotations;
//   - a Job's Complete and Failed conditions say it ended (status);
//   - the rollout, delivery and report controllers, the consumers of a
//     config (rolledConsumers, consumersOf) and a delivery's waves act on
//     top-level workloads only: a controlled object's owner rolls it, and
//     the stamp decides nothing for one (stamp.Early).
//
// Its template's spec is the same as its owner's was when it was made,
// and what its pods read the controller reads from the pods. The spec is
// most of a ReplicaSet, and a Deployment keeps several.
func ControllerCacheOptions(reg *workload.Registry) cache.Options {
	t := ControllerTransforms{Registry: reg}
	opts := CacheOptions()
	opts.DefaultTransform = t.Workload
	return opts
}

// ControllerTransforms is the controller cache's transform of workloads;
// it knows the workload kinds (Registry) to tell what one controls.
type ControllerTransforms struct{ Registry *workload.Registry }

// Workload transforms obj as TransformWorkload does, then drops the spec
// of a ReplicaSet or Job a workload controls (dropControlledSpec).
func (t ControllerTransforms) Workload(obj any) (any, error) {
	out, err := TransformWorkload(obj)
	if o, ok := out.(metav1.Object); ok && err == nil && t.Registry != nil && t.Registry.ControlledByWorkload(o) {
		dropControlledSpec(out)
	}
	return out, err
}

// dropControlledSpec empties the spec of a ReplicaSet or Job but for its
// template's metadata, and returns the spec it dropped; other kinds it
// leaves as they are (nil, false). Both processes cache what a workload
// controls this way: the owner answers for the rest. It may be given an
// object it emptied before (a transform may run twice on one object), and
// empties it again to the same.
func dropControlledSpec(obj any) (dropped any, ok bool) {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		spec := o.Spec
		o.Spec = appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: spec.Template.ObjectMeta}}
		return spec, true
	case *batchv1.Job:
		spec := o.Spec
		o.Spec = batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: spec.Template.ObjectMeta}}
		return spec, true
	}
	return nil, false
}
