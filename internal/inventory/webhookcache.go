package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/slimobject"
	"github.com/configward/configward/internal/workload"
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
//
// Of a Pod, ReplicaSet or Job that a workload of reg controls, most of a
// cluster's objects, it reads less still (see WebhookTransforms): the
// webhook answers for the workload that controls it, never for it.
func WebhookCacheOptions(reg *workload.Registry) cache.Options {
	t := WebhookTransforms{Registry: reg}
	opts := CacheOptions()
	SetByObject(&opts, &corev1.Pod{}, cache.ByObject{Transform: t.Pod})
	opts.DefaultTransform = t.Workload
	return opts
}

// WebhookTransforms are the webhook cache's transforms of Pods and of
// workloads. They know the workload kinds (Registry) because what a
// workload controls is cached as little as its readers need:
//
//   - config-in-use-delete counts only objects no workload controls
//     (changecontrol.Live): the controlling workload stands for them;
//   - History reads a ReplicaSet's owners and its template's annotations,
//     the owner walk (TopOwnerOf) its owners;
//   - the reload agents' reports and the agent-token check read the spec of
//     a pod that carries the agent (reload.CarriesAgent), so such a pod
//     keeps it;
//   - the effects ledger compares what the cache holds with what a review
//     describes (effects.contentOf runs these same transforms on both):
//     the spec it drops is kept as its digest (cachedSpecKey), so that a
//     write of another spec still tells.
//
// So such an object keeps its metadata (a ReplicaSet's or Job's template
// its metadata too), a Pod its phase and a Job its Complete and Failed
// conditions, and loses its spec: a few hundred bytes instead of several
// kilobytes, for every pod of every Deployment.
type WebhookTransforms struct{ Registry *workload.Registry }

// cachedSpecKey is the annotation under which the webhook's cache keeps
// the digest of the spec it dropped. The API server refuses the key (a
// space is no annotation name), so an object straight from it never
// carries one, and an object that carries it is one the cache transformed
// already: the informer may hand it to the transform again.
const cachedSpecKey = "configward.dev/spec digest (webhook cache)"

// Workload keeps of a built-in workload what admission's slim decoding
// keeps of one in a review (slimobject), then transforms it as
// TransformWorkload does. A Job keeps its Complete and Failed conditions:
// a finished Job no longer holds its config in use. A ReplicaSet or Job a
// workload controls then loses its spec but its template's metadata. Other
// kinds, declared ones included, go to TransformWorkload as they are.
func (t WebhookTransforms) Workload(obj any) (any, error) {
	if o, ok := obj.(client.Object); ok && hasKey(o.GetAnnotations(), cachedSpecKey) {
		return obj, nil
	}
	switch o := obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.DaemonSet, *batchv1.CronJob:
		return projected(o.(runtime.Object))
	case *appsv1.ReplicaSet:
		out, err := projected(o)
		if rs, ok := out.(*appsv1.ReplicaSet); ok && err == nil && t.controlled(rs) {
			dropWithDigest(rs, &rs.ObjectMeta)
		}
		return out, err
	case *batchv1.Job:
		out, err := projected(o)
		job, ok := out.(*batchv1.Job)
		if !ok || err != nil {
			return out, err
		}
		for _, c := range o.Status.Conditions {
			if c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed {
				job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: c.Type, Status: c.Status})
			}
		}
		if t.controlled(job) {
			dropWithDigest(job, &job.ObjectMeta)
		}
		return job, nil
	}
	return TransformWorkload(obj)
}

// projected is obj as admission's slim decoding gives it, transformed as
// TransformWorkload does. The projection decodes afresh, so it comes
// before the transform, which interns the strings.
func projected(obj runtime.Object) (any, error) {
	p, err := slimobject.Project(obj)
	if err != nil {
		return TransformWorkload(obj)
	}
	return TransformWorkload(p)
}

// Pod is TransformPod less what only the controller's health gates read:
// the Ready condition and the containers' statuses. The phase stays (an
// ended pod holds no config), and so do configward's reload conditions,
// which the reload agents' reports are compared with. A pod a workload
// controls loses its spec too, unless it carries the reload agent.
func (t WebhookTransforms) Pod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok && hasKey(p.Annotations, cachedSpecKey) {
		return obj, nil
	}
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
	if t.controlled(p) && !reload.CarriesAgent(p) {
		// The digest is of the spec as TransformPod keeps it: what the
		// effects ledger compared before the spec was dropped.
		setCachedSpec(&p.ObjectMeta, p.Spec)
		p.Spec = corev1.PodSpec{}
	}
	return p, nil
}

// dropWithDigest drops the spec of obj, a ReplicaSet or Job, as the
// controller's cache does (dropControlledSpec), and keeps its digest on m,
// obj's metadata, for the effects ledger.
func dropWithDigest(obj any, m *metav1.ObjectMeta) {
	if spec, ok := dropControlledSpec(obj); ok {
		setCachedSpec(m, spec)
	}
}

func (t WebhookTransforms) controlled(obj metav1.Object) bool {
	return t.Registry != nil && t.Registry.ControlledByWorkload(obj)
}

// setCachedSpec records in m the digest of the spec the cache drops, as
// the transform has it so far: a review's object, decoded slim, gives the
// same.
func setCachedSpec(m *metav1.ObjectMeta, spec any) {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	annotations := make(map[string]string, len(m.Annotations)+1)
	maps.Copy(annotations, m.Annotations)
	annotations[cachedSpecKey] = hex.EncodeToString(sum[:])
	m.Annotations = annotations
}
