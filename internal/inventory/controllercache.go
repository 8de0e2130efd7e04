package inventory

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/configward/configward/internal/workload"
)

// ControllerCacheOptions is CacheOptions for `configward controller`: a
// ReplicaSet that a workload of reg controls (every ReplicaSet of a
// Deployment, and there are several per Deployment) keeps its metadata,
// its status and its template's metadata, and loses its spec. What the
// controller reads of such a ReplicaSet (audited against every reader it
// runs):
//
//   - the owner walk from a pod to its top-level workload (drift.OwnersOf,
//     Registry.TopOwnerOf) reads its owners;
//   - a workload's history (History) and the snapshots that may still
//     create pods (the revisions controller) read its template's
//     annotations;
//   - the rollout, delivery and report controllers, the consumers of a
//     config (rolledConsumers, consumersOf) and a delivery's waves act on
//     top-level workloads only; the ReplicaSets' own rollout controller
//     decides for a controlled one before it reads any fact (stamp.Early:
//     the Controlled hold).
//
// What its pods read, the controller reads from the pods. A Job a CronJob
// controls keeps its spec here (the webhook drops it): the Jobs' rollout
// controller looks at a new Job's config to say, in an Event, that its
// template cannot take a newer one (the JobImmutable hold is decided on
// the facts, not early).
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
// of a ReplicaSet a workload controls (dropControlledSpec).
func (t ControllerTransforms) Workload(obj any) (any, error) {
	out, err := TransformWorkload(obj)
	if rs, ok := out.(*appsv1.ReplicaSet); ok && err == nil && t.Registry != nil && t.Registry.ControlledByWorkload(rs) {
		dropControlledSpec(rs)
	}
	return out, err
}

// dropControlledSpec empties the spec of a ReplicaSet or Job but for its
// template's metadata, and returns the spec it dropped; other kinds it
// leaves as they are (nil, false). Both processes cache what a workload
// controls this way where their readers allow: the owner answers for the
// rest. It may be given an object it emptied before (a transform may run
// twice on one object), and empties it again to the same.
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
