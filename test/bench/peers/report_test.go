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
