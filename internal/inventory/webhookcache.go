package inventory

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/slimobject"
)

// WebhookCacheOptions is CacheOptions for `configward webhook`, which every
// replica runs and which reads less of workloads and Pods than the
// controller does. What it reads of them (audited against every reader it
// runs): of a workload, its identity, owners, labels and selector, and of
// its pod template the annotations and what the consumer index reads; of a
// Pod, its spec's config references and agent volumes, its phase, and
// configward's two reload conditions. A workload's status (but a Job's
// conditions), its containers' resources, probes and lifecycle, its
// affinity and the rest of what admission never reads are most of it, and
// only the controller's health gates and progress read them.
func WebhookCacheOptions() cache.Options {
	opts := CacheOptions()
	opts.ByObject[&corev1.Pod{}] = cache.ByObject{Transform: TransformWebhookPod}
	opts.DefaultTransform = TransformWebhookWorkload
	return opts
}

// TransformWebhookWorkload keeps of a built-in workload what admission's
// slim decoding keeps of one in a review (slimobject), then transforms it as
// TransformWorkload does. A Job keeps its Complete and Failed conditions: a
// finished Job no longer holds its config in use. Other kinds, declared
// ones included, go to TransformWorkload as they are.
func TransformWebhookWorkload(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.DaemonSet, *appsv1.ReplicaSet, *batchv1.CronJob:
		// The projection decodes afresh, so it comes before the
		// transform, which interns the strings.
		projected, err := slimobject.Project(o.(runtime.Object))
		if err != nil {
			return TransformWorkload(obj)
		}
		return TransformWorkload(projected)
	case *batchv1.Job:
		projected, err := slimobject.Project(o)
		if err != nil {
			return TransformWorkload(obj)
		}
		job := projected.(*batchv1.Job)
		for _, c := range o.Status.Conditions {
			if c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed {
				job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: c.Type, Status: c.Status})
			}
		}
		return TransformWorkload(job)
	}
	return TransformWorkload(obj)
}

// TransformWebhookPod is TransformPod less what only the controller's health
// gates read: the Ready condition and the containers' statuses. The phase
// stays (an ended pod holds no config), and so do configward's reload
// conditions, which the reload agents' reports are compared with.
func TransformWebhookPod(obj any) (any, error) {
	out, err := TransformPod(obj)
	p, ok := out.(*corev1.Pod)
	if err != nil || !ok {
		return out, err
	}
	var kept []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ReloadConditionType || c.Type == v1alpha1.ServingCertConditionType {
			kept = append(kept, c)
		}
	}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, Conditions: kept}
	return p, nil
}
