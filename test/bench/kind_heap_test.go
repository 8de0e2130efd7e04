package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/workload"
)

// kindHeapObjects of each kind are cached to measure what one costs.
const kindHeapObjects = 5_000

var (
	kindSeedOnce sync.Map // namespace → *sync.Once
	kindSeedErrs sync.Map // namespace → error
)

// BenchmarkCacheHeapByKind measures the heap configward's cache holds per
// object of each kind, as the controller caches it and as the webhook does:
// ConfigMaps of BenchmarkInventoryHeap's shape (10 keys of 1 KiB), Secrets
// (two keys), Pods of BenchmarkWebhookPodCache's shape, Deployments and
// ReplicaSets (its pod template), each with the transforms and, for
// workloads and Pods, the consumer index both processes run. Run with
// -benchtime=1x; run each kind in a process of its own (-bench
// 'BenchmarkCacheHeapByKind/Pod/') for figures that owe nothing to the ones
// measured before it.
func BenchmarkCacheHeapByKind(b *testing.B) {
	cfg := controlPlane(b)
	for _, k := range []struct {
		name string
		obj  client.Object
		list client.ObjectList
		new  func(ns string, i int) client.Object
	}{
		{"ConfigMap", &corev1.ConfigMap{}, &corev1.ConfigMapList{}, func(ns string, i int) client.Object {
			cm := heapConfigMap(i)
			cm.Namespace = ns
			return cm
		}},
		{"Secret", &corev1.Secret{}, &corev1.SecretList{}, heapSecret},
		{"Pod", &corev1.Pod{}, &corev1.PodList{}, func(ns string, i int) client.Object {
			p := benchPod(i)
			p.Namespace = ns
			return p
		}},
		{"Deployment", &appsv1.Deployment{}, &appsv1.DeploymentList{}, heapDeployment},
		{"ReplicaSet", &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}, heapReplicaSet},
	} {
		b.Run(k.name, func(b *testing.B) {
			ns := "bench-heap-" + strings.ToLower(k.name) + "s"
			once, _ := kindSeedOnce.LoadOrStore(ns, &sync.Once{})
			once.(*sync.Once).Do(func() {
				if err := seedObjects(b, cfg, ns, kindHeapObjects, func(i int) client.Object { return k.new(ns, i) }); err != nil {
					kindSeedErrs.Store(ns, err)
				}
			})
			if err, ok := kindSeedErrs.Load(ns); ok {
				b.Fatal(err)
			}
			for _, process := range []struct {
				name string
				opts func() cache.Options
			}{
				{"controller", func() cache.Options { return inventory.ControllerCacheOptions(workload.Builtin()) }},
				{"webhook", func() cache.Options { return inventory.WebhookCacheOptions(workload.Builtin()) }},
			} {
				b.Run(process.name, func(b *testing.B) {
					var total uint64
					n := 0
					for b.Loop() {
						total += kindHeap(b, process.opts(), k.obj, k.list, ns, kindHeapObjects)
						n++
					}
					b.ReportMetric(float64(total)/float64(n)/kindHeapObjects, "B/object")
				})
			}
		})
	}
}

// kindHeap starts a cache configured with opts with an informer for obj's
// kind (and the consumer index, for a workload or Pod), waits until it holds
// the want objects seeded in ns, and returns how much the live heap grew.
func kindHeap(b *testing.B, opts cache.Options, obj client.Object, list client.ObjectList, ns string, want int) uint64 {
	b.Helper()
	cfg := controlPlane(b)
	var before, after runtime.MemStats
	// The cache measured before this one stops in the background: its
	// informers' goroutines let go of it a moment after they are told to.
	// Measured at once, its objects, still live, would count against this
	// one's baseline and vanish from its growth.
	time.Sleep(time.Second)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	opts.Scheme = scheme.Scheme()
	ca, err := cache.New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("cache: %v", err)
		}
	}()
	gvk, _, err := opts.Scheme.ObjectKinds(obj)
	if err != nil {
		b.Fatal(err)
	}
	if t, ok := workload.Builtin().Type(schema.GroupKind{Group: gvk[0].Group, Kind: gvk[0].Kind}); ok {
		if _, err := inventory.Start(ctx, ca, workload.Builtin(), []workload.Kind{t.Kind}); err != nil {
			b.Fatal(err)
		}
	} else if _, err := ca.GetInformer(ctx, obj); err != nil {
		b.Fatal(err)
	}
	go func() { done <- ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	if err := ca.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		b.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		b.Fatal(err)
	}
	if got := len(items); got != want {
		b.Fatalf("cache holds %d objects in %s, want %d", got, ns, want)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if *heapProfileDir != "" {
		writeHeapProfile(b)
	}
	runtime.KeepAlive(ca)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

func heapSecret(ns string, i int) client.Object {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("secret-%05d", i), Namespace: ns},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte(rand.String(32)), "tls.key": []byte(rand.String(1200))},
	}
}

func heapDeployment(ns string, i int) client.Object {
	name := fmt.Sprintf("svc-%05d", i)
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: heapTemplate(name, labels)},
	}
}

func heapReplicaSet(ns string, i int) client.Object {
	name := fmt.Sprintf("svc-%05d", i/2)
	hash := fmt.Sprintf("%x", 0x7d9f8b6c5+i)
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop", "pod-template-hash": hash}
	// Owned by its Deployment, as nearly every ReplicaSet is.
	isController := true
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + hash, Namespace: ns, Labels: labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "2"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: types.UID(fmt.Sprintf("0c9a1f5e-2b7d-4c3e-9f8a-%012d", i/2)), Controller: &isController}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: heapTemplate(name, labels)},
	}
}

// heapTemplate is a pod template of the shape benchPod has, with what a
// real template adds to its containers and the webhook's cache drops:
// resources and a readiness probe.
func heapTemplate(name string, labels map[string]string) corev1.PodTemplateSpec {
	pod := benchPod(0)
	spec := pod.Spec
	spec.Volumes[0].ConfigMap.Name = name + "-config"
	spec.Volumes[1].Secret.SecretName = name + "-secret"
	for i := range spec.Containers {
		spec.Containers[i].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
		spec.Containers[i].ReadinessProbe = &corev1.Probe{PeriodSeconds: 5,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
}
