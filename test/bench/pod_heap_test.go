package bench

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/workload"
)

const (
	podHeapNamespace = "bench-pods"
	podHeapObjects   = 5_000
)

var (
	podSeedOnce sync.Once
	podSeedErr  error
)

// BenchmarkWebhookPodCache measures what the webhook's Pod informer costs
// (change control caches every Pod to know who still uses a ConfigMap):
// 5,000 Pods of a typical shape — two containers with env, envFrom and
// volume mounts, a ReplicaSet owner, the usual labels and a status — with
// the cache transform (managed fields and last-applied dropped) and the
// consumer index, as `configward webhook` runs it. Run with -benchtime=1x.
func BenchmarkWebhookPodCache(b *testing.B) {
	cfg := controlPlane(b)
	podSeedOnce.Do(func() { podSeedErr = seedPods(b, cfg) })
	if podSeedErr != nil {
		b.Fatal(podSeedErr)
	}
	var total uint64
	n := 0
	for b.Loop() {
		total += kindHeap(b, inventory.WebhookCacheOptions(workload.Builtin()), &corev1.Pod{}, &corev1.PodList{}, podHeapNamespace, podHeapObjects)
		n++
	}
	mean := float64(total) / float64(n)
	b.ReportMetric(mean/(1<<20), "MiB/5k-pods")
	b.ReportMetric(mean/podHeapObjects, "B/pod")
}

func seedPods(b *testing.B, cfg *rest.Config) error {
	return seedObjects(b, cfg, podHeapNamespace, podHeapObjects, func(i int) client.Object { return benchPod(i) })
}

// benchPod is a Pod as a Deployment's ReplicaSet would create it.
func benchPod(i int) *corev1.Pod {
	isController := true
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name:  name,
			Image: "registry.example/team/" + name + ":1.42.0",
			Args:  []string{"--config=/etc/app/app.yaml", "--log-level=info"},
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
				{Name: "REGION", Value: "eu-west-1"},
			},
			EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-env"}}}},
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "tls", MountPath: "/etc/tls", ReadOnly: true}},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("checkout-7d9f8b6c5-%05d", i),
			Namespace: podHeapNamespace,
			Labels:    map[string]string{"app.kubernetes.io/name": "checkout", "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d9f8b6c5"},
			Annotations: map[string]string{
				"configward.dev/config-hash": "hmac-sha256:4f1d2c8e0b7a6f5e4d3c2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a1908f7e6d",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-7d9f8b6c5", UID: "0c9a1f5e-2b7d-4c3e-9f8a-1b2c3d4e5f60", Controller: &isController}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("api"), container("sidecar")},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-tls"}}},
			},
		},
	}
}
