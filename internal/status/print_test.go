package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/reload"
)

// Hot config gets a table of its own under the workloads', one row per
// workload and config, and a note for each rejection and for pods left
// without an agent beside pods that have one.
func TestPrintTableShowsHotConfig(t *testing.T) {
	res := Result{Items: []Item{
		{Kind: "Deployment", Name: "checkout", State: "done", Pods: drift.Pods{Current: 2},
			Reloads: []Reload{{Config: "ConfigMap/checkout-flags", Tally: reload.Tally{Pods: map[reload.PodState]int{reload.StateNoAgent: 2}}}}},
		{Kind: "Deployment", Name: "storefront", State: HotOnly, Reloads: []Reload{{Config: "ConfigMap/storefront-flags", Tally: reload.Tally{
			Pods:       map[reload.PodState]int{reload.StateApplied: 2, reload.StateRejected: 1, reload.StateNoAgent: 1},
			Rejections: []reload.Rejection{{Pod: "storefront-x", Message: "line 1: bad"}}}}}},
	}}
	var out bytes.Buffer
	if err := PrintTable(&out, res, false, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Deployment/checkout  2/2",
		"Hot config (reloaded in place; pods as their reload agents report):",
		"WORKLOAD               CONFIG                      APPLIED  UNCONFIRMED  REJECTED  OLDER  PENDING  NO AGENT",
		"Deployment/checkout    ConfigMap/checkout-flags    0        0            0         0      0        2",
		"Deployment/storefront  ConfigMap/storefront-flags  2        0            1         0      0        1",
		"Deployment/storefront: the program of pod storefront-x rejected ConfigMap/storefront-flags: line 1: bad",
		"Deployment/storefront: 1 pod(s) run no reload agent",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Deployment/storefront  -") || strings.Count(got, "Deployment/storefront") != 3 {
		t.Errorf("a hot-only workload is in the first table:\n%s", got)
	}
	if strings.Contains(got, "Deployment/checkout: 2 pod(s) run no reload agent") {
		t.Errorf("a workload that never asked for the agent gets a note:\n%s", got)
	}
	if !res.Stale() || !res.Rejected() || res.Settled() {
		t.Errorf("stale %v rejected %v settled %v: a rejection is stale, and nothing is settled", res.Stale(), res.Rejected(), res.Settled())
	}
}

// ConfigSets get a table of their own, and a set that is not Ready a note
// saying what it waits for or why it stopped.
func TestPrintTableShowsConfigSets(t *testing.T) {
	res := Result{Sets: []Set{
		{Namespace: "shop", Name: "checkout", Version: "v3", Condition: "Stalled", Reason: "TimedOut", Message: "ConfigMap/b did not carry version v3 within 300s"},
		{Namespace: "shop", Name: "payments", Version: "v1", Condition: "Ready", Reason: "Delivered", Message: "version v1 is delivered"},
	}}
	var out bytes.Buffer
	if err := PrintTable(&out, res, false, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Config sets (members delivered together):",
		"SET                 VERSION  CONDITION  REASON",
		"ConfigSet/checkout  v3       Stalled    TimedOut",
		"ConfigSet/payments  v1       Ready      Delivered",
		"ConfigSet/checkout: ConfigMap/b did not carry version v3 within 300s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ConfigSet/payments: ") {
		t.Errorf("a Ready set gets a note:\n%s", got)
	}
}

// Served certificates get a table of their own: pods by their worst port,
// when the earliest presented certificate ends, and a note per stale port
// naming the serials and the cert-manager Certificate.
func TestPrintTableShowsServedCertificates(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	soon, gone := now.Add(49*time.Hour), now.Add(-time.Hour)
	res := Result{Items: []Item{
		{Kind: "Deployment", Name: "web", State: HotOnly, Certificates: &reload.CertTally{
			Pods: map[string]int{reload.CertCurrent: 1, reload.CertStale: 1}, Expires: &soon,
			Stale: []reload.StalePort{{Pod: "web-b", Port: 8443, Secret: "web-tls", Certificate: "web", Presented: "0A", Mounted: "0B", Since: now.Add(-7 * time.Minute)}}}},
		{Kind: "Deployment", Name: "old", State: HotOnly, Certificates: &reload.CertTally{Pods: map[string]int{reload.CertCurrent: 1}, Expires: &gone}},
	}}
	var out bytes.Buffer
	if err := PrintTable(&out, res, false, false, now); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"WORKLOAD        CURRENT  STALE  OTHER  UNREACHABLE  PENDING  EXPIRES IN",
		"Deployment/web  1        1      0      0            0        2d1h",
		"Deployment/old  1        0      0      0            0        expired",
		"Deployment/web: pod web-b port 8443 presents certificate serial 0A, mounts serial 0B from Secret web-tls (Certificate web): stale for 7m",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}
