package changecontrol

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/workload"
)

// Live keeps the consumers that still need the object. A consumer does not count when:
//   - it is being deleted;
//   - a workload controller owns it (a Deployment's ReplicaSets and Pods, a
//     CronJob's Jobs): its owner stands for it, and when the owner is
//     deleted the garbage collector removes it, so a teardown that deletes
//     the Deployment and then its ConfigMap is not held up by pods that are
//     already going;
//   - it is a Pod that has finished, or a Job that has.
//
// reg says which kinds are workloads (nil: the built-in ones); with an Argo
// Rollout declared, a Rollout's ReplicaSets stand for nothing on their own.
func Live(reg *workload.Registry, objs []client.Object) []client.Object {
	var out []client.Object
	for _, o := range objs {
		if o.GetDeletionTimestamp() == nil && !reg.ControlledByWorkload(o) && !finished(o) {
			out = append(out, o)
		}
	}
	return out
}

// Names names workloads as "Kind name", sorted, for messages.
func Names(reg *workload.Registry, objs []client.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		k, _ := reg.KindOf(o)
		out = append(out, k.Kind+" "+o.GetName())
	}
	slices.Sort(out)
	return out
}

func finished(o client.Object) bool {
	switch t := o.(type) {
	case *corev1.Pod:
		return t.Status.Phase == corev1.PodSucceeded || t.Status.Phase == corev1.PodFailed
	case *batchv1.Job:
		for _, c := range t.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}
