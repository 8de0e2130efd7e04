package peers

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// BenchmarkWebhookDirect is the direct load run alone (see runDirect); it
// is also the last part of BenchmarkPeers. With CONFIGWARD_PROFILE_DIR set,
// it writes a CPU profile of the run there.
func BenchmarkWebhookDirect(b *testing.B) {
	ctx := context.Background()
	w, err := StartWorld(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	defer w.Env.Stop()
	row, err := runDirect(ctx, w, os.Getenv("CONFIGWARD_PROFILE_DIR"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(row.P50*1000, "p50-µs")
	b.ReportMetric(row.P99*1000, "p99-µs")
	b.ReportMetric(row.P999*1000, "p99.9-µs")
	b.ReportMetric(row.CPUReview, "cpu-µs/review")
	b.ReportMetric(float64(row.Errors), "errors")
}

// runDirect is the direct load run at configward's webhook port, no API
// server in the way: AdmissionReviews of the benchmark's Deployments
// (mutating and validating, half clean and half with findings) at 1,500
// per second for 20 s, open loop, with the webhook pinned to one CPU
// (GOMAXPROCS=1) and this process on the other. With profileDir set, a CPU
// profile of the run is written there.
func runDirect(ctx context.Context, w *World, profileDir string) (*DirectRow, error) {
	calls, err := DirectCalls(ctx, w)
	if err != nil {
		return nil, err
	}
	var size int
	for _, c := range calls {
		size += len(c.body)
	}
	fmt.Printf("direct: reviews of %d bytes on average\n", size/len(calls))
	cw := &Configward{Env: []string{"GOMAXPROCS=1"}}
	if err := cw.Install(ctx, w, 0); err != nil {
		return nil, err
	}
	defer cw.Uninstall(ctx, w)
	// The webhook alone on CPU 0; this process (the load) and every other
	// process it started (kube-apiserver, etcd) on CPU 1, until the end.
	others := append(Descendants(os.Getpid()), os.Getpid())
	for _, pid := range others {
		if pid == cw.PID() {
			continue
		}
		if err := PinToCPU(pid, 1); err != nil {
			return nil, err
		}
		defer PinToCPUs(pid, 0, 1)
	}
	if err := PinToCPU(cw.PID(), 0); err != nil {
		return nil, err
	}
	rate, duration := 1500.0, 20*time.Second
	// Warm up: connections, caches, the runtime's heap size.
	if _, err := DirectLoad(ctx, w.Env, cw.Process().Addr, calls, 500, 3*time.Second, 64); err != nil {
		return nil, err
	}
	var waitProfile func() error
	if profileDir != "" {
		waitProfile = CPUProfile(cw.PprofAddr, duration, profileDir, "configward-webhook-direct")
	}
	cpu0, err := CPUTime(cw.PID())
	if err != nil {
		return nil, err
	}
	res, err := DirectLoad(ctx, w.Env, cw.Process().Addr, calls, rate, duration, 64)
	if err != nil {
		return nil, err
	}
	cpu1, err := CPUTime(cw.PID())
	if err != nil {
		return nil, err
	}
	if waitProfile != nil {
		if err := waitProfile(); err != nil {
			return nil, err
		}
	}
	n := len(res.Latencies)
	row := &DirectRow{Rate: res.Rate(), Reviews: n, Errors: res.Errors, P50: ms(res.Percentile(50)), P99: ms(res.Percentile(99)),
		P999: ms(res.Percentile(99.9)), CPUReview: float64((cpu1 - cpu0).Microseconds()) / float64(max(n, 1))}
	fmt.Printf("direct: %d reviews at %.0f/s: p50 %.2f ms p99 %.2f ms p99.9 %.2f ms, %.0f µs CPU per review, %d errors\n",
		n, row.Rate, row.P50, row.P99, row.P999, row.CPUReview, row.Errors)
	return row, nil
}
