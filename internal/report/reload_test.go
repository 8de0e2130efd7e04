package report

import (
	"strings"
	"testing"

	"github.com/configward/configward/internal/reload"
)

// A config-reload result says where a workload's pods stand as a whole,
// never how many: counts would rewrite the Report with every pod's report.
func TestReloadResult(t *testing.T) {
	for name, tc := range map[string]struct {
		tally  reload.Tally
		result string
		says   string
	}{
		"every agent applied":           {reload.Tally{Pods: map[reload.PodState]int{reload.StateApplied: 3, reload.StateNoAgent: 1}}, "pass", "every pod with a reload agent has the current content"},
		"unconfirmed counts as reached": {reload.Tally{Pods: map[reload.PodState]int{reload.StateUnconfirmed: 2}}, "pass", "every pod"},
		"pods on their way":             {reload.Tally{Pods: map[reload.PodState]int{reload.StateApplied: 1, reload.StateOlder: 2}}, "warn", "taking the current content in"},
		"pods not reported yet":         {reload.Tally{Pods: map[reload.PodState]int{reload.StatePending: 1}}, "warn", "taking the current content in"},
		"a program rejected it": {reload.Tally{Pods: map[reload.PodState]int{reload.StateApplied: 1, reload.StateRejected: 1},
			Rejections: []reload.Rejection{{Pod: "web-1", Message: "line 1: bad"}}}, "fail", "the program of pod web-1 rejected the current content (line 1: bad)"},
		"no agent anywhere": {reload.Tally{Pods: map[reload.PodState]int{reload.StateNoAgent: 2}}, "skip", "no pod runs configward's reload agent"},
	} {
		r := ReloadResult("ConfigMap/flags", "hmac-sha256:abc", tc.tally)
		if string(r.Result) != tc.result || !strings.Contains(r.Description, tc.says) {
			t.Errorf("%s: %s %q, want %s saying %q", name, r.Result, r.Description, tc.result, tc.says)
		}
		if r.Rule != ConfigReload || r.Properties[PropConfig] != "ConfigMap/flags" || r.Properties[PropContent] != "hmac-sha256:abc" {
			t.Errorf("%s: %+v", name, r)
		}
		for _, digit := range "0123456789" {
			if strings.ContainsRune(r.Description, digit) && tc.result != "fail" {
				t.Errorf("%s: the description %q carries a count", name, r.Description)
			}
		}
	}
}
