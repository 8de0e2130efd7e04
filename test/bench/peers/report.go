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
	CPU      []CPURow          `json:"cpu"`
	Rules    []RulesRow        `json:"rules"`
	Memory   []MemoryRow       `json:"memory"`
	Direct   *DirectRow        `json:"direct,omitempty"`
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

// CPURow is the policy process over the three concurrency phases.
type CPURow struct {
	Stack    string  `json:"stack"`
	Requests int     `json:"requests"`
	CPU      float64 `json:"cpuSeconds"`
	// PerThousand is CPU seconds per 1,000 requests.
	PerThousand float64 `json:"cpuSecondsPer1000"`
	PeakRSS     int64   `json:"peakRSSBytes"`
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

func (r *Report) baseline(clients int) *LatencyRow {
	for i := range r.Latency {
		if r.Latency[i].Stack == "none" && r.Latency[i].Clients == clients {
			return &r.Latency[i]
		}
	}
	return nil
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
	b.WriteString("\n| stack | requests | CPU s per 1,000 requests | peak RSS |\n|---|---|---|---|\n")
	for _, c := range r.CPU {
		fmt.Fprintf(&b, "| %s | %d | %.3f | %.0f MiB |\n", c.Stack, c.Requests, c.PerThousand, float64(c.PeakRSS)/(1<<20))
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
