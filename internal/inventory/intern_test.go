package inventory

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/refs"
)

// Two pods of one ReplicaSet, decoded separately, share their strings once
// cached, and are equal to what they were.
func TestTransformsShareEqualStrings(t *testing.T) {
	pod := func(i int) *corev1.Pod {
		// Built from fresh strings, as decoding makes them.
		s := func(v string) string { return string([]byte(v)) }
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: s("shop"),
				Labels:          map[string]string{s("app"): s("web"), s("pod-template-hash"): s("7d9f")},
				Annotations:     map[string]string{s("configward.dev/config-hash"): s("hmac-sha256:abc")},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: s("apps/v1"), Kind: s("ReplicaSet"), Name: s("web-7d9f"), UID: "u"}}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: s("app"), EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: s("web-env")}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: s("config"), MountPath: s("/etc/web")}}}},
				Volumes: []corev1.Volume{{Name: s("config"), VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: s("web-config")}}}}},
			},
		}
	}
	var slim []*corev1.Pod
	for i := range 2 {
		out, err := TransformPod(pod(i))
		if err != nil {
			t.Fatal(err)
		}
		p, orig := out.(*corev1.Pod), pod(i)
		slim = append(slim, p)
		if !reflect.DeepEqual(p.ObjectMeta, orig.ObjectMeta) || !reflect.DeepEqual(refs.FromPodSpec(&p.Spec), refs.FromPodSpec(&orig.Spec)) ||
			!reflect.DeepEqual(p.Spec.Containers[0].VolumeMounts, orig.Spec.Containers[0].VolumeMounts) {
			t.Fatalf("the cached pod differs from the pod:\n%+v\n%+v", p, orig)
		}
	}
	a, b := slim[0], slim[1]
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are not one string", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("owner", a.OwnerReferences[0].Name, b.OwnerReferences[0].Name)
	same("container", a.Spec.Containers[0].Name, b.Spec.Containers[0].Name)
	same("mount path", a.Spec.Containers[0].VolumeMounts[0].MountPath, b.Spec.Containers[0].VolumeMounts[0].MountPath)
	same("envFrom", a.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name, b.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name)
	same("volume source", a.Spec.Volumes[0].ConfigMap.Name, b.Spec.Volumes[0].ConfigMap.Name)
	for k, v := range a.Labels {
		same("label "+k, v, b.Labels[k])
	}
	same("annotation", a.Annotations["configward.dev/config-hash"], b.Annotations["configward.dev/config-hash"])
}

// Interning a workload's template keeps every value, quantities and all.
func TestInternAllKeepsValues(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry/app:1", Args: []string{"--x"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		NodeSelector: map[string]string{"zone": "a"},
	}}}}
	want := d.DeepCopy()
	internAll(&d.Spec.Template.Spec)
	if !reflect.DeepEqual(d, want) {
		t.Errorf("interning changed the template:\n%+v\nwant\n%+v", d.Spec.Template.Spec, want.Spec.Template.Spec)
	}
}
