// Package scale measures configward's processes against the size of the
// cluster whose config they hold: the memory of `configward webhook` and
// `configward controller` and how long each takes to be ready, on an empty
// cluster and at 1×, 2× and 4× a base size (10,000 Pods and as many
// ConfigMaps and Secrets at 1×). `make bench-scale` runs it; it is never
// part of `make test`, and `go test ./...` skips it unless OutEnv is set.
//
// The cluster is the API server, etcd and kwok: pods are created already
// bound to kwok's nodes (no scheduler, no kube-controller-manager, so
// nothing moves while a process is measured), and kwok plays their
// kubelets, so they carry a running pod's status. At each size the webhook
// and then the controller start fresh, as a new replica would (the webhook
// stays up, idle, while the controller starts): from the first list to
// ready, then the memory once settled; then, with both up, the stamping
// latency (latency_test.go).
package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/test/bench/peers"
	"github.com/configward/configward/test/framework"
)

const (
	// OutEnv turns the benchmark on and names the folder for results.json
	// and results.md.
	OutEnv = "CONFIGWARD_SCALE_OUT"
	// BaseEnv overrides the Pods at 1× (10,000), FactorsEnv the sizes
	// measured ("1,2,4"): a quick look at the method uses small ones.
	BaseEnv    = "CONFIGWARD_SCALE_BASE"
	FactorsEnv = "CONFIGWARD_SCALE_FACTORS"
	// settle is how long a ready process runs before its memory is read:
	// long enough for the start-up's garbage to be collected.
	settle = 20 * time.Second
)

// Results is results.json.
type Results struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Rows    []Row  `json:"rows"`
	// Latency is each size's stamping latency (latency_test.go).
	Latency []Latency `json:"latency"`
}

// Row is one process measured at one size.
type Row struct {
	Size    size   `json:"size"`
	Process string `json:"process"`
	// ReadySeconds is from the process's start to its /readyz answering 200.
	ReadySeconds float64 `json:"readySeconds"`
	// RSS is resident memory after settling; PeakRSS the most it held, from
	// its start (the kernel's VmHWM). LiveHeap is the Go heap's allocated
	// bytes right after a collection: what the process keeps. HeapInUse is
	// the heap's spans in use at the same moment, the live heap with its
	// fragmentation.
	RSSMiB       float64 `json:"rssMiB"`
	PeakRSSMiB   float64 `json:"peakRssMiB"`
	LiveHeapMiB  float64 `json:"liveHeapMiB"`
	HeapInUseMiB float64 `json:"heapInUseMiB"`
}

func TestScale(t *testing.T) {
	out := os.Getenv(OutEnv)
	if out == "" {
		t.Skip("the scale benchmark runs only when " + OutEnv + " is set; `make bench-scale` sets it")
	}
	base, factors, err := parameters()
	if err != nil {
		t.Fatal(err)
	}
	defer framework.RemoveBuilds()
	ctrl.SetLogger(logr.Discard())
	env, err := framework.Start(framework.Options{WithoutWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	defer keepLogs(t, env.Dir, out)
	env.ReadyWithin = 10 * time.Minute
	largest := sizeOf(base, factors[len(factors)-1])
	if err := env.StartKwokNodes(largest.Nodes); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// Built before the first process is timed.
	if _, err := framework.Binary(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seed := &seeder{c: c, nodes: largest.Nodes}
	res := Results{Date: time.Now().UTC().Format(time.DateOnly), Machine: machine()}
	made := 0
	for _, f := range append([]int{0}, factors...) {
		sz := sizeOf(base, f)
		start := time.Now()
		if err := seed.namespaces(ctx, made, sz.Namespaces); err != nil {
			t.Fatalf("seeding %d×: %v", f, err)
		}
		made = sz.Namespaces
		if err := seedLatency(ctx, c, f); err != nil {
			t.Fatalf("seeding %d×: %v", f, err)
		}
		if err := waitRunning(ctx, c, sz.Pods); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d×: %d pods, %d ConfigMaps, %d Secrets, %d workloads seeded and running in %s", f, sz.Pods, sz.ConfigMaps, sz.Secrets, sz.Workloads, time.Since(start).Round(time.Second))
		var procs []*framework.Process
		for _, process := range []string{"webhook", "controller"} {
			p, row, err := measure(env, out, process, sz)
			if err != nil {
				t.Fatalf("%s at %d×: %v", process, f, err)
			}
			procs = append(procs, p)
			t.Logf("%s at %d×: ready in %.1f s, RSS %.0f MiB (peak %.0f), live heap %.0f MiB (in use %.0f)", process, f, row.ReadySeconds, row.RSSMiB, row.PeakRSSMiB, row.LiveHeapMiB, row.HeapInUseMiB)
			res.Rows = append(res.Rows, row)
		}
		lat, err := stampLatency(ctx, env, c, f)
		for _, p := range procs {
			_ = p.Stop()
		}
		if err != nil {
			t.Fatalf("stamping latency at %d×: %v", f, err)
		}
		t.Logf("%d×: a change consumed by %d workloads stamped in p50 %.2f s, p99 %.2f s", f, latencyWorkloads, lat.P50, lat.P99)
		res.Latency = append(res.Latency, lat)
	}
	if err := write(out, res); err != nil {
		t.Fatal(err)
	}
}

// keepLogs copies, when the test failed, the logs of configward's processes
// and of kwok into out/logs: the Env removes its folder when it stops.
func keepLogs(t *testing.T, dir, out string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		dst := filepath.Join(out, "logs", filepath.Base(filepath.Dir(l))+".log")
		if os.MkdirAll(filepath.Dir(dst), 0o755) == nil && os.WriteFile(dst, b, 0o644) == nil {
			t.Logf("kept %s", dst)
		}
	}
}

func parameters() (base int, factors []int, err error) {
	base = 10_000
	if v := os.Getenv(BaseEnv); v != "" {
		if base, err = strconv.Atoi(v); err != nil || base < podsPerNamespace {
			return 0, nil, fmt.Errorf("%s=%q: want a number of Pods of at least %d", BaseEnv, v, podsPerNamespace)
		}
	}
	raw := os.Getenv(FactorsEnv)
	if raw == "" {
		raw = "1,2,4"
	}
	for _, f := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(factors) > 0 && n <= factors[len(factors)-1]) {
			return 0, nil, fmt.Errorf("%s=%q: want growing whole factors such as 1,2,4", FactorsEnv, raw)
		}
		factors = append(factors, n)
	}
	return base, factors, nil
}

// measure starts one process fresh, times it to ready, lets it settle and
// reads its memory. It returns the process still running.
func measure(env *framework.Env, out, process string, sz size) (*framework.Process, Row, error) {
	pprof, err := freeAddr()
	if err != nil {
		return nil, Row{}, err
	}
	name := fmt.Sprintf("%s-%d", process, sz.Factor)
	start := time.Now()
	var p *framework.Process
	if process == "webhook" {
		p, err = env.StartWebhookBinary(name, "--pprof-bind-address="+pprof)
	} else {
		// No batch window: the stamping latency measured after is then
		// configward's own work, not the 2 s it waits by default for more
		// changes to roll together.
		p, err = env.StartControllerBinary(name, "--pprof-bind-address="+pprof, "--rollout-batch-window=0")
	}
	if err != nil {
		return nil, Row{}, err
	}
	stop := func(err error) (*framework.Process, Row, error) {
		_ = p.Stop()
		return nil, Row{}, err
	}
	row := Row{Size: sz, Process: process, ReadySeconds: time.Since(start).Seconds()}
	time.Sleep(settle)
	rss, peak, err := peers.Memory(p.PID())
	if err != nil {
		return stop(err)
	}
	// The heap profile, taken after a collection (gc=1), says what is live
	// and where it was allocated; the heap's size is read after it, so
	// that it holds what the process keeps, not the garbage of its start.
	if err := save("http://"+pprof+"/debug/pprof/heap?gc=1", filepath.Join(out, name+".heap.pprof")); err != nil {
		return stop(err)
	}
	metrics, err := http.Get(p.MetricsURL)
	if err != nil {
		return stop(err)
	}
	text, err := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if err != nil {
		return stop(err)
	}
	live, err := framework.SumSeries(string(text), "go_memstats_heap_alloc_bytes")
	if err != nil {
		return stop(err)
	}
	inUse, err := framework.SumSeries(string(text), "go_memstats_heap_inuse_bytes")
	if err != nil {
		return stop(err)
	}
	row.RSSMiB, row.PeakRSSMiB, row.LiveHeapMiB, row.HeapInUseMiB = mib(rss), mib(peak), mib(int64(live)), mib(int64(inUse))
	return p, row, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func save(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// waitRunning waits until want pods are Running, as kwok reports them,
// counting in pages as a controller's informer lists.
func waitRunning(ctx context.Context, c client.Client, want int) error {
	deadline := time.Now().Add(30 * time.Minute)
	for {
		running, err := countRunning(ctx, c)
		if err == nil && running >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods Running after 30 minutes (last error: %v)", running, want, err)
		}
		time.Sleep(5 * time.Second)
	}
}

func countRunning(ctx context.Context, c client.Client) (int, error) {
	n := 0
	cont := ""
	for {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.Limit(2000), client.Continue(cont)); err != nil {
			return n, err
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		if cont = list.Continue; cont == "" {
			return n, nil
		}
	}
}

func machine() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	cores := strings.Count(string(b), "processor\t:")
	model := ""
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name\t: "); ok {
			model = v
			break
		}
	}
	return fmt.Sprintf("%d cores, %s", cores, model)
}

func write(dir string, r Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(table(r)), 0o644)
}

// table is results.md: one row per size and process, and the projection
// to 150,000 Pods along the line through the measured sizes.
func table(r Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s.\n\n", r.Date, r.Machine)
	b.WriteString("| size | Pods | ConfigMaps + Secrets | workloads (+ ReplicaSets) | process | ready (s) | RSS (MiB) | peak RSS (MiB) | live heap (MiB) | heap in use (MiB) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		s := row.Size
		fmt.Fprintf(&b, "| %d× | %d | %d | %d (+%d) | %s | %.1f | %.0f | %.0f | %.0f | %.0f |\n", s.Factor, s.Pods, s.ConfigMaps+s.Secrets,
			s.Workloads, s.ReplicaSets, row.Process, row.ReadySeconds, row.RSSMiB, row.PeakRSSMiB, row.LiveHeapMiB, row.HeapInUseMiB)
	}
	b.WriteString("\n| size | a change consumed by 10 workloads, stamped in: p50 (s) | p99 (s) |\n|---|---|---|\n")
	for _, l := range r.Latency {
		fmt.Fprintf(&b, "| %d× | %.2f | %.2f |\n", l.Factor, l.P50, l.P99)
	}
	b.WriteString("\n")
	for _, process := range []string{"webhook", "controller"} {
		slope, intercept := fit(r.Rows, process, func(row Row) float64 { return row.RSSMiB })
		hslope, hintercept := fit(r.Rows, process, func(row Row) float64 { return row.LiveHeapMiB })
		fmt.Fprintf(&b, "- %s: RSS %.0f MiB + %.0f B per Pod (with its share of config and workloads); at 150,000 Pods %.0f MiB. Live heap %.0f MiB + %.0f B per Pod; at 150,000 Pods %.0f MiB.\n",
			process, intercept, slope*(1<<20), intercept+slope*150_000, hintercept, hslope*(1<<20), hintercept+hslope*150_000)
	}
	return b.String()
}

// fit is the least-squares line of a process's value against its Pods.
func fit(rows []Row, process string, value func(Row) float64) (slope, intercept float64) {
	var n, sx, sy, sxx, sxy float64
	for _, row := range rows {
		if row.Process != process {
			continue
		}
		x, y := float64(row.Size.Pods), value(row)
		n++
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	if d := n*sxx - sx*sx; d != 0 {
		slope = (n*sxy - sx*sy) / d
	}
	return slope, (sy - slope*sx) / n
}
