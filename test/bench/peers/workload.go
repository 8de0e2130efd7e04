package peers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// The benchmark's requests: server-side dry-run creates of a Deployment with
// Containers containers and 20 config references, half of them clean and half
// with findings. Every referenced ConfigMap and Secret exists, so
// missing-config-ref looks each one up and finds it.
const (
	Containers = 10
	// HotConfigMap is marked configward.dev/reload=hot; the findings
	// Deployment mounts it with subPath, which every engine denies.
	HotConfigMap = "hot-flags"
)

// ConfigMapName and SecretName are the objects container i reads.
func ConfigMapName(i int) string { return fmt.Sprintf("app-config-%d", i) }
func SecretName(i int) string    { return fmt.Sprintf("app-secret-%d", i) }

// Fixtures are the ConfigMaps and Secrets the Deployments reference.
func Fixtures(namespace string) []any {
	var objs []any
	for i := 0; i < Containers; i++ {
		objs = append(objs,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(i), Namespace: namespace},
				Data: map[string]string{"value": fmt.Sprintf("setting-%d", i)}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(i), Namespace: namespace},
				Data: map[string][]byte{"token": []byte(fmt.Sprintf("not-a-real-token-%d", i))}})
	}
	objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: HotConfigMap, Namespace: namespace,
		Annotations: map[string]string{"configward.dev/reload": "hot"}}, Data: map[string]string{"flags.yaml": "beta: false\n"}})
	// The snapshots a revision of the benchmark's pods reads (RevisionPod).
	for i := 0; i < Containers; i++ {
		cm := objs[2*i].(*corev1.ConfigMap)
		objs = append(objs, revision.ConfigMapSnapshot(cm, snapshotName(i)))
	}
	return objs
}

func snapshotName(i int) string { return ConfigMapName(i) + "-0123456789" }

// RevisionPod is a pod as the ReplicaSet of a Deployment with config
// revisions creates it: controlled, its containers reading the ConfigMaps
// as the clean Deployment's do, its annotation naming the snapshots its
// revision reads, which configward's Pod path points it at.
func RevisionPod(namespace, name string) *corev1.Pod {
	d := Deployment(namespace, name, Clean, 0)
	snaps := revision.Snapshots{}
	for i := 0; i < Containers; i++ {
		snaps[revision.Source{Kind: refs.ConfigMap, Name: ConfigMapName(i)}] = snapshotName(i)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{v1alpha1.ConfigSnapshotsAnnotation: snaps.Encode()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-rs",
				UID: "6b8c2c1e-0000-4000-8000-000000000001", Controller: ptrTo(true)}}},
		Spec: d.Spec.Template.Spec,
	}
}

// Pinned says whether configward's Pod path pointed the pod at its
// revision's snapshots.
func Pinned(p *corev1.Pod) bool {
	return p.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Name == snapshotName(0)
}

// Variant says which of the benchmark's Deployments to build.
type Variant int

const (
	// Clean: container i reads key "value" of ConfigMap i through env and
	// mounts Secret i as a directory, readable by its owner only (so that
	// configward's secret-file-mode rule, which the peers do not have,
	// finds nothing either). Every engine allows it silently.
	Clean Variant = iota
	// Warned: container i reads ConfigMap i and Secret i through env: ten
	// secret-in-env warnings, allowed.
	Warned
	// Denied: Warned plus container 0 mounting the hot ConfigMap with
	// subPath: denied by subpath-config.
	Denied
)

// Deployment builds the Deployment name in namespace; forbidden > 0 adds an
// env var FORBIDDEN_<forbidden> to the first container, which extra rule
// number forbidden denies.
func Deployment(namespace, name string, v Variant, forbidden int) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{}
	for i := 0; i < Containers; i++ {
		c := corev1.Container{
			Name:  fmt.Sprintf("c%d", i),
			Image: "registry.example/app:1.0",
			Env: []corev1.EnvVar{{Name: "SETTING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(i)}, Key: "value"}}}},
		}
		if v == Clean {
			vol := fmt.Sprintf("secret-%d", i)
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SecretName(i), DefaultMode: ptrTo[int32](0o400)}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: "/etc/secret"})
		} else {
			c.Env = append(c.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(i)}, Key: "token"}}})
		}
		spec.Containers = append(spec.Containers, c)
	}
	if v == Denied {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: HotConfigMap}}}})
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "flags", MountPath: "/etc/app/flags.yaml", SubPath: "flags.yaml"})
	}
	if forbidden > 0 {
		spec.Containers[0].Env = append(spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("FORBIDDEN_%d", forbidden), Value: "x"})
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}
