package drift

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodsAndOwners lists the pods in (a namespace, or all) with the
// ReplicaSets and Jobs that lead from them to their top-level workloads:
// what PodsOfCluster and OwnersOf count. The drift controller and the CSI
// look read them from the cache without copying (copying every pod and
// workload of a namespace on each judgement was most of its cost): the
// objects are the cache's own, never to be changed. configward status
// reads them with the user's credentials.
func PodsAndOwners(ctx context.Context, c client.Reader, in ...client.ListOption) ([]corev1.Pod, []appsv1.ReplicaSet, []batchv1.Job, error) {
	var pods corev1.PodList
	var rss appsv1.ReplicaSetList
	var jobs batchv1.JobList
	for _, l := range []struct {
		resource string
		list     client.ObjectList
	}{{"pods", &pods}, {"replicasets", &rss}, {"jobs", &jobs}} {
		if err := c.List(ctx, l.list, append(in, client.UnsafeDisableDeepCopy)...); err != nil {
			return nil, nil, nil, fmt.Errorf("listing %s: %w", l.resource, err)
		}
	}
	return pods.Items, rss.Items, jobs.Items, nil
}
