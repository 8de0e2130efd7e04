package peers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/webhookscope"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

// BenchNamespace holds the benchmark's config and (dry-run) Deployments.
const BenchNamespace = "bench"

// StartWorld starts kube-apiserver and etcd without configward's webhook
// (each stack brings its own) and creates the benchmark's namespace and
// fixtures. Stop it with w.Env.Stop().
func StartWorld(ctx context.Context, peersDir string) (*World, error) {
	env, err := framework.Start(framework.Options{WithoutWebhook: true})
	if err != nil {
		return nil, err
	}
	w := &World{Env: env, PeersDir: peersDir, Namespace: BenchNamespace}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: BenchNamespace}}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	for _, o := range Fixtures(BenchNamespace) {
		if err := env.Client.Create(ctx, o.(client.Object)); err != nil {
			_ = env.Stop()
			return nil, err
		}
	}
	return w, nil
}

// ScopeLikeTheController puts on the installed configurations the
// matchConditions configward's controller keeps there in a chart install
// (internal/webhookscope), for the stacks registered as configward is: the
// benchmark runs the webhook alone, not the controller.
func ScopeLikeTheController(ctx context.Context, w *World, installed []client.Object, customRules bool) error {
	return webhookscope.Apply(ctx, w.Env.Client, w.Env.Client, framework.WebhookScope(installed), webhookscope.Conditions(workload.Builtin(), customRules))
}

// PinToCPU restricts every thread of process pid to the one CPU, so a
// measurement "on one core" is one. Threads created later inherit it.
func PinToCPU(pid, cpu int) error { return PinToCPUs(pid, cpu) }

// PinToCPUs restricts every thread of process pid to the CPUs.
func PinToCPUs(pid int, cpus ...int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	var set unix.CPUSet
	for _, cpu := range cpus {
		set.Set(cpu)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pinning thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}

// CPUProfile fetches a CPU profile of d from a Go process's
// /debug/pprof endpoint at addr into dir/name.pprof, in the background; the
// returned function waits for it.
func CPUProfile(addr string, d time.Duration, dir, name string) func() error {
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			done <- err
			return
		}
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errorsJoin(err, f.Close())
	}()
	return func() error { return <-done }
}

// APIServerProfile fetches a CPU profile of d from kube-apiserver's
// /debug/pprof (on by default, readable by cluster administrators) into
// dir/name.pprof, in the background; the returned function waits for it.
// It shows where the API server's own CPU goes with a stack installed.
func APIServerProfile(w *World, d time.Duration, dir, name string) func() error {
	done := make(chan error, 1)
	go func() {
		cfg := rest.CopyConfig(w.Env.Config)
		cfg.Timeout = d + 30*time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			done <- err
			return
		}
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(context.Background())
		if err != nil {
			done <- err
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			done <- err
			return
		}
		done <- os.WriteFile(filepath.Join(dir, name+".pprof"), raw, 0o644)
	}()
	return func() error { return <-done }
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Descendants lists the processes started, directly or not, by pid
// (kube-apiserver, etcd and the stacks' processes are this process's).
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) > 1 {
			parent[p], _ = strconv.Atoi(fields[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
