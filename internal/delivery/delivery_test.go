package delivery

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

func names(waves []v1alpha1.WaveStatus) [][]string {
	var out [][]string
	for _, w := range waves {
		var ns []string
		for _, t := range w.Workloads {
			ns = append(ns, t.Name)
		}
		out = append(out, ns)
	}
	return out
}

func TestPlace(t *testing.T) {
	var consumers []Consumer
	for i := 9; i >= 0; i-- { // given in reverse: placement sorts
		c := Consumer{Kind: "Deployment", Name: fmt.Sprintf("app-%d", i), From: "old"}
		if i == 7 {
			c.Labels = map[string]string{v1alpha1.WaveLabel: "canary"}
		}
		consumers = append(consumers, c)
	}
	pct := func(n int32) *int32 { return &n }
	canary := &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.WaveLabel: "canary"}}
	for _, tc := range []struct {
		name  string
		waves []v1alpha1.Wave
		want  [][]string
	}{
		{"canary, 30 percent rounded up, rest", []v1alpha1.Wave{{Name: "canary", Selector: canary}, {Name: "early", Percent: pct(30)}, {Name: "rest"}},
			[][]string{{"app-7"}, {"app-0", "app-1", "app-2"}, {"app-3", "app-4", "app-5", "app-6", "app-8", "app-9"}}},
		{"a percent takes at least one", []v1alpha1.Wave{{Name: "one", Percent: pct(1)}, {Name: "rest"}},
			[][]string{{"app-0"}, {"app-1", "app-2", "app-3", "app-4", "app-5", "app-6", "app-7", "app-8", "app-9"}}},
		{"empty waves are skipped, the unselected go last", []v1alpha1.Wave{{Name: "none", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}, {Name: "canary", Selector: canary}},
			[][]string{{"app-7", "app-0", "app-1", "app-2", "app-3", "app-4", "app-5", "app-6", "app-8", "app-9"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(Place(tc.waves, consumers))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
