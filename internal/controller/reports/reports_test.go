package reports

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/report"
)

// The drift controller's decisions that need no cluster; suite_test.go
// runs it against kube-apiserver.

func status(name string, current, stale int) drift.Status {
	return drift.Status{Workload: drift.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		Pods: drift.Pods{Current: current, Stale: stale}}
}

func TestStaleCounts(t *testing.T) {
	for _, tc := range []struct {
		name            string
		statuses        []drift.Status
		workloads, pods int
	}{
		{name: "none"},
		{name: "every pod current", statuses: []drift.Status{status("a", 3, 0)}},
		{name: "stale pods of two workloads", statuses: []drift.Status{status("a", 1, 2), status("b", 3, 0), status("c", 0, 4)}, workloads: 2, pods: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w, p := staleCounts(tc.statuses); w != tc.workloads || p != tc.pods {
				t.Errorf("staleCounts = %d workloads, %d pods; want %d, %d", w, p, tc.workloads, tc.pods)
			}
		})
	}
}

// storedReport is the Report written for a workload whose config-current
// result named changed at at, for the hash wanted.
func storedReport(wanted string, changed []string, at time.Time) *openreports.Report {
	s := status("web", 1, 0)
	s.Wanted, s.Template, s.State, s.Changed, s.ChangedAt = wanted, wanted, drift.Done, changed, at
	return report.Build(report.Subject(s.APIVersion, s.Kind, s.Namespace, s.Name, s.UID), []openreports.ReportResult{report.ConfigCurrentResult(s)}, nil, at)
}

func TestLastChange(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	logged, loggedAt := []string{"ConfigMap/app"}, now.Add(-time.Minute)
	storedAt := now.Add(-time.Hour)
	stored := storedReport("hash-now", []string{"Secret/creds"}, storedAt)
	rotation := []string{"SecretProviderClass/vault"}
	for _, tc := range []struct {
		name    string
		logged  []string
		stored  *openreports.Report
		rotated []string
		want    []string
		wantAt  time.Time
	}{
		{name: "what the rollout controller logged", logged: logged, stored: stored, want: logged, wantAt: loggedAt},
		{name: "nothing logged (a restart): what the Report said for the hash wanted now", stored: stored, want: []string{"Secret/creds"}, wantAt: storedAt},
		{name: "nothing logged, and the Report was for another hash", stored: storedReport("hash-before", []string{"Secret/creds"}, storedAt)},
		{name: "nothing known"},
		{name: "a rotation nothing logged is the last change, first seen now", logged: logged, stored: stored, rotated: rotation, want: rotation, wantAt: now},
		{name: "a rotation the Report named already keeps its time", logged: logged, stored: storedReport("hash-now", rotation, storedAt), rotated: rotation, want: rotation, wantAt: storedAt},
		{name: "a rotation the rollout controller logged", logged: rotation, stored: stored, rotated: rotation, want: rotation, wantAt: loggedAt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := time.Time{}
			if tc.logged != nil {
				at = loggedAt
			}
			got, gotAt := lastChange(tc.logged, at, tc.stored, "hash-now", tc.rotated, now)
			if !slices.Equal(got, tc.want) || !gotAt.Equal(tc.wantAt) {
				t.Errorf("lastChange = %v at %s, want %v at %s", got, gotAt, tc.want, tc.wantAt)
			}
		})
	}
	if !names([]string{"a", "b"}, []string{"b"}) || names([]string{"a"}, []string{"a", "b"}) || !names(nil, nil) {
		t.Error("names says whether causes name every one wanted")
	}
}

func TestReportWrites(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pass := func(s drift.Status) []subjectResults {
		s.Wanted, s.Template, s.State = "h", "h", drift.Done
		return []subjectResults{{subject: report.Subject(s.APIVersion, s.Kind, s.Namespace, s.Name, s.UID),
			results: []openreports.ReportResult{report.ConfigCurrentResult(s)}}}
	}
	fail := func(s drift.Status) []subjectResults {
		s.Wanted, s.Template, s.State = "h", "h", drift.Progressing
		return []subjectResults{{subject: report.Subject(s.APIVersion, s.Kind, s.Namespace, s.Name, s.UID),
			results: []openreports.ReportResult{report.ConfigCurrentResult(s)}}}
	}
	// built is the Report the results give, as stored at version rv.
	built := func(parts []subjectResults, rv string) *openreports.Report {
		creates, _, _ := reportWrites(map[types.UID][]subjectResults{parts[0].subject.UID: parts}, nil, now.Add(-time.Hour))
		creates[0].ResourceVersion, creates[0].UID = rv, types.UID("report-"+rv)
		return creates[0]
	}
	same, changed, gone, empty := status("same", 1, 0), status("changed", 1, 0), status("gone", 1, 0), status("empty", 1, 0)
	fresh := status("fresh", 1, 0)
	results := map[types.UID][]subjectResults{
		same.UID:    pass(same),
		changed.UID: fail(changed),
		fresh.UID:   pass(fresh),
		// An object whose every source had nothing to say.
		empty.UID: {{subject: report.Subject("v1", "ConfigMap", "shop", "empty", empty.UID)}},
	}
	stored := map[string]*openreports.Report{
		report.Name(same.UID):    built(pass(same), "11"),
		report.Name(changed.UID): built(pass(changed), "12"),
		report.Name(gone.UID):    built(pass(gone), "13"),
		report.Name(empty.UID):   built(pass(empty), "14"),
	}
	creates, updates, deletes := reportWrites(results, stored, now)
	nameOf := func(rs []*openreports.Report) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := nameOf(creates); !slices.Equal(got, []string{report.Name(fresh.UID)}) {
		t.Errorf("creates %v, want only the Report of the object that has none", got)
	}
	if got := nameOf(updates); !slices.Equal(got, []string{report.Name(changed.UID)}) {
		t.Errorf("updates %v, want only the Report whose results changed (one whose results did not is not written)", got)
	} else if updates[0].ResourceVersion != "12" || updates[0].Results[0].Result != "fail" {
		t.Errorf("the update is at version %q with result %q, want the stored version 12 and the new result", updates[0].ResourceVersion, updates[0].Results[0].Result)
	}
	if got := nameOf(deletes); !slices.Equal(got, []string{report.Name(empty.UID), report.Name(gone.UID)}) {
		t.Errorf("deletes %v, want the Reports of objects with nothing left to report", got)
	} else if deletes[0].UID == "" {
		t.Error("a delete names no UID: it could delete a Report written again meanwhile")
	}
}

func TestHeldResults(t *testing.T) {
	web, api, worker := status("web", 1, 0), status("api", 1, 0), status("worker", 1, 0)
	rollout := status("canary", 1, 0)
	rollout.APIVersion, rollout.Kind = "argoproj.io/v1alpha1", "Rollout"
	statuses := []drift.Status{web, api, worker, rollout}
	position := func(wave string, started bool, state v1alpha1.DeliveryState) delivery.Position {
		return delivery.Position{Record: "configmap-app-1", Config: "ConfigMap/app", Wave: wave, Waves: 2, Started: started, State: state, CurrentWave: wave}
	}
	positions := map[string][]delivery.Position{
		"Deployment/web":                 {position("canary", true, v1alpha1.DeliveryProgressing)},
		"Deployment/api":                 {position("rest", false, v1alpha1.DeliveryProgressing)},
		"Deployment/worker":              {position("rest", false, v1alpha1.DeliveryHalted)},
		"Rollout.argoproj.io/canary":     {position("canary", true, v1alpha1.DeliveryProgressing)},
		"Deployment/not-in-itsnamespace": {position("canary", true, v1alpha1.DeliveryProgressing)},
	}
	got := heldResults(positions, statuses)
	var with []string
	for i := range statuses {
		if len(got[i]) > 0 {
			with = append(with, statuses[i].Name)
		}
	}
	// A held workload gets its result when its wave starts, or when the
	// delivery halts: not at placement, which would rewrite every Report
	// at once.
	if want := []string{"web", "worker", "canary"}; !slices.Equal(with, want) {
		t.Errorf("results for %v, want %v", with, want)
	}
	if heldResults(nil, statuses) != nil {
		t.Error("results without an open delivery")
	}
}

func TestConfigMapKey(t *testing.T) {
	gov := []configschema.Governing{{Name: "app", Generation: 2}}
	base := configMapKey("10", "rules-a", 1, "", gov)
	for what, key := range map[string]string{
		"the ConfigMap changed":              configMapKey("11", "rules-a", 1, "", gov),
		"the rules in force changed":         configMapKey("10", "rules-b", 1, "", gov),
		"the namespace changed":              configMapKey("10", "rules-a", 2, "", gov),
		"the schema it names is missing":     configMapKey("10", "rules-a", 1, "gone", gov),
		"its schema has a new generation":    configMapKey("10", "rules-a", 1, "", []configschema.Governing{{Name: "app", Generation: 3}}),
		"its schema's new generation failed": configMapKey("10", "rules-a", 1, "", []configschema.Governing{{Name: "app", Generation: 2, Err: errors.New("bad")}}),
		"another schema governs it too":      configMapKey("10", "rules-a", 1, "", append(gov, configschema.Governing{Name: "more", Generation: 1})),
	} {
		if key == base {
			t.Errorf("%s, but the cached results are kept (key %q)", what, key)
		}
	}
	if again := configMapKey("10", "rules-a", 1, "", []configschema.Governing{{Name: "app", Generation: 2}}); again != base {
		t.Errorf("nothing changed, but the key did: %q, then %q", base, again)
	}
}

func TestFindingsCache(t *testing.T) {
	e := newFindingsEvaluator(nil, nil, nil, nil, nil)
	results := []openreports.ReportResult{{Rule: "subpath-config", Result: "warn"}}
	e.keep("a", "shop", "key-1", results)
	e.keep("b", "shop", "key-1", results)
	e.keep("c", "other", "key-1", results)
	if got, ok := e.lookup("a", "key-1"); !ok || fmt.Sprint(got) != fmt.Sprint(results) {
		t.Errorf("lookup with the key kept = %v, %v", got, ok)
	}
	if _, ok := e.lookup("a", "key-2"); ok {
		t.Error("results kept under another key are used")
	}
	e.retain("shop", map[types.UID]bool{"a": true})
	if _, ok := e.lookup("b", "key-1"); ok {
		t.Error("the results of an object no longer in its namespace are kept")
	}
	for _, uid := range []types.UID{"a", "c"} {
		if _, ok := e.lookup(uid, "key-1"); !ok {
			t.Errorf("the results of %s, seen or of another namespace, were forgotten", uid)
		}
	}
	e.changed("shop")
	e.changed("shop")
	if e.epochs["shop"] != 2 || e.epochs["other"] != 0 {
		t.Errorf("epochs %v: a change counts in its own namespace only", e.epochs)
	}
}
