package report

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/rules"
)

var web = Subject("apps/v1", "Deployment", "shop", "web", "u-1")

// forWorkload is the Report of a workload with only its config-current result.
func forWorkload(s drift.Status, prev *openreports.Report, now time.Time) *openreports.Report {
	return Build(web, []openreports.ReportResult{ConfigCurrentResult(s)}, prev, now)
}

func status(state drift.State) drift.Status {
	return drift.Status{
		Workload: drift.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "u-1",
			Template: "new", Wanted: "new"},
		State:     state,
		Changed:   []string{"ConfigMap/web-config", "Secret/db"},
		ChangedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	}
}

// Unchanged facts give an equal Report, so the controller writes nothing;
// a change of state is a new result with a new timestamp.
func TestForWorkloadOnlyChangesWithTheFacts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)
	first := forWorkload(status(drift.Progressing), nil, t0)
	again := forWorkload(status(drift.Progressing), first, t0.Add(time.Minute))
	if Differs(first, again) {
		t.Fatalf("the same facts a minute later differ:\n%+v\n%+v", first.Results, again.Results)
	}
	done := forWorkload(status(drift.Done), first, t0.Add(time.Minute))
	if !Differs(first, done) {
		t.Fatal("progressing → done is no difference")
	}
	r := done.Results[0]
	if r.Result != "pass" || r.Severity != "" || r.Timestamp.Seconds != t0.Add(time.Minute).Unix() || done.Summary.Pass != 1 || done.Summary.Fail != 0 {
		t.Fatalf("done result = %+v, summary %+v", r, done.Summary)
	}
	if first.Results[0].Result != "fail" || first.Summary.Fail != 1 {
		t.Fatalf("progressing result = %+v", first.Results[0])
	}
}

func TestForWorkloadNamesAndOwners(t *testing.T) {
	r := forWorkload(status(drift.Done), nil, time.Now())
	if r.Name != "configward-u-1" || r.Namespace != "shop" || r.Source != "configward" || r.Labels[ManagedByLabel] != "configward" {
		t.Fatalf("metadata = %+v", r.ObjectMeta)
	}
	if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != "u-1" || r.OwnerReferences[0].Controller != nil || r.OwnerReferences[0].BlockOwnerDeletion != nil {
		t.Fatalf("owners = %+v", r.OwnerReferences)
	}
	if r.Scope.Kind != "Deployment" || r.Scope.Name != "web" || r.Results[0].Subjects[0] != *r.Scope {
		t.Fatalf("scope %+v, subjects %+v", r.Scope, r.Results[0].Subjects)
	}
	// The field names OpenReports' CRD uses, not the Go ones.
	js, _ := json.Marshal(r.Results[0])
	var m map[string]any
	_ = json.Unmarshal(js, &m)
	for _, f := range []string{"resources", "message", "properties", "policy", "rule", "result", "timestamp", "source"} {
		if _, ok := m[f]; !ok {
			t.Errorf("result JSON has no %q: %s", f, js)
		}
	}
}

// A restarted controller reads the last change back from the Report, but
// only while the config still gives the hash it was written for.
func TestLastChange(t *testing.T) {
	s := status(drift.Progressing)
	r := forWorkload(s, nil, time.Now())
	got, at := LastChange(r, "new")
	if !reflect.DeepEqual(got, s.Changed) || !at.Equal(s.ChangedAt) {
		t.Fatalf("LastChange = %q at %v, want %q at %v", got, at, s.Changed, s.ChangedAt)
	}
	if got, _ := LastChange(r, "newer"); got != nil {
		t.Fatalf("LastChange for another hash = %q", got)
	}
	if got, _ := LastChange(nil, "new"); got != nil {
		t.Fatalf("LastChange of no Report = %q", got)
	}
}

func TestMessage(t *testing.T) {
	s := status(drift.NotRolled)
	s.Hold = drift.Hold{Reason: "paused", Why: "the Deployment is paused", Until: "it is resumed (kubectl rollout resume)"}
	want := "ConfigMap/web-config, Secret/db changed, but the Deployment is paused: running pods keep the old config until it is resumed (kubectl rollout resume)"
	if got := Message(s); got != want {
		t.Fatalf("Message = %q\nwant      %q", got, want)
	}
}

// Findings become results by the action the policies give them; a result
// that did not change keeps its timestamp while another one changes.
func TestFindingResultsAndTheirOrder(t *testing.T) {
	out := rules.Outcome{Decision: rules.Decision{
		Denied:  []rules.Finding{{Rule: "subpath-config", Message: "denied", Path: "spec.b"}},
		Warned:  []rules.Finding{{Rule: "secret-in-env", Message: "warned", Path: "spec.a"}},
		Audited: []rules.Finding{{Rule: "secret-file-mode", Message: "audited", Path: "spec.c"}, {Rule: "hot-config-in-env", Message: "exempt", Path: "spec.d", Exemption: "legacy"}},
	}}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	results := append([]openreports.ReportResult{ConfigCurrentResult(status(drift.Done))}, FindingResults(out)...)
	r := Build(web, results, nil, t0)
	var got []string
	for _, res := range r.Results {
		got = append(got, fmt.Sprintf("%s %s %s %s", res.Rule, res.Result, res.Severity, res.Properties[PropAction]))
	}
	want := []string{
		"config-current pass  ",
		"hot-config-in-env skip  Audit",
		"secret-file-mode warn low Audit",
		"secret-in-env warn medium Warn",
		"subpath-config fail high Deny",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results:\n%q\nwant\n%q", got, want)
	}
	if r.Summary != (openreports.ReportSummary{Pass: 1, Fail: 1, Warn: 2, Skip: 1}) {
		t.Fatalf("summary = %+v", r.Summary)
	}
	if r.Results[1].Properties[PropExemption] != "legacy" || r.Results[4].Subjects[0] != web {
		t.Fatalf("results = %+v", r.Results)
	}

	out.Warned = nil
	results = append([]openreports.ReportResult{ConfigCurrentResult(status(drift.Done))}, FindingResults(out)...)
	again := Build(web, results, r, t0.Add(time.Hour))
	if !Differs(r, again) || len(again.Results) != 4 {
		t.Fatalf("a fixed finding left the Report as it was: %+v", again.Results)
	}
	for _, res := range again.Results {
		if res.Timestamp.Seconds != t0.Unix() {
			t.Fatalf("%s got a new timestamp though it did not change", res.Rule)
		}
	}
}

// However many findings a workload has, its Report stays far below the
// API server's object size limit (1.5 MiB).
func TestBuildBoundsTheReport(t *testing.T) {
	var out rules.Outcome
	for i := range 1000 {
		out.Warned = append(out.Warned, rules.Finding{Rule: "secret-in-env", Path: fmt.Sprintf("spec.template.spec.containers[0].env[%d]", i),
			Message: strings.Repeat("Secret db-credentials key password is passed as an environment variable. ", 3)})
	}
	r := Build(web, append([]openreports.ReportResult{ConfigCurrentResult(status(drift.Done))}, FindingResults(out)...), nil, time.Now())
	if len(r.Results) != MaxResults || r.Results[0].Rule != ConfigCurrent {
		t.Fatalf("%d results, first %s", len(r.Results), r.Results[0].Rule)
	}
	if r.Summary != (openreports.ReportSummary{Pass: 1, Warn: 1000}) {
		t.Fatalf("summary %+v: it must count the results cut too", r.Summary)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(js) > 512*1024 {
		t.Fatalf("a Report of %d bytes", len(js))
	}
}

// TestDeliveryResultSaysWhy: a workload whose wave halted carries the
// delivery's reason (a failed check's query, value and threshold) and the
// last measurement of each check of its wave.
func TestDeliveryResultSaysWhy(t *testing.T) {
	p := delivery.Position{Record: "configmap-cfg-1", Config: "ConfigMap/cfg", Wave: "canary", Index: 0, Waves: 2, Started: true, RolledBack: true,
		State: v1alpha1.DeliveryHalted, CurrentWave: "canary", Message: `wave canary failed its analysis: check error-ratio (query "q"): Failed: 0.2 > max 0.01`,
		Checks: []v1alpha1.CheckStatus{{Name: "error-ratio", Result: "Failed", Message: "0.2 > max 0.01", Measurements: 1, Failures: 1}}}
	res := DeliveryResult(p)
	if res.Result != "fail" || !strings.Contains(res.Description, "0.2 > max 0.01") || !strings.Contains(res.Description, "went back to its previous revision") {
		t.Errorf("result %s: %q, want a failure saying the check's value and threshold and the rollback", res.Result, res.Description)
	}
	if got := res.Properties["check/error-ratio"]; got != "Failed: 0.2 > max 0.01 (1 measured, 1 failed)" {
		t.Errorf("check property %q", got)
	}
}
