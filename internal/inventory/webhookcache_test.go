package inventory

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
)

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
	out, err := TransformWebhookWorkload(d.DeepCopy())
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
	out, err = TransformWebhookWorkload(job)
	if err != nil {
		t.Fatal(err)
	}
	if want := []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}; !reflect.DeepEqual(out.(*batchv1.Job).Status.Conditions, want) {
		t.Errorf("the Job's conditions: %+v, want %+v", out.(*batchv1.Job).Status.Conditions, want)
	}

	// Any other kind passes to TransformWorkload.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if out, err := TransformWebhookWorkload(ns); err != nil || out.(*corev1.Namespace).ManagedFields != nil {
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
	out, err := TransformWebhookPod(p)
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{reload}}
	if got := out.(*corev1.Pod).Status; !reflect.DeepEqual(got, want) {
		t.Errorf("the cached Pod's status: %+v, want %+v", got, want)
	}
}
