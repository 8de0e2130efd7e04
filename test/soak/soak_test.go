package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// The soak: mixed traffic at 100 requests/s for the duration, the
// processes sampled each minute. It asserts no failed request, no panic,
// and no growth after warm-up; bin/soak-report.txt holds the numbers.
var _ = Describe("configward under steady mixed traffic", func() {
	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			keepLogs(webhook, controller)
		}
	})

	It("fails no request, panics nowhere and does not grow", func(ctx SpecContext) {
		createWorld(ctx)
		before := webhookFailures(ctx)
		procs := map[string]*framework.Process{"webhook": webhook, "controller": controller}
		s := newSampler(sampleEvery(duration), procs, "webhook", "controller")
		traffic := newTraffic()

		By(fmt.Sprintf("sending %d requests/s for %v", perSecond, duration))
		stopSampling := make(chan struct{})
		sampled := s.run(stopSampling)
		start := time.Now()
		<-traffic.run(ctx, duration, ctx.Done())
		took := time.Since(start)
		close(stopSampling)
		<-sampled

		By("checking what the traffic left behind")
		// The last swap reached the controller and compiled: the swaps
		// were not silently dropped along the way.
		inForce, policyStatus := policyInForce(ctx, 2*time.Minute)
		apiServerFailures := diff(before, webhookFailures(ctx))
		panicked, panicLines := panics(webhook, controller)
		trends := s.trends(warmupOf(duration))

		report := soakReport(traffic, took, s, trends, apiServerFailures, panicked, panicLines) +
			"\nConfigPolicy at the end: " + policyStatus + "\n"
		path := filepath.Join(framework.RepoRoot(), "bin", "soak-report.txt")
		Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		Expect(os.WriteFile(path, []byte(report), 0o644)).To(Succeed())
		AddReportEntry("soak", report)

		var sent, failed int64
		for k := range kinds {
			sent += traffic.tallies[k].sent.Load()
			failed += traffic.tallies[k].failed.Load()
		}
		Expect(sent).To(BeNumerically(">", 0))
		Expect(inForce).To(BeTrue(), "the last ConfigPolicy swap is not in force: %s", policyStatus)
		Expect(traffic.tallies[schemaWrite].denied.Load()).To(BeNumerically(">", 0), "no invalid ConfigMap was refused: the schema traffic proves nothing")
		Expect(failed).To(BeZero(), "requests failed:\n%s", traffic.errors.String())
		Expect(apiServerFailures).To(BeEmpty(), "the API server failed to call a webhook (fail-open webhooks hide it from clients)")
		Expect(panicked).To(BeZero(), "panics in the logs:\n%s", strings.Join(panicLines, "\n"))
		for _, p := range []*framework.Process{webhook, controller} {
			Expect(ready(p)).To(BeTrue(), "%s is not ready after the soak", p.Name)
		}
		Expect(s.errors).To(BeEmpty(), "the processes could not always be sampled")
		judged := 0
		for _, t := range trends {
			if t.judged() {
				judged++
			}
			Expect(t.flat()).To(BeTrue(), "%s %s rose by %.0f after warm-up (bound %.0f); see %s", t.process, t.series, t.rise, t.bound, path)
		}
		Expect(judged).To(Equal(len(procs)*3), "too few samples after warm-up to fit a slope to heap, goroutines and fds")
	})
})

// sampleEvery is the minute, shortened for runs under 20 minutes
// so that a short run still has twenty samples to fit.
func sampleEvery(d time.Duration) time.Duration { return min(time.Minute, d/20) }

// warmupOf is the start of a run left out of the fit, while the pools of
// names fill, the caches reach their size and the first ConfigPolicy
// swaps happen: five minutes, or a third of a short run.
func warmupOf(d time.Duration) time.Duration { return min(5*time.Minute, d/3) }

// policyInForce waits up to limit for the controller to report the
// ConfigPolicy's latest generation compiled and in force, and describes
// its status.
func policyInForce(ctx context.Context, limit time.Duration) (bool, string) {
	deadline := time.Now().Add(limit)
	for {
		var p v1alpha1.ConfigPolicy
		err := env.Client.Get(ctx, client.ObjectKey{Name: policyName}, &p)
		if err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(p.Status.Conditions, "Ready")
		status := fmt.Sprintf("generation %d, observedGeneration %d, Ready %+v", p.Generation, p.Status.ObservedGeneration, ready)
		if p.Status.ObservedGeneration == p.Generation && ready != nil && ready.Status == "True" {
			return true, status
		}
		if time.Now().After(deadline) {
			return false, status
		}
		time.Sleep(time.Second)
	}
}

// webhookFailures is what the API server counts of calls to webhooks that
// failed (rejected for an error calling the webhook, or let through by a
// fail-open webhook), from its /metrics. It counts the cluster's own
// writes too (the ReplicaSets and pods of each rollout), which the
// traffic's tallies do not see.
func webhookFailures(ctx context.Context) map[string]float64 {
	cs, err := kubernetes.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	all, err := parseMetrics(strings.NewReader(string(raw)))
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for name, v := range all {
		if strings.HasPrefix(name, "apiserver_admission_webhook_fail_open_count{") ||
			strings.HasPrefix(name, "apiserver_admission_webhook_rejection_count{") && strings.Contains(name, `error_type="calling_webhook_error"`) {
			out[name] = v
		}
	}
	return out
}

// diff is what rose from before to after.
func diff(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// panics counts the lines of the processes' logs that mention a panic (a
// recovered one in an admission handler or a reconciler, or the trace of
// one that ended the process) and returns the first few.
func panics(procs ...*framework.Process) (int, []string) {
	n := 0
	var first []string
	for _, p := range procs {
		f, err := os.Open(p.Log)
		Expect(err).NotTo(HaveOccurred())
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if !strings.Contains(strings.ToLower(sc.Text()), "panic") {
				continue
			}
			n++
			if len(first) < 10 {
				first = append(first, p.Name+": "+tail(sc.Text(), 1000))
			}
		}
		Expect(sc.Err()).NotTo(HaveOccurred())
		f.Close()
	}
	return n, first
}

func ready(p *framework.Process) bool {
	resp, err := http.Get(p.ProbeURL + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// configwardMetrics are p's own metrics (configward_*), histograms left
// out, for the report.
func configwardMetrics(p *framework.Process) []string {
	resp, err := http.Get(p.MetricsURL)
	if err != nil {
		return []string{err.Error()}
	}
	defer resp.Body.Close()
	all, err := parseMetrics(resp.Body)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for name, v := range all {
		if strings.HasPrefix(name, "configward_") && !strings.HasPrefix(name, "configward_policy_evaluation_seconds") {
			out = append(out, fmt.Sprintf("%s %g", name, v))
		}
	}
	sort.Strings(out)
	return out
}

func soakReport(t *traffic, took time.Duration, s *sampler, trends []trend, apiServerFailures map[string]float64, panicked int, panicLines []string) string {
	var b strings.Builder
	var sent int64
	for k := range kinds {
		sent += t.tallies[k].sent.Load()
	}
	fmt.Fprintf(&b, "configward soak: %v of traffic, aiming at %d requests/s\n", duration, perSecond)
	fmt.Fprintf(&b, "sent %d in %v (%.1f/s); %d not sent because every worker was busy\n\n",
		sent, took.Round(time.Second), float64(sent)/took.Seconds(), t.skipped.Load())
	fmt.Fprintf(&b, "%-20s %9s %9s %20s %8s\n", "requests", "sent", "allowed", "denied as expected", "failed")
	for k := range kinds {
		tl := &t.tallies[k]
		fmt.Fprintf(&b, "%-20s %9d %9d %20d %8d\n", kindNames[k], tl.sent.Load(), tl.allowed.Load(), tl.denied.Load(), tl.failed.Load())
	}
	fmt.Fprintf(&b, "\nwarnings received, by rule: %s\n", t.warnings)
	if errs := t.errors.String(); errs != "" {
		fmt.Fprintf(&b, "failures (count, message):\n%s\n", errs)
	}
	fmt.Fprintf(&b, "API server's failed webhook calls during the soak (the cluster's own writes too): %s\n", counts(apiServerFailures))
	fmt.Fprintf(&b, "log lines mentioning a panic: %d\n", panicked)
	for _, l := range panicLines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	for _, name := range s.names {
		fmt.Fprintf(&b, "\n%s metrics at the end:\n  %s\n", name, strings.Join(configwardMetrics(s.procs[name]), "\n  "))
	}
	fmt.Fprintf(&b, "\nafter a warm-up of %v; each value is the lowest of the probes (every %v) in its interval (%v); "+
		"rise = slope x the time fitted\n%s", warmupOf(duration), s.probe, s.every, table(trends))
	if len(s.errors) > 0 {
		fmt.Fprintf(&b, "sampling errors:\n  %s\n", strings.Join(s.errors, "\n  "))
	}
	fmt.Fprintf(&b, "\nsamples (floors of each interval; heap in bytes):\n%s", s.samples())
	return b.String()
}

// counts prints a map of counters one per line, or "none".
func counts(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	var lines []string
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("\n  %s %g", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// keepLogs copies the processes' logs to bin/soak-logs, since the Env
// removes its directory when it stops.
func keepLogs(procs ...*framework.Process) {
	dir := filepath.Join(framework.RepoRoot(), "bin", "soak-logs")
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	for _, p := range procs {
		if p == nil {
			continue
		}
		Expect(copyFile(p.Log, filepath.Join(dir, p.Name+".log"))).To(Succeed())
		fmt.Fprintf(GinkgoWriter, "%s's log kept in %s\n", p.Name, dir)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
