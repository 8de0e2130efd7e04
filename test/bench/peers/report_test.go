package peers

import (
	"math"
	"strings"
	"testing"
)

// The ratios to the floor are what the README's targets are read from: a
// stack's added latency over no policy divided by the floor's, its
// throughput and kube-apiserver CPU per request divided by the floor's.
func TestFloorRatios(t *testing.T) {
	r := &Report{
		Latency: []LatencyRow{
			{Stack: "none", Clients: 10, P50: 8, P99: 20, PerSecond: 1000},
			{Stack: "floor", Clients: 10, P50: 14, P99: 36, PerSecond: 500},
			{Stack: "configward", Clients: 10, P50: 20, P99: 56, PerSecond: 375},
			{Stack: "configward", Clients: 50, P50: 20, P99: 56, PerSecond: 375}, // no floor at 50: no ratio
		},
		CPU: []CPURow{
			{Stack: "floor", APIServerPerRequest: 2.5, Reviews: 100, PerReview: 200},
			{Stack: "configward", APIServerPerRequest: 3.25, Reviews: 100, PerReview: 450},
		},
	}
	got := r.FloorRatios()
	if len(got) != 1 {
		t.Fatalf("ratios %+v, want one (configward at 10 clients)", got)
	}
	want := FloorRatio{Stack: "configward", Clients: 10, AddedP50: 2, AddedP99: 2.25, Throughput: 0.75, APIServer: 1.3}
	for name, pair := range map[string][2]float64{
		"added p50": {got[0].AddedP50, want.AddedP50}, "added p99": {got[0].AddedP99, want.AddedP99},
		"throughput": {got[0].Throughput, want.Throughput}, "kube-apiserver CPU": {got[0].APIServer, want.APIServer},
	} {
		if math.Abs(pair[0]-pair[1]) > 1e-9 {
			t.Errorf("%s ratio %v, want %v", name, pair[0], pair[1])
		}
	}
	met := map[string]bool{}
	for _, target := range r.Targets() {
		met[target.What] = target.Met()
	}
	if met["added p99 at 10 clients, to the floor's"] || met["throughput at 10 clients, to the floor's"] ||
		met["kube-apiserver CPU per Deployment, to the floor's"] || met["configward CPU per review through the API server"] || len(met) != 4 {
		t.Errorf("targets %v, want four, none met", met)
	}
	if md := r.Markdown(); !strings.Contains(md, "| configward | 10 | 2.00× | 2.25× | 0.75× | 1.30× |") {
		t.Errorf("the markdown lacks the ratio row:\n%s", md)
	}
}

// With the stamping floor measured, configward's targets are issue #44's,
// against it: added p99 at every concurrency, throughput at 10 and 50
// clients, kube-apiserver CPU, configward's CPU per review to the floor's,
// and the Pod path's added p99 and CPU per pod.
func TestStampingFloorTargets(t *testing.T) {
	r := &Report{
		Latency: []LatencyRow{
			{Stack: "none", Clients: 10, P50: 8, P99: 20, PerSecond: 1000},
			{Stack: "floor", Clients: 10, P50: 12, P99: 30, PerSecond: 600},
			{Stack: "stamping-floor", Clients: 10, P50: 14, P99: 36, PerSecond: 500},
			{Stack: "configward", Clients: 10, P50: 16, P99: 40, PerSecond: 450},
		},
		CPU: []CPURow{
			{Stack: "floor", APIServerPerRequest: 2, Reviews: 100, PerReview: 150},
			{Stack: "stamping-floor", APIServerPerRequest: 2.5, Reviews: 100, PerReview: 200},
			{Stack: "configward", APIServerPerRequest: 2.6, Reviews: 100, PerReview: 320},
		},
		Pods: []PodRow{
			{LatencyRow: LatencyRow{Stack: "none", P99: 10, PerSecond: 900}},
			{LatencyRow: LatencyRow{Stack: "stamping-floor", P99: 20, PerSecond: 600}, CPUPerPod: 100},
			{LatencyRow: LatencyRow{Stack: "configward", P99: 24, PerSecond: 550}, CPUPerPod: 160},
		},
	}
	got, met := map[string]float64{}, map[string]bool{}
	for _, target := range r.Targets() {
		got[target.What], met[target.What] = target.Measured, target.Met()
	}
	for what, want := range map[string]bool{
		"added p99 at 10 clients, to the stamping floor's": true, "configward CPU per review, to the stamping floor's": false,
		"Pod path: added p99, to the stamping floor's": false, "Pod path: CPU per pod, to the stamping floor's": false,
	} {
		if met[what] != want {
			t.Errorf("%s met: %v, want %v", what, met[what], want)
		}
	}
	want := map[string]float64{
		"added p99 at 10 clients, to the stamping floor's":           1.25,
		"throughput at 10 clients, to the stamping floor's":          0.9,
		"kube-apiserver CPU per Deployment, to the stamping floor's": 1.04,
		"configward CPU per review, to the stamping floor's":         1.6,
		"Pod path: added p99, to the stamping floor's":               1.4,
		"Pod path: CPU per pod, to the stamping floor's":             1.6,
	}
	for what, w := range want {
		if math.Abs(got[what]-w) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got[what], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("targets %v, want %d", got, len(want))
	}
	md := r.Markdown()
	for _, row := range []string{"Ratios to the floor", "Ratios to the stamping floor", "| configward | 10 | 1.33× | 1.25× | 0.90× | 1.04× |", "| 1.40× / 0.92× / 0.00× / 1.60× |"} {
		if !strings.Contains(md, row) {
			t.Errorf("the markdown lacks %q:\n%s", row, md)
		}
	}
}
