package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/test/framework"
)

// BenchmarkRolloutStorm changes one key of a ConfigMap that 1,000
// Deployments (one replica each, on kwok nodes) consume, on a whole cluster
// (kube-controller-manager, kube-scheduler, kwok), and measures what the
// rollout costs: how long until every Deployment has its new ReplicaSet and
// until every pod runs the new config, how many writes configward made
// (from the API server's audit log), and what an unrelated client saw of
// the API server meanwhile. Once paced at the default --rollout-rate, once
// unpaced. It is a load run, not a loop: run it with -benchtime=1x (`make
// bench` does).
func BenchmarkRolloutStorm(b *testing.B) {
	for _, c := range []struct {
		name string
		rate float64
	}{
		{fmt.Sprintf("rate=%g", float64(manager.DefaultRolloutRate)), manager.DefaultRolloutRate},
		{"unpaced", 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				rolloutStorm(b, 1000, c.rate)
			}
		})
	}
}

func rolloutStorm(b *testing.B, workloads int, rate float64) {
	b.StopTimer()
	env, err := framework.Start(framework.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	}()
	if err := env.StartCluster(10); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := env.InstallWebhookConfigurations(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := env.StartController(manager.Controller{RolloutBatchWindow: 2 * time.Second, RolloutRate: rate}); err != nil {
		b.Fatal(err)
	}
	c := env.Client
	const ns = "storm"
	createNamespace(b, c, ns)
	createNamespace(b, c, "unrelated")
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}, Data: map[string]string{"a": "1", "b": "1"}}
	if err := c.Create(ctx, shared); err != nil {
		b.Fatal(err)
	}
	// The webhook stamps from its cache: wait until it has the ConfigMap,
	// so every Deployment starts at the same hash.
	first := waitForStamp(b, c, stormDeployment(ns, "probe"))

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(20)
	for i := range workloads {
		g.Go(func() error { return c.Create(gctx, stormDeployment(ns, fmt.Sprintf("w%04d", i))) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	w := newStormWatch(b, env, ns)
	start := time.Now()
	w.waitFor(b, "every pod running the first config", 10*time.Minute, func(s stormState) bool { return s.podsRunning[first] == workloads })
	b.Logf("%d Deployments created and their pods running in %s", workloads, time.Since(start).Round(time.Second))

	// What the unrelated client sees of a quiet cluster, then of the storm.
	idle := startLatencyProbe(ctx, c)
	time.Sleep(15 * time.Second)
	quiet := idle.stop()
	probe := startLatencyProbe(ctx, c)
	t0 := time.Now()
	patch := client.MergeFrom(shared.DeepCopy())
	shared.Data["a"] = "2"
	if err := c.Patch(ctx, shared, patch); err != nil {
		b.Fatal(err)
	}
	var second string
	w.waitFor(b, "every Deployment re-stamped", 10*time.Minute, func(s stormState) bool {
		second = s.onlyDeploymentHashOtherThan(first)
		return second != "" && s.deploymentsWith[second] == workloads
	})
	tStamped := time.Since(t0)
	w.waitFor(b, "every Deployment with its new ReplicaSet", 10*time.Minute, func(s stormState) bool { return s.newReplicaSets[second] == workloads })
	tReplicaSets := time.Since(t0)
	w.waitFor(b, "every pod running the new config, none the old", 20*time.Minute, func(s stormState) bool {
		return s.podsRunning[second] == workloads && s.pods[first] == 0
	})
	tPods := time.Since(t0)
	lat := probe.stop()

	// Give configward time to make any late, extra write before counting.
	time.Sleep(5 * time.Second)
	writes := func(resource string) (accepted, refused int) {
		events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Resource == resource && ev.Verb == "patch"
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range events {
			if ev.ResponseStatus.Code == 200 {
				accepted++
			} else {
				refused++ // the optimistic lock lost to a concurrent write; retried
			}
		}
		return accepted, refused
	}
	deploymentPatches, conflicts := writes("deployments")
	replicaSetPatches, _ := writes("replicasets")
	if deploymentPatches != workloads || replicaSetPatches != 0 {
		b.Errorf("configward patched %d Deployments and %d ReplicaSets; want %d and 0", deploymentPatches, replicaSetPatches, workloads)
	}
	b.ReportMetric(tStamped.Seconds(), "s-all-restamped")
	b.ReportMetric(tReplicaSets.Seconds(), "s-all-new-replicasets")
	b.ReportMetric(tPods.Seconds(), "s-all-pods-replaced")
	b.ReportMetric(float64(deploymentPatches), "deployment-patches")
	b.ReportMetric(float64(replicaSetPatches), "replicaset-patches")
	b.ReportMetric(float64(conflicts), "patch-conflicts")
	b.ReportMetric(quiet.p99.Seconds()*1000, "quiet-probe-p99-ms")
	b.ReportMetric(lat.p50.Seconds()*1000, "probe-p50-ms")
	b.ReportMetric(lat.p99.Seconds()*1000, "probe-p99-ms")
	b.ReportMetric(lat.max.Seconds()*1000, "probe-max-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("rate %g/s: re-stamped %s, new ReplicaSets %s, pods replaced %s; %d Deployment patches (+%d refused by the optimistic lock and retried), %d ReplicaSet patches",
		rate, tStamped.Round(100*time.Millisecond), tReplicaSets.Round(100*time.Millisecond), tPods.Round(100*time.Millisecond),
		deploymentPatches, conflicts, replicaSetPatches)
	b.Logf("unrelated client: quiet p50 %s p99 %s max %s (%d requests); during the rollout p50 %s p99 %s max %s (%d requests)",
		quiet.p50.Round(100*time.Microsecond), quiet.p99.Round(100*time.Microsecond), quiet.max.Round(100*time.Microsecond), quiet.n,
		lat.p50.Round(100*time.Microsecond), lat.p99.Round(100*time.Microsecond), lat.max.Round(100*time.Microsecond), lat.n)
}

func stormDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name, "storm": "true"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.example/app:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}},
					}}},
				},
			},
		},
	}
}

// waitForStamp dry-runs obj until the webhook stamps a hash that accounts
// for the ConfigMap, and returns that hash.
func waitForStamp(b *testing.B, c client.Client, obj *appsv1.Deployment) string {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		o := obj.DeepCopy()
		if err := c.Create(context.Background(), o, client.DryRunAll); err == nil {
			if h := o.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]; h != "" {
				// A hash computed before the ConfigMap was cached counts it as
				// missing; a second identical answer a moment later is stable.
				time.Sleep(500 * time.Millisecond)
				o2 := obj.DeepCopy()
				if c.Create(context.Background(), o2, client.DryRunAll) == nil && o2.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation] == h {
					return h
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("the config-hash webhook never stamped the probe Deployment")
	return ""
}

// stormState is what the watch counts, by config hash.
type stormState struct {
	deploymentsWith map[string]int // Deployments whose template carries the hash
	// Deployments whose template carries the hash and whose status says
	// the deployment controller has seen that template
	deploymentsObserved map[string]int
	newReplicaSets      map[string]int // ReplicaSets with the hash that want a pod
	pods                map[string]int // pods with the hash, any phase
	podsRunning         map[string]int // of those, Ready and not being deleted
}

func (s stormState) onlyDeploymentHashOtherThan(h string) string {
	for k, n := range s.deploymentsWith {
		if k != h && n > 0 {
			return k
		}
	}
	return ""
}

// stormWatch counts from informers, so measuring adds no polling load on
// the API server.
type stormWatch struct {
	cache cache.Cache
	ns    string
}

func newStormWatch(b *testing.B, env *framework.Env, ns string) *stormWatch {
	cfg := *env.Config
	cch, err := cache.New(&cfg, cache.Options{Scheme: scheme.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for _, o := range []client.Object{&appsv1.Deployment{}, &appsv1.ReplicaSet{}, &corev1.Pod{}} {
		if _, err := cch.GetInformer(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = cch.Start(ctx) }()
	if !cch.WaitForCacheSync(ctx) {
		b.Fatal("the storm's informers did not sync")
	}
	return &stormWatch{cache: cch, ns: ns}
}

func (w *stormWatch) state(b *testing.B) stormState {
	ctx := context.Background()
	s := stormState{map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}}
	var deployments appsv1.DeploymentList
	var replicaSets appsv1.ReplicaSetList
	var pods corev1.PodList
	for _, l := range []client.ObjectList{&deployments, &replicaSets, &pods} {
		if err := w.cache.List(ctx, l, client.InNamespace(w.ns), client.MatchingLabels{"storm": "true"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, d := range deployments.Items {
		h := d.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]
		s.deploymentsWith[h]++
		if d.Status.ObservedGeneration >= d.Generation {
			s.deploymentsObserved[h]++
		}
	}
	for _, rs := range replicaSets.Items {
		if ptr.Deref(rs.Spec.Replicas, 0) > 0 {
			s.newReplicaSets[rs.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]]++
		}
	}
	for _, p := range pods.Items {
		h := p.Annotations[v1alpha1.ConfigHashAnnotation]
		s.pods[h]++
		if p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			s.podsRunning[h]++
		}
	}
	return s
}

func (w *stormWatch) waitFor(b *testing.B, what string, timeout time.Duration, done func(stormState) bool) {
	deadline := time.Now().Add(timeout)
	for {
		s := w.state(b)
		if done(s) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("not reached within %s: %s (deployments by hash %v, wanting ReplicaSets by hash %v, pods by hash %v, running %v)",
				timeout, what, s.deploymentsWith, s.newReplicaSets, s.pods, s.podsRunning)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// latencyProbe is an unrelated client: it reads and writes a ConfigMap of
// its own namespace every 50 ms and keeps each request's latency.
type latencyProbe struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	took   []time.Duration
}

type latencies struct {
	n             int
	p50, p99, max time.Duration
}

func startLatencyProbe(ctx context.Context, c client.Client) *latencyProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &latencyProbe{cancel: cancel, done: make(chan struct{})}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: "probe"}, Data: map[string]string{"n": "0"}}
	_ = c.Create(ctx, cm)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		// Bounded: at most an hour of requests, 20 a second.
		for i := 0; i < 72000; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			var err error
			if i%2 == 0 {
				err = c.Get(ctx, types.NamespacedName{Namespace: "unrelated", Name: "probe"}, &corev1.ConfigMap{})
			} else {
				err = c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: "probe"}},
					client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)))
			}
			if err == nil {
				p.mu.Lock()
				p.took = append(p.took, time.Since(start))
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func (p *latencyProbe) stop() latencies {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.Sort(p.took)
	if len(p.took) == 0 {
		return latencies{}
	}
	at := func(q float64) time.Duration { return p.took[min(len(p.took)-1, int(q*float64(len(p.took))))] }
	return latencies{n: len(p.took), p50: at(0.50), p99: at(0.99), max: p.took[len(p.took)-1]}
}
