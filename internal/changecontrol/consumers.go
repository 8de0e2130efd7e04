package changecontrol

import (
	"slices"

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
// reg says which kinds are workloads; with an Argo Rollout declared, a
// Rollout's ReplicaSets stand for nothing on their own.
func Live(reg *workload.Registry, objs []client.Object) []client.Object {
	var out []client.Object
	for _, o := range objs {
		w, _ := reg.For(o)
		if o.GetDeletionTimestamp() == nil && !reg.ControlledByWorkload(o) && !(w.Type != nil && w.Finished()) {
			out = append(out, o)
		}
	}
	return out
}

// Names names workloads as "Kind name", sorted, for messages.
func Names(reg *workload.Registry, objs []client.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if t, ok := reg.TypeOf(o); ok {
			kind = t.Kind.Kind
		}
		out = append(out, kind+" "+o.GetName())
	}
	slices.Sort(out)
	return out
}
