package peers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Report is everything one `make bench-peers` run measured; it is written
// as results.json (which test/tools/benchplot draws) and results.md.
type Report struct {
	Date     string            `json:"date"`
	Machine  string            `json:"machine"`
	Versions map[string]string `json:"versions"`
	Latency  []LatencyRow      `json:"latency"`
	// Pods is the Pod path of config revisions: creates of pods as a
	// ReplicaSet makes them, naming their revision's snapshots, at 10
	// clients, with no policy, the floor and configward.
	Pods   []PodRow    `json:"pods,omitempty"`
	CPU    []CPURow    `json:"cpu"`
	Rules  []RulesRow  `json:"rules"`
	Memory []MemoryRow `json:"memory"`
	Direct *DirectRow  `json:"direct,omitempty"`
}

// LatencyRow is one stack at one concurrency: client-observed latency of
// server-side dry-run creates through the API server.
type LatencyRow struct {
	Stack     string  `json:"stack"`
	Clients   int     `json:"clients"`
	Requests  int     `json:"requests"`
	Errors    int     `json:"errors"`
	PerSecond float64 `json:"perSecond"`
	P50       float64 `json:"p50Ms"`
	P99       float64 `json:"p99Ms"`
	P999      float64 `json:"p999Ms"`
	// Quantiles are the latencies (ms) at 0.5 %, 1.5 %, ... 99.5 % and
	// 99.9 %: the distribution the plot draws.
	Quantiles []float64 `json:"quantilesMs"`
}

// CPURow is the CPU the stack's policy process and kube-apiserver used over
// the three concurrency phases.
type CPURow struct {
	Stack    string  `json:"stack"`
	Requests int     `json:"requests"`
	CPU      float64 `json:"cpuSeconds"`
	// PerThousand is the policy process's CPU seconds per 1,000 requests.
	PerThousand float64 `json:"cpuSecondsPer1000"`
	PeakRSS     int64   `json:"peakRSSBytes"`
	// Reviews the policy process answered, where it counts them (the
	// floor and configward), and its CPU per review in µs.
	Reviews   int     `json:"reviews,omitempty"`
	PerReview float64 `json:"cpuMicrosecondsPerReview,omitempty"`
	// APIServerCPU is kube-apiserver's CPU seconds over the phases, and
	// APIServerPerRequest its ms per request (a Deployment create).
	APIServerCPU        float64 `json:"apiServerCpuSeconds"`
	APIServerPerRequest float64 `json:"apiServerCpuMsPerRequest"`
}

// PodRow is one stack's pod creations: latency, and the CPU per pod of
// the policy process (µs) and of kube-apiserver (ms).
type PodRow struct {
	LatencyRow
	CPUPerPod       float64 `json:"cpuMicrosecondsPerPod"`
	APIServerPerPod float64 `json:"apiServerCpuMsPerPod"`
}

// RulesRow is one stack with a number of extra rules, at 10 clients.
type RulesRow struct {
	Stack string  `json:"stack"`
	Rules int     `json:"rules"`
	P50   float64 `json:"p50Ms"`
	P99   float64 `json:"p99Ms"`
}

// MemoryRow is a policy process's resident memory with the bulk objects
// present and synced.
type MemoryRow struct {
	Stack string `json:"stack"`
	RSS   int64  `json:"rssBytes"`
	Peak  int64  `json:"peakRSSBytes"`
}

// DirectRow is the direct load run at configward's webhook port.
type DirectRow struct {
	Rate      float64 `json:"rate"`
	Reviews   int     `json:"reviews"`
	Errors    int     `json:"errors"`
	P50       float64 `json:"p50Ms"`
	P99       float64 `json:"p99Ms"`
	P999      float64 `json:"p999Ms"`
	CPUReview float64 `json:"cpuMicrosecondsPerReview"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func latencyRow(stack string, clients int, r Result) LatencyRow {
	row := LatencyRow{Stack: stack, Clients: clients, Requests: len(r.Latencies), Errors: r.Errors, PerSecond: r.Rate(),
		P50: ms(r.Percentile(50)), P99: ms(r.Percentile(99)), P999: ms(r.Percentile(99.9))}
	for q := 0.5; q < 100; q++ {
		row.Quantiles = append(row.Quantiles, ms(r.Percentile(q)))
	}
	row.Quantiles = append(row.Quantiles, row.P999)
	return row
}

// Write saves the report as results.json and results.md in dir.
func (r *Report) Write(dir string) error {
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
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.Markdown()), 0o644)
}

func (r *Report) baseline(clients int) *LatencyRow { return r.latency("none", clients) }

func (r *Report) latency(stack string, clients int) *LatencyRow {
	for i := range r.Latency {
		if r.Latency[i].Stack == stack && r.Latency[i].Clients == clients {
			return &r.Latency[i]
		}
	}
	return nil
}

func (r *Report) cpu(stack string) *CPURow {
	for i := range r.CPU {
		if r.CPU[i].Stack == stack {
			return &r.CPU[i]
		}
	}
	return nil
}

// The two floors (floor.go): a webhook that answers at once, and one whose
// mutating webhooks stamp one annotation, as configward's do.
const (
	floorStack         = "floor"
	stampingFloorStack = "stamping-floor"
)

func isFloorStack(stack string) bool { return stack == floorStack || stack == stampingFloorStack }

// FloorRatio is a stack measured against a floor at one concurrency: what
// it adds over no policy divided by what the floor adds, its throughput
// divided by the floor's, and kube-apiserver's CPU per request with it
// divided by that with the floor. 1 is as cheap as any webhook doing that
// floor's work can be; below 1 is cheaper than being a webhook
// (in-process).
type FloorRatio struct {
	Floor      string  `json:"floor"`
	Stack      string  `json:"stack"`
	Clients    int     `json:"clients"`
	AddedP50   float64 `json:"addedP50"`
	AddedP99   float64 `json:"addedP99"`
	Throughput float64 `json:"throughput"`
	APIServer  float64 `json:"apiServerCpu"`
}

// FloorRatios are every stack's ratios to the floor that answers at once.
func (r *Report) FloorRatios() []FloorRatio { return r.RatiosTo(floorStack) }

// RatiosTo are every stack's ratios to floor, in the order measured; none
// without that floor and a baseline measured in the same run.
func (r *Report) RatiosTo(floor string) []FloorRatio {
	var out []FloorRatio
	floorCPU := r.cpu(floor)
	for _, l := range r.Latency {
		f, base := r.latency(floor, l.Clients), r.baseline(l.Clients)
		if f == nil || base == nil || l.Stack == "none" || isFloorStack(l.Stack) {
			continue
		}
		ratios := FloorRatio{Floor: floor, Stack: l.Stack, Clients: l.Clients,
			AddedP50: ratio(l.P50-base.P50, f.P50-base.P50), AddedP99: ratio(l.P99-base.P99, f.P99-base.P99),
			Throughput: ratio(l.PerSecond, f.PerSecond)}
		if c := r.cpu(l.Stack); c != nil && floorCPU != nil {
			ratios.APIServer = ratio(c.APIServerPerRequest, floorCPU.APIServerPerRequest)
		}
		out = append(out, ratios)
	}
	return out
}

func (r *Report) pods(stack string) *PodRow {
	for i := range r.Pods {
		if r.Pods[i].Stack == stack {
			return &r.Pods[i]
		}
	}
	return nil
}

// Target is one of configward's performance targets and whether this run
// met it.
type Target struct {
	What     string
	Measured float64
	Limit    float64
	// AtMost says the measure must not exceed Limit, else reach it.
	AtMost bool
	Unit   string
}

func (t Target) Met() bool {
	if t.AtMost {
		return t.Measured <= t.Limit
	}
	return t.Measured >= t.Limit
}

// Targets are configward's targets, as measured in this run: against the
// stamping floor (issue #44) where it was measured, else against the
// floor that answers at once (issue #30); none without configward and a
// floor.
func (r *Report) Targets() []Target {
	if r.latency(stampingFloorStack, 10) != nil {
		return r.stampingTargets()
	}
	var out []Target
	for _, f := range r.FloorRatios() {
		if f.Stack != "configward" {
			continue
		}
		out = append(out, Target{What: fmt.Sprintf("added p99 at %d clients, to the floor's", f.Clients), Measured: f.AddedP99, Limit: 1.25, AtMost: true, Unit: "×"})
		if f.Clients == 10 {
			out = append(out, Target{What: "throughput at 10 clients, to the floor's", Measured: f.Throughput, Limit: 0.8, Unit: "×"},
				Target{What: "kube-apiserver CPU per Deployment, to the floor's", Measured: f.APIServer, Limit: 1.2, AtMost: true, Unit: "×"})
		}
	}
	if c := r.cpu("configward"); c != nil && c.Reviews > 0 && len(out) > 0 {
		out = append(out, Target{What: "configward CPU per review through the API server", Measured: c.PerReview, Limit: 300, AtMost: true, Unit: " µs"})
	}
	return out
}

// stampingTargets are issue #44's targets against the stamping floor.
func (r *Report) stampingTargets() []Target {
	var out []Target
	const to = ", to the stamping floor's"
	for _, f := range r.RatiosTo(stampingFloorStack) {
		if f.Stack != "configward" {
			continue
		}
		out = append(out, Target{What: fmt.Sprintf("added p99 at %d clients%s", f.Clients, to), Measured: f.AddedP99, Limit: 1.3, AtMost: true, Unit: "×"})
		if f.Clients >= 10 {
			out = append(out, Target{What: fmt.Sprintf("throughput at %d clients%s", f.Clients, to), Measured: f.Throughput, Limit: 0.85, Unit: "×"})
		}
		if f.Clients == 10 {
			out = append(out, Target{What: "kube-apiserver CPU per Deployment" + to, Measured: f.APIServer, Limit: 1.1, AtMost: true, Unit: "×"})
		}
	}
	if c, f := r.cpu("configward"), r.cpu(stampingFloorStack); c != nil && f != nil && c.Reviews > 0 && f.Reviews > 0 {
		out = append(out, Target{What: "configward CPU per review" + to, Measured: ratio(c.PerReview, f.PerReview), Limit: 1.5, AtMost: true, Unit: "×"})
	}
	if c, f, base := r.pods("configward"), r.pods(stampingFloorStack), r.pods("none"); c != nil && f != nil && base != nil {
		out = append(out, Target{What: "Pod path: added p99" + to, Measured: ratio(c.P99-base.P99, f.P99-base.P99), Limit: 1.3, AtMost: true, Unit: "×"},
			Target{What: "Pod path: CPU per pod" + to, Measured: ratio(c.CPUPerPod, f.CPUPerPod), Limit: 1.5, AtMost: true, Unit: "×"})
	}
	return out
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// Markdown renders the tables docs/evaluate/performance-and-reliability.md
// shows ("Side by side with Gatekeeper, Kyverno and ValidatingAdmissionPolicy").
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s.\n\n", r.Date, r.Machine)
	b.WriteString("| stack | clients | p50 / p99 / p99.9 (ms) | added over no policy p50 / p99 / p99.9 (ms) | req/s | errors |\n|---|---|---|---|---|---|\n")
	for _, l := range r.Latency {
		added := "—"
		if base := r.baseline(l.Clients); base != nil && l.Stack != "none" {
			added = fmt.Sprintf("%+.1f / %+.1f / %+.1f", l.P50-base.P50, l.P99-base.P99, l.P999-base.P999)
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f / %.1f / %.1f | %s | %.0f | %d |\n", l.Stack, l.Clients, l.P50, l.P99, l.P999, added, l.PerSecond, l.Errors)
	}
	for _, floor := range []struct{ stack, what string }{
		{floorStack, "the floor (a webhook that answers at once; 1.00 = the least a webhook costs)"},
		{stampingFloorStack, "the stamping floor (a webhook that stamps one pod-template annotation; 1.00 = the least a mutating webhook like configward costs)"},
	} {
		if ratios := r.RatiosTo(floor.stack); len(ratios) > 0 {
			b.WriteString("\nRatios to " + floor.what + ":\n\n" +
				"| stack | clients | added p50 | added p99 | throughput | kube-apiserver CPU per request |\n|---|---|---|---|---|---|\n")
			for _, f := range ratios {
				fmt.Fprintf(&b, "| %s | %d | %.2f× | %.2f× | %.2f× | %.2f× |\n", f.Stack, f.Clients, f.AddedP50, f.AddedP99, f.Throughput, f.APIServer)
			}
		}
	}
	if len(r.Pods) > 0 {
		b.WriteString("\nThe Pod path of config revisions: pod creates as a ReplicaSet makes them, naming their revision's snapshots, 10 clients:\n\n" +
			"| stack | p50 / p99 (ms) | added p99 over no policy | req/s | policy process CPU per pod | kube-apiserver CPU per pod | to the floor: added p99, throughput, kube-apiserver CPU, policy CPU | to the stamping floor: the same | errors |\n|---|---|---|---|---|---|---|---|---|\n")
		base := r.pods("none")
		for _, p := range r.Pods {
			added, toFloor := "—", [2]string{"—", "—"}
			if base != nil && p.Stack != "none" {
				added = fmt.Sprintf("%+.1f ms", p.P99-base.P99)
				for i, floor := range []*PodRow{r.pods(floorStack), r.pods(stampingFloorStack)} {
					if floor != nil && !isFloorStack(p.Stack) {
						toFloor[i] = fmt.Sprintf("%.2f× / %.2f× / %.2f× / %.2f×", ratio(p.P99-base.P99, floor.P99-base.P99), ratio(p.PerSecond, floor.PerSecond),
							ratio(p.APIServerPerPod, floor.APIServerPerPod), ratio(p.CPUPerPod, floor.CPUPerPod))
					}
				}
			}
			fmt.Fprintf(&b, "| %s | %.1f / %.1f | %s | %.0f | %.0f µs | %.2f ms | %s | %s | %d |\n", p.Stack, p.P50, p.P99, added, p.PerSecond, p.CPUPerPod, p.APIServerPerPod, toFloor[0], toFloor[1], p.Errors)
		}
	}
	if targets := r.Targets(); len(targets) > 0 {
		b.WriteString("\n| configward's target | measured | target | met |\n|---|---|---|---|\n")
		for _, t := range targets {
			op, met := "≥", "no"
			if t.AtMost {
				op = "≤"
			}
			if t.Met() {
				met = "yes"
			}
			fmt.Fprintf(&b, "| %s | %.2f%s | %s %.2f%s | %s |\n", t.What, t.Measured, t.Unit, op, t.Limit, t.Unit, met)
		}
	}
	b.WriteString("\n| stack | requests | policy process CPU s per 1,000 requests | µs per review | kube-apiserver CPU ms per request | peak RSS |\n|---|---|---|---|---|---|\n")
	for _, c := range r.CPU {
		perReview := "—"
		if c.Reviews > 0 {
			perReview = fmt.Sprintf("%.0f (%d reviews)", c.PerReview, c.Reviews)
		}
		fmt.Fprintf(&b, "| %s | %d | %.3f | %s | %.2f | %.0f MiB |\n", c.Stack, c.Requests, c.PerThousand, perReview, c.APIServerPerRequest, float64(c.PeakRSS)/(1<<20))
	}
	b.WriteString("\n| stack | extra rules | p50 / p99 at 10 clients (ms) |\n|---|---|---|\n")
	for _, x := range r.Rules {
		fmt.Fprintf(&b, "| %s | %d | %.1f / %.1f |\n", x.Stack, x.Rules, x.P50, x.P99)
	}
	if len(r.Memory) > 0 {
		b.WriteString("\n| stack | RSS with 10,000 ConfigMaps + 10,000 Secrets (10 KiB) + 5,000 Pods | peak |\n|---|---|---|\n")
		for _, m := range r.Memory {
			fmt.Fprintf(&b, "| %s | %.0f MiB | %.0f MiB |\n", m.Stack, float64(m.RSS)/(1<<20), float64(m.Peak)/(1<<20))
		}
	}
	if d := r.Direct; d != nil {
		fmt.Fprintf(&b, "\nDirect at configward's webhook port, one core: %d reviews at %.0f/s: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, %.0f µs CPU per review, %d errors.\n",
			d.Reviews, d.Rate, d.P50, d.P99, d.P999, d.CPUReview, d.Errors)
	}
	return b.String()
}
