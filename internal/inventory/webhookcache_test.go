package inventory

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/slimobject"
	"github.com/configward/configward/internal/workload"
)

// webhook is the webhook cache's transforms with the built-in kinds.
var webhook = WebhookTransforms{Registry: workload.Builtin()}

// The webhook's cache keeps of a workload what its readers read (the
// template's annotations and config references, owners, labels, the
// selector) and drops what only the controller reads (status, resources,
// probes).
func TestWebhookWorkloadKeepsWhatAdmissionReads(t *testing.T) {
	isController := true
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: "Thing", Name: "t", UID: "u", Controller: &isController}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{v1alpha1.ConfigHashAnnotation: "h"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "registry/app:1",
					EnvFrom:        []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}},
					Env:            []corev1.EnvVar{{Name: "PASSWORD", Value: "inline"}},
					VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
					Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 5}}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}}}},
			}}},
		Status: appsv1.DeploymentStatus{Replicas: 3, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}
	out, err := webhook.Workload(d.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.Deployment)
	if !reflect.DeepEqual(refs.FromPodSpec(&got.Spec.Template.Spec), refs.FromPodSpec(&d.Spec.Template.Spec)) ||
		!reflect.DeepEqual(got.Spec.Template.Annotations, d.Spec.Template.Annotations) || !reflect.DeepEqual(got.Labels, labels) ||
		!reflect.DeepEqual(got.Spec.Selector, d.Spec.Selector) || !reflect.DeepEqual(got.OwnerReferences, d.OwnerReferences) ||
		!reflect.DeepEqual(got.Spec.Template.Spec.Containers[0].VolumeMounts, d.Spec.Template.Spec.Containers[0].VolumeMounts) {
		t.Errorf("the webhook's cache lost what admission reads:\n%+v", got)
	}
	c := got.Spec.Template.Spec.Containers[0]
	if !reflect.DeepEqual(got.Status, appsv1.DeploymentStatus{}) || c.Resources.Requests != nil || c.ReadinessProbe != nil ||
		got.ManagedFields != nil || c.Env[0].Value != "" {
		t.Errorf("the webhook's cache kept what only the controller reads, or a value: %+v", got)
	}

	// A finished Job holds no config: its Complete condition stays.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "shop"},
		Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}, {Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Message: "m"}}}}
	out, err = webhook.Workload(job)
	if err != nil {
		t.Fatal(err)
	}
	if want := []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}; !reflect.DeepEqual(out.(*batchv1.Job).Status.Conditions, want) {
		t.Errorf("the Job's conditions: %+v, want %+v", out.(*batchv1.Job).Status.Conditions, want)
	}

	// Any other kind passes to TransformWorkload.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if out, err := webhook.Workload(ns); err != nil || out.(*corev1.Namespace).ManagedFields != nil {
		t.Errorf("a Namespace: %+v, %v", out, err)
	}
}

// The webhook's cache keeps of a Pod its phase and configward's reload
// conditions, which the reload agents' reports are compared with, and
// drops readiness and the containers' statuses, which only the controller
// reads.
func TestWebhookPodKeepsReloadConditions(t *testing.T) {
	reload := corev1.PodCondition{Type: v1alpha1.ReloadConditionType, Status: corev1.ConditionTrue, Reason: "Applied", Message: "m",
		LastTransitionTime: metav1.Now()}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, reload},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 2}}}}
	out, err := webhook.Pod(p)
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{reload}}
	if got := out.(*corev1.Pod).Status; !reflect.DeepEqual(got, want) {
		t.Errorf("the cached Pod's status: %+v, want %+v", got, want)
	}
}

// controlledBy is a controller owner reference to a workload of kind.
func controlledBy(apiVersion, kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: ptr.To(true)}}
}

// fullPod is a pod of a Deployment's ReplicaSet as the API server has it:
// config references, an unrelated env var and volume, resources.
func fullPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f-abcde", Namespace: "shop", UID: "p1", ResourceVersion: "10",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{v1alpha1.ConfigHashAnnotation: "h"},
			OwnerReferences: controlledBy("apps/v1", "ReplicaSet", "web-7d9f")},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry/app:1",
				EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}},
				Env:          []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "scratch", MountPath: "/tmp"}},
				Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// A pod a workload controls is cached by the webhook without its spec (the
// workload answers for it), with the spec's digest, its metadata and its
// phase; transformed again, it stays as it is.
func TestWebhookCacheDropsTheSpecOfAControlledPod(t *testing.T) {
	p := fullPod()
	out, err := webhook.Pod(p.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if !reflect.DeepEqual(got.Spec, corev1.PodSpec{}) || got.Annotations[cachedSpecKey] == "" {
		t.Fatalf("a controlled pod kept its spec, or no digest of it: %+v", got)
	}
	if got.Status.Phase != corev1.PodRunning || !reflect.DeepEqual(got.OwnerReferences, p.OwnerReferences) ||
		!reflect.DeepEqual(got.Labels, p.Labels) || got.Annotations[v1alpha1.ConfigHashAnnotation] != "h" || got.UID != p.UID {
		t.Errorf("a controlled pod lost its metadata or phase: %+v", got)
	}
	again, err := webhook.Pod(got)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("transformed again, the cached pod changed: %+v", again)
	}
	other := p.DeepCopy()
	other.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name = "other"
	if o, _ := webhook.Pod(other); o.(*corev1.Pod).Annotations[cachedSpecKey] == got.Annotations[cachedSpecKey] {
		t.Error("two pods that read other config have the same spec digest")
	}
	// A review's pod is decoded slim: its digest is the same.
	slim, err := slimobject.Project(p)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := webhook.Pod(slim); o.(*corev1.Pod).Annotations[cachedSpecKey] != got.Annotations[cachedSpecKey] {
		t.Error("the pod decoded slim has another spec digest than the pod whole")
	}
}

// A pod keeps its spec where a reader needs it: no workload controls it
// (config-in-use-delete counts it), or it carries the reload agent (its
// reports are checked against what it reads) or a volume with a token of
// the agent's audience (the agent-token check reads who mounts it).
func TestWebhookCacheKeepsTheSpecWhereAReaderNeedsIt(t *testing.T) {
	bare := fullPod()
	bare.OwnerReferences = nil
	foreign := fullPod()
	foreign.OwnerReferences = controlledBy("example.com/v1", "Thing", "t")
	agent := fullPod()
	agent.Spec.InitContainers = []corev1.Container{{Name: reload.AgentContainer, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	token := fullPod()
	token.Spec.Volumes = append(token.Spec.Volumes, corev1.Volume{Name: "stolen", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: reload.Audience, Path: "token"}}}}}})
	token.Spec.Containers[0].VolumeMounts = append(token.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "stolen", MountPath: "/t"})
	for name, p := range map[string]*corev1.Pod{"no owner": bare, "an owner of no workload kind": foreign, "the reload agent": agent, "the agent's token": token} {
		out, err := webhook.Pod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.Pod)
		want, _ := TransformPod(p.DeepCopy())
		if !reflect.DeepEqual(got.Spec, want.(*corev1.Pod).Spec) || hasKey(got.Annotations, cachedSpecKey) {
			t.Errorf("%s: the cached spec is %+v, want it kept", name, got.Spec)
		}
	}
	if c := reload.AgentTokenMountedElsewhere(&token.Spec); c != "app" {
		t.Fatalf("the agent-token check no longer names the container: %q", c)
	}
}

// controlledReplicaSet is a Deployment's ReplicaSet with a full template,
// and that template.
func controlledReplicaSet() (*appsv1.ReplicaSet, corev1.PodTemplateSpec) {
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{v1alpha1.ConfigHashAnnotation: "h", v1alpha1.ConfigSnapshotsAnnotation: "s"}},
		Spec: fullPod().Spec,
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f", Namespace: "shop", OwnerReferences: controlledBy("apps/v1", "Deployment", "web")},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2}}
	return rs, template
}

// checkOnlyControlledLoseTheSpec checks that transform, given again what
// it cached of rs (got), keeps it as it is, and that it keeps the spec of
// rs when no workload controls it.
func checkOnlyControlledLoseTheSpec(t *testing.T, transform func(any) (any, error), rs, got *appsv1.ReplicaSet) {
	t.Helper()
	if again, _ := transform(got.DeepCopy()); !reflect.DeepEqual(again, got) {
		t.Errorf("transformed again, the cached ReplicaSet changed: %+v", again)
	}
	bare := rs.DeepCopy()
	bare.OwnerReferences = nil
	if out, _ := transform(bare); out.(*appsv1.ReplicaSet).Spec.Template.Spec.Containers == nil {
		t.Error("a ReplicaSet no workload controls lost its spec: its own rollout controller reads it")
	}
}

// A ReplicaSet or Job a workload controls keeps its template's metadata
// (History reads its configward annotations) and loses its spec; one no
// workload controls keeps it.
func TestWebhookCacheDropsTheSpecOfAControlledReplicaSetOrJob(t *testing.T) {
	rs, template := controlledReplicaSet()
	out, err := webhook.Workload(rs.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.ReplicaSet)
	want := appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta}}
	if !reflect.DeepEqual(got.Spec, want) || got.Annotations[cachedSpecKey] == "" || !reflect.DeepEqual(got.OwnerReferences, rs.OwnerReferences) {
		t.Errorf("a controlled ReplicaSet is cached as %+v", got)
	}
	checkOnlyControlledLoseTheSpec(t, webhook.Workload, rs, got)

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "nightly-1", Namespace: "shop", OwnerReferences: controlledBy("batch/v1", "CronJob", "nightly")},
		Spec:   batchv1.JobSpec{Template: template},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	out, err = webhook.Workload(job)
	if err != nil {
		t.Fatal(err)
	}
	gotJob := out.(*batchv1.Job)
	if gotJob.Spec.Template.Spec.Containers != nil || gotJob.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation] != "h" ||
		len(gotJob.Status.Conditions) != 1 || gotJob.Annotations[cachedSpecKey] == "" {
		t.Errorf("a Job of a CronJob is cached as %+v", gotJob)
	}
}

// The webhook's Pod transform replaces CacheOptions' one instead of
// standing beside it: with two Pod entries the cache took whichever its
// map gave last, and half the webhook's starts kept every Pod's spec.
func TestWebhookCacheOptionsHaveOnePodTransform(t *testing.T) {
	opts := WebhookCacheOptions(workload.Builtin())
	var transforms []cache.ByObject
	for obj, settings := range opts.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			transforms = append(transforms, settings)
		}
	}
	if len(transforms) != 1 {
		t.Fatalf("the webhook's cache options have %d entries for Pods, want 1", len(transforms))
	}
	out, err := transforms[0].Transform(fullPod())
	if err != nil {
		t.Fatal(err)
	}
	if p := out.(*corev1.Pod); p.Spec.Containers != nil {
		t.Errorf("the webhook's cache keeps the spec of a Pod a ReplicaSet controls: %+v", p.Spec)
	}
}
