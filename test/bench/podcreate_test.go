package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/test/framework"
)

// BenchmarkPodCreation measures what the Pod path of config revisions adds
// to creating a pod, end to end through a real API server with configward's
// webhook configurations installed: server-side dry-run creates of a pod as
// a ReplicaSet makes it (controlled, so only the Pod path judges it), once
// naming a written snapshot (the Pod path pins it) and once without the
// annotation (its matchCondition keeps the Pod path out), by 1 and by 10
// clients. It reports p50 and p99 latency of each. A load run: use
// -benchtime=1x (make bench does).
func BenchmarkPodCreation(b *testing.B) {
	env, err := framework.Start(framework.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	}()
	ctx := context.Background()
	c := env.Client
	const ns = "podcreate"
	createNamespace(b, c, ns)
	// The snapshot is written before the webhooks are installed: once they
	// are, change control lets only configward's controller write one.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"level": "info"}}
	snap := revision.ConfigMapSnapshot(cm, "cfg-0123456789")
	for _, o := range []client.Object{cm, snap} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := env.InstallWebhookConfigurations(ctx); err != nil {
		b.Fatal(err)
	}
	pod := func(pinned bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "web-", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "6b8c2c1e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "app:1", VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}},
			}}
		if pinned {
			p.Annotations = map[string]string{v1alpha1.ConfigSnapshotsAnnotation: "ConfigMap/cfg=" + snap.Name}
		}
		return p
	}
	// Pods are created as a ReplicaSet's are: by its controller, whose
	// pods the workload webhooks leave to their owner.
	rsCfg, err := env.ControllerConfig(ctx, "replicaset-controller")
	if err != nil {
		b.Fatal(err)
	}
	if c, err = client.New(rsCfg, client.Options{Scheme: c.Scheme()}); err != nil {
		b.Fatal(err)
	}
	// The webhook's cache has the snapshot once a pinned pod is pinned.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := pod(true)
		err := c.Create(ctx, p, client.DryRunAll)
		if err == nil && p.Spec.Volumes[0].ConfigMap.Name == snap.Name {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the Pod path never pinned the pod: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	const perClient = 300
	for _, clients := range []int{1, 10} {
		for _, pinned := range []bool{false, true} {
			var mu sync.Mutex
			var took []time.Duration
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for range perClient {
						start := time.Now()
						if err := c.Create(ctx, pod(pinned), client.DryRunAll); err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						took = append(took, time.Since(start))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			slices.Sort(took)
			name := fmt.Sprintf("clients=%d,pinned=%v", clients, pinned)
			p50, p99 := took[len(took)/2], took[len(took)*99/100]
			b.ReportMetric(float64(p50.Microseconds())/1000, name+",p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, name+",p99-ms")
			b.Logf("%s: p50 %v, p99 %v over %d creates", name, p50, p99, len(took))
		}
	}
}
