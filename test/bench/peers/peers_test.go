package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configward/configward/test/framework"
)

// Phase lengths. Every loop is bounded by count and time.
// CONFIGWARD_BENCH_PHASE shortens them for a quick check of the harness.
var (
	phase       = phaseLength(15 * time.Second)
	warmUp      = phaseLength(5 * time.Second)
	rulesPhase  = phaseLength(10 * time.Second)
	maxRequests = 50_000
)

func phaseLength(d time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv("CONFIGWARD_BENCH_PHASE")); err == nil && v < d {
		return v
	}
	return d
}

var concurrencies = []int{1, 10, 50}

// BenchmarkPeers is `make bench-peers`: every stack on one control plane,
// one after the other, each measured under the same load; then the rules
// scaling, the memory with 25,000 objects present, and the direct run at
// configward's webhook port. It writes results.json, results.md and the
// CPU profile of configward under load to $CONFIGWARD_BENCH_OUT (default
// bin/bench-peers).
func BenchmarkPeers(b *testing.B) {
	peersDir := os.Getenv("CONFIGWARD_PEERS_DIR")
	if peersDir == "" {
		b.Fatal("CONFIGWARD_PEERS_DIR is not set: run `make bench-peers`, which builds the peers and sets it")
	}
	out := os.Getenv("CONFIGWARD_BENCH_OUT")
	if out == "" {
		out = filepath.Join(framework.RepoRoot(), "bin", "bench-peers")
	}
	ctx := context.Background()
	w, err := StartWorld(ctx, peersDir)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Env.Stop()

	report := &Report{Date: time.Now().UTC().Format("2006-01-02"), Machine: machine(), Versions: versions()}
	newStacks := func() []Stack {
		return []Stack{NoPolicy{}, &VAP{}, &Floor{}, &Floor{Stamp: true}, &Configward{}, &Gatekeeper{}, &Kyverno{}, &Kyverno{CEL: true}}
	}
	only := os.Getenv("CONFIGWARD_BENCH_STACKS") // e.g. "none,configward" while developing
	selected := func(s Stack) bool { return only == "" || strings.Contains(","+only+",", ","+s.Name()+",") }

	for _, s := range newStacks() {
		if !selected(s) {
			continue
		}
		b.Logf("%s: installing", s.Name())
		if err := s.Install(ctx, w, 0); err != nil {
			b.Fatalf("%s: %v", s.Name(), err)
		}
		warm := ClosedLoop(ctx, 10, warmUp, maxRequests, apiServerLoad(b, w, s))
		if len(warm.Latencies) == 0 {
			b.Fatalf("%s: no request answered while warming up (%d errors)", s.Name(), warm.Errors)
		}
		apiServer, err := w.Env.APIServerPID()
		if err != nil {
			b.Fatal(err)
		}
		cpu0, apiCPU0, reviews0 := cpuOf(s), cpuOfPID(apiServer), reviewsOf(b, s)
		requests := 0
		for _, c := range concurrencies {
			res := ClosedLoop(ctx, c, phase, maxRequests, apiServerLoad(b, w, s))
			row := latencyRow(s.Name(), c, res)
			report.Latency = append(report.Latency, row)
			requests += row.Requests
			b.Logf("%s, %d clients: %d requests, %.0f/s, p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, %d errors",
				s.Name(), c, row.Requests, row.PerSecond, row.P50, row.P99, row.P999, row.Errors)
		}
		row := CPURow{Stack: s.Name(), Requests: requests, CPU: (cpuOf(s) - cpu0).Seconds(), APIServerCPU: (cpuOfPID(apiServer) - apiCPU0).Seconds(),
			Reviews: reviewsOf(b, s) - reviews0}
		row.PerThousand = row.CPU / float64(requests) * 1000
		row.APIServerPerRequest = row.APIServerCPU / float64(requests) * 1e3
		if row.Reviews > 0 {
			row.PerReview = row.CPU / float64(row.Reviews) * 1e6
		}
		if s.PID() != 0 {
			_, row.PeakRSS, _ = Memory(s.PID())
		}
		report.CPU = append(report.CPU, row)
		b.Logf("%s: kube-apiserver %.2f ms CPU per request, the policy process %.0f µs per review (%d reviews)", s.Name(), row.APIServerPerRequest, row.PerReview, row.Reviews)
		if _, none := s.(NoPolicy); none || isFloor(s) || s.Name() == "configward" {
			// The Pod path of config revisions: pods as a ReplicaSet
			// creates them, naming their revision's snapshots.
			cpu0, apiCPU0 := cpuOf(s), cpuOfPID(apiServer)
			res := ClosedLoop(ctx, 10, phase, maxRequests, podLoad(w, s))
			pods := PodRow{LatencyRow: latencyRow(s.Name(), 10, res)}
			if n := float64(pods.Requests); n > 0 {
				pods.CPUPerPod = (cpuOf(s) - cpu0).Seconds() / n * 1e6
				pods.APIServerPerPod = (cpuOfPID(apiServer) - apiCPU0).Seconds() / n * 1e3
			}
			report.Pods = append(report.Pods, pods)
			b.Logf("%s, pod creation, 10 clients: %d requests, %.0f/s, p50 %.1f ms, p99 %.1f ms, %d errors, %.0f µs policy CPU and %.2f ms kube-apiserver CPU per pod",
				s.Name(), pods.Requests, pods.PerSecond, pods.P50, pods.P99, pods.Errors, pods.CPUPerPod, pods.APIServerPerPod)
		}
		if cw, ok := s.(*Configward); ok || isFloor(s) {
			// Where the CPU goes, in a phase of its own so that profiling
			// does not weigh on the figures above: configward's, and the
			// API server's with configward and with the floor (what
			// configward's answers cost it beyond any webhook's).
			waits := []func() error{APIServerProfile(w, phase, out, "kube-apiserver-"+s.Name())}
			if ok {
				waits = append(waits, CPUProfile(cw.PprofAddr, phase, out, "configward-apiserver-load"))
			}
			ClosedLoop(ctx, 10, phase+time.Second, maxRequests, apiServerLoad(b, w, s))
			for _, wait := range waits {
				if err := wait(); err != nil {
					b.Logf("%s profile: %v", s.Name(), err)
				}
			}
		}
		if err := s.Uninstall(ctx, w); err != nil {
			b.Fatalf("%s: uninstall: %v", s.Name(), err)
		}
		if err := WaitNothingInForce(ctx, w, 2*time.Minute); err != nil {
			b.Fatalf("after %s: %v", s.Name(), err)
		}
	}

	// Rules scaling: the same policy plus 1, 10 and 50 rules that never
	// match, at 10 clients.
	for i := range newStacks()[1:] {
		if isFloor(newStacks()[i+1]) || !selected(newStacks()[i+1]) {
			continue // the floor has no rules to add
		}
		for _, extra := range []int{1, 10, 50} {
			s := newStacks()[i+1] // a fresh one for each install
			if err := s.Install(ctx, w, extra); err != nil {
				b.Fatalf("%s with %d rules: %v", s.Name(), extra, err)
			}
			ClosedLoop(ctx, 10, 2*time.Second, maxRequests, apiServerLoad(b, w, s))
			res := ClosedLoop(ctx, 10, rulesPhase, maxRequests, apiServerLoad(b, w, s))
			report.Rules = append(report.Rules, RulesRow{Stack: s.Name(), Rules: extra, P50: ms(res.Percentile(50)), P99: ms(res.Percentile(99))})
			b.Logf("%s with %d extra rules: p50 %v p99 %v (%d requests, %d errors)", s.Name(), extra, res.Percentile(50), res.Percentile(99), len(res.Latencies), res.Errors)
			if err := s.Uninstall(ctx, w); err != nil {
				b.Fatalf("%s: uninstall: %v", s.Name(), err)
			}
			if err := WaitNothingInForce(ctx, w, 2*time.Minute); err != nil {
				b.Fatalf("after %s: %v", s.Name(), err)
			}
		}
	}

	if selected(&Configward{}) {
		if report.Direct, err = runDirect(ctx, w, out); err != nil {
			b.Fatal(err)
		}
	}

	if os.Getenv("CONFIGWARD_BENCH_SKIP_MEMORY") == "" {
		if err := createBulk(ctx, w); err != nil {
			b.Fatal(err)
		}
		for _, s := range []Stack{&Configward{}, &Gatekeeper{}, &Kyverno{}} {
			if !selected(s) {
				continue
			}
			if err := s.Install(ctx, w, 0); err != nil {
				b.Fatalf("%s: %v", s.Name(), err)
			}
			rss, peak := settledMemory(s.PID())
			report.Memory = append(report.Memory, MemoryRow{Stack: s.Name(), RSS: rss, Peak: peak})
			b.Logf("%s with the bulk objects: RSS %.0f MiB (peak %.0f MiB)", s.Name(), float64(rss)/(1<<20), float64(peak)/(1<<20))
			if err := s.Uninstall(ctx, w); err != nil {
				b.Fatalf("%s: uninstall: %v", s.Name(), err)
			}
			if err := WaitNothingInForce(ctx, w, 2*time.Minute); err != nil {
				b.Fatalf("after %s: %v", s.Name(), err)
			}
		}
	}

	if err := report.Write(out); err != nil {
		b.Fatal(err)
	}
	fmt.Print(report.Markdown())
}

func cpuOf(s Stack) time.Duration { return cpuOfPID(s.PID()) }

func isFloor(s Stack) bool { _, ok := s.(*Floor); return ok }

func cpuOfPID(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	d, _ := CPUTime(pid)
	return d
}

// reviewCounter is a stack whose process counts the reviews it answered.
type reviewCounter interface{ Reviews() (int, error) }

func reviewsOf(tb testing.TB, s Stack) int {
	c, ok := s.(reviewCounter)
	if !ok {
		return 0
	}
	n, err := c.Reviews()
	if err != nil {
		tb.Fatalf("%s: reading the reviews it answered: %v", s.Name(), err)
	}
	return n
}

// apiServerLoad returns the request of the load phases: a server-side
// dry-run create of the benchmark's Deployment, half of them clean, a
// quarter warned and a quarter denied. Each worker has a client with a
// connection of its own, as separate users have.
//
// A denied variant that is allowed counts as an error for every stack but
// the baseline and the floor, which enforce nothing: an engine that fails
// open under load (Gatekeeper's and Kyverno's webhooks default to
// failurePolicy Ignore) must not look fast by checking nothing.
func apiServerLoad(tb testing.TB, w *World, s Stack) func(ctx context.Context, worker, seq int) error {
	_, none := s.(NoPolicy)
	baseline := none || isFloor(s)
	stamping := s.Name() == stampingFloorStack
	clientFor := perWorkerClients(w)
	variants := []Variant{Clean, Warned, Clean, Denied}
	return func(ctx context.Context, worker, seq int) error {
		c, err := clientFor(worker)
		if err != nil {
			return err
		}
		v := variants[seq%len(variants)]
		d, err := c.AppsV1().Deployments(w.Namespace).Create(ctx, Deployment(w.Namespace, fmt.Sprintf("load-%d", seq), v, 0),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if v == Denied && !baseline {
			if err == nil {
				return fmt.Errorf("the denied variant was allowed")
			}
			return nil
		}
		if err == nil && stamping && !Stamped(d.Spec.Template.Annotations) {
			return fmt.Errorf("the stamping floor's patch was not applied")
		}
		return err
	}
}

// perWorkerClients gives each load worker a client with a connection of its
// own, as separate users have.
func perWorkerClients(w *World) func(worker int) (kubernetes.Interface, error) {
	return perWorkerClientsOf(w.Env.Config)
}

// perWorkerClientsOf is perWorkerClients for the user of base.
func perWorkerClientsOf(base *rest.Config) func(worker int) (kubernetes.Interface, error) {
	var mu sync.Mutex
	clients := map[int]kubernetes.Interface{}
	return func(worker int) (kubernetes.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := clients[worker]; ok {
			return c, nil
		}
		cfg := rest.CopyConfig(base)
		cfg.QPS, cfg.Burst = -1, 0
		cfg.WarningHandler = rest.NoWarnings{}
		// A dial function of its own keeps client-go from sharing one
		// cached transport (one HTTP/2 connection) among the workers.
		d := &net.Dialer{Timeout: 10 * time.Second}
		cfg.Dial = d.DialContext
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		clients[worker] = c
		return c, nil
	}
}

// podLoad is the Pod path's request: a server-side dry-run create of
// RevisionPod, sent as a ReplicaSet's controller creates its pods. With
// configward, a pod its Pod path did not point at the snapshots counts as
// an error.
func podLoad(w *World, s Stack) func(ctx context.Context, worker, seq int) error {
	cfg, err := w.Env.ControllerConfig(context.Background(), "replicaset-controller")
	if err != nil {
		return func(context.Context, int, int) error { return err }
	}
	clientFor := perWorkerClientsOf(cfg)
	return func(ctx context.Context, worker, seq int) error {
		c, err := clientFor(worker)
		if err != nil {
			return err
		}
		pod, err := c.CoreV1().Pods(w.Namespace).Create(ctx, RevisionPod(w.Namespace, fmt.Sprintf("pod-%d", seq)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && s.Name() == "configward" && !Pinned(pod) {
			return fmt.Errorf("the pod was not pinned to its revision's snapshots")
		}
		if err == nil && s.Name() == stampingFloorStack && !Stamped(pod.Annotations) {
			return fmt.Errorf("the stamping floor's patch was not applied to the pod")
		}
		return err
	}
}

// createBulk creates the memory scenario's objects in namespace "bulk":
// 10,000 ConfigMaps and 10,000 Secrets of 10 KiB and 5,000 Pods (never
// scheduled: there are no nodes), with 16 writers.
func createBulk(ctx context.Context, w *World) error {
	const ns = "bulk"
	cs, err := kubernetes.NewForConfig(func() *rest.Config { c := rest.CopyConfig(w.Env.Config); c.QPS, c.Burst = -1, 0; return c }())
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	value := strings.Repeat("x", 10<<10)
	jobs := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				var err error
				switch {
				case i < 10_000:
					_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)},
						Data: map[string]string{"value": value}}, metav1.CreateOptions{})
				case i < 20_000:
					_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("secret-%d", i)},
						Data: map[string][]byte{"value": []byte(value)}}, metav1.CreateOptions{})
				default:
					n := i - 20_000
					_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", n)},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0",
							Env: []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("cm-%d", n)}, Key: "value"}}}}}}}}, metav1.CreateOptions{})
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	for i := range 25_000 {
		select {
		case jobs <- i:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			return err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return nil
}

// settledMemory waits until the process's RSS has changed by less than 2 %
// over 10 s (its caches are synced and the collector has caught up), at
// most 3 minutes, and returns it with the peak.
func settledMemory(pid int) (rss, peak int64) {
	deadline := time.Now().Add(3 * time.Minute)
	last, _, _ := Memory(pid)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Second)
		now, _, _ := Memory(pid)
		if d := now - last; d < last/50 && -d < last/50 {
			last = now
			break
		}
		last = now
	}
	_, peak, _ = Memory(pid)
	return last, peak
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s, %s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

func versions() map[string]string {
	return map[string]string{
		"kube-apiserver": os.Getenv("CONFIGWARD_K8S_VERSION"),
		"gatekeeper":     os.Getenv("CONFIGWARD_GATEKEEPER_VERSION"),
		"kyverno":        os.Getenv("CONFIGWARD_KYVERNO_VERSION"),
	}
}
