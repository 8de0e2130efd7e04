package report

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/configward/configward/internal/drift"
)

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
	first := ForWorkload(status(drift.Progressing), nil, t0)
	again := ForWorkload(status(drift.Progressing), first, t0.Add(time.Minute))
	if Differs(first, again) {
		t.Fatalf("the same facts a minute later differ:\n%+v\n%+v", first.Results, again.Results)
	}
	done := ForWorkload(status(drift.Done), first, t0.Add(time.Minute))
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
	r := ForWorkload(status(drift.Done), nil, time.Now())
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
	r := ForWorkload(s, nil, time.Now())
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
