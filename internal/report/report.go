// Package report turns what configward knows of an existing object into an
// OpenReports Report (openreports.io/v1alpha1), which Policy Reporter and
// other tools read: a workload's config drift and its rule findings, a
// ConfigMap's ConfigSchema violations. There is one Report per object,
// named after its UID and owned by it, so no Report grows with the
// namespace and the garbage collector removes it with its object. A Report holds facts that change with the
// config, never with each pod replaced (counts stay with `configward
// status`), so it is written a few times per config change, not per pod.
package report

import (
	"fmt"
	"sort"
	"strings"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/rules"
)

const (
	// Source is the source of every Report and result configward writes.
	Source = "configward"
	// Policy names configward's built-in checks in results.
	Policy = "configward"
	// ConfigCurrent is the rule of the result that says whether a
	// workload's pods run the config its ConfigMaps and Secrets give now.
	ConfigCurrent = "config-current"

	// ManagedByLabel marks configward's Reports, for lists and watches.
	ManagedByLabel = "app.kubernetes.io/managed-by"

	// Property names of the config-current result; `configward status`
	// reads them back.
	PropWanted    = "wantedHash"
	PropTemplate  = "templateHash"
	PropState     = "state"
	PropReason    = "reason"
	PropWhy       = "why"
	PropUntil     = "until"
	PropChanged   = "changed"
	PropChangedAt = "changedAt"
	// PropUnpinned says why a workload's revision reads its config
	// unpinned (drift.Status.Unpinned).
	PropUnpinned = "unpinned"
	// Properties of a finding's result.
	PropAction       = "action"
	PropPath         = "path"
	PropExemption    = "exemption"
	changedSeparator = ","
)

// Name is the name of the Report of the workload with uid. A UID always
// fits a name; kind and name together may not.
func Name(uid types.UID) string { return "configward-" + string(uid) }

// MaxResults bounds the results of one Report: with the config-current
// result first, a workload with hundreds of findings still fits well
// inside the API server's object size limit (a result is under 1 KiB).
const MaxResults = 200

// Build makes the Report of one object (a workload or a ConfigMap) from its
// results. prev is the Report stored now, or nil: a result whose facts did
// not change keeps its timestamp, so unchanged facts give an equal Report
// and no write.
func Build(subject corev1.ObjectReference, results []openreports.ReportResult, prev *openreports.Report, now time.Time) *openreports.Report {
	stamp := metav1.Timestamp{Seconds: now.Unix(), Nanos: int32(now.Nanosecond())}
	sort.SliceStable(results, func(i, j int) bool { return resultOrder(results[i]) < resultOrder(results[j]) })
	// The summary counts every result, also those cut below.
	summary := summarize(results)
	if len(results) > MaxResults {
		results = results[:MaxResults]
	}
	for i := range results {
		results[i].Source = Source
		if results[i].Policy == "" {
			results[i].Policy = Policy
		}
		results[i].Subjects = []corev1.ObjectReference{subject}
		results[i].Timestamp = stamp
		if old := sameResult(prev, results[i]); old != nil {
			results[i].Timestamp = old.Timestamp
		}
	}
	r := &openreports.Report{
		TypeMeta: metav1.TypeMeta{APIVersion: openreports.SchemeGroupVersion.String(), Kind: "Report"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(subject.UID),
			Namespace: subject.Namespace,
			Labels:    map[string]string{ManagedByLabel: Source},
			// Owned, not controlled, and without blockOwnerDeletion, which
			// would need rights on the object's finalizers: the garbage
			// collector deletes the Report with its object.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: subject.APIVersion, Kind: subject.Kind, Name: subject.Name, UID: subject.UID}},
		},
		Source:  Source,
		Scope:   &subject,
		Results: results,
	}
	r.Summary = summary
	return r
}

// resultOrder puts config-current first, then findings by rule and path.
func resultOrder(r openreports.ReportResult) string {
	if r.Rule == ConfigCurrent {
		return ""
	}
	return r.Rule + "\x00" + r.Properties[PropPath] + "\x00" + r.Description
}

// sameResult finds in prev the result equal to r but for its timestamp.
func sameResult(prev *openreports.Report, r openreports.ReportResult) *openreports.ReportResult {
	if prev == nil {
		return nil
	}
	for i := range prev.Results {
		old := prev.Results[i]
		old.Timestamp = r.Timestamp
		if equality.Semantic.DeepEqual(old, r) {
			return &prev.Results[i]
		}
	}
	return nil
}

// Subject is the reference a Report and its results name.
func Subject(apiVersion, kind, namespace, name string, uid types.UID) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, UID: uid}
}

// FindingResults are the results of the rules' findings on an existing
// object, as the namespace's ConfigPolicies decide them: a finding that
// would be denied now fails, a warned one warns, an audited one warns at
// low severity, and one the object is exempt from is skipped.
func FindingResults(out rules.Outcome) []openreports.ReportResult {
	var res []openreports.ReportResult
	add := func(fs []rules.Finding, action rules.Action, result openreports.Result, severity openreports.ResultSeverity) {
		for _, f := range fs {
			r := openreports.ReportResult{
				Rule: f.Rule, Category: "Config safety", Result: result, Severity: severity, Description: f.Message,
				Properties: map[string]string{PropAction: string(action), PropPath: f.Path},
			}
			if f.Exemption != "" {
				r.Result, r.Severity = "skip", ""
				r.Properties[PropExemption] = f.Exemption
			}
			res = append(res, r)
		}
	}
	add(out.Denied, rules.Deny, "fail", "high")
	add(out.Warned, rules.Warn, "warn", "medium")
	add(out.Audited, rules.Audit, "warn", "low")
	return res
}

// ConfigCurrentResult is the config-current result of a workload's drift:
// pass when every pod runs the current config.
func ConfigCurrentResult(s drift.Status) openreports.ReportResult {
	props := map[string]string{
		PropWanted:   s.Wanted,
		PropTemplate: s.Template,
		PropState:    string(s.State),
	}
	if s.Hold.Reason != "" {
		props[PropReason], props[PropWhy], props[PropUntil] = s.Hold.Reason, s.Hold.Why, s.Hold.Until
	}
	if len(s.Changed) > 0 {
		props[PropChanged] = strings.Join(s.Changed, changedSeparator)
		props[PropChangedAt] = s.ChangedAt.UTC().Format(time.RFC3339)
	}
	if s.Unpinned != "" {
		props[PropUnpinned] = s.Unpinned
	}
	res := openreports.ReportResult{
		Source:      Source,
		Policy:      Policy,
		Rule:        ConfigCurrent,
		Category:    "Config drift",
		Result:      "pass",
		Description: Message(s),
		Properties:  props,
	}
	if s.State != drift.Done {
		res.Result, res.Severity = "fail", "medium"
	}
	return res
}

// Message says, for people, where a workload stands; the Report's result
// carries it and `configward status` prints it for held workloads.
func Message(s drift.Status) string {
	what := "its config"
	if len(s.Changed) > 0 {
		what = strings.Join(s.Changed, ", ")
	}
	switch s.State {
	case drift.Done:
		return "every pod runs the current config"
	case drift.Pending:
		return fmt.Sprintf("%s changed: configward has not yet put the new config hash on the pod template (rollouts are batched and paced)", what)
	case drift.Progressing:
		return fmt.Sprintf("%s changed: the pod template carries the new config hash and the workload is replacing its pods", what)
	case drift.RolledBack:
		return fmt.Sprintf("rolled back: %s; configward keeps it there until %s", s.Hold.Why, s.Hold.Until)
	default:
		return fmt.Sprintf("%s changed, but %s: running pods keep the old config until %s", what, s.Hold.Why, s.Hold.Until)
	}
}

// LastChange reads back what a Report says changed last, for a workload
// whose config still gives the hash it was written for: a restarted
// controller knows no history of its own.
func LastChange(r *openreports.Report, wanted string) ([]string, time.Time) {
	res := findResult(r, ConfigCurrent)
	if res == nil || res.Properties[PropWanted] != wanted || res.Properties[PropChanged] == "" {
		return nil, time.Time{}
	}
	at, err := time.Parse(time.RFC3339, res.Properties[PropChangedAt])
	if err != nil {
		return nil, time.Time{}
	}
	return strings.Split(res.Properties[PropChanged], changedSeparator), at
}

// StoredConfigCurrent returns a Report's config-current result, or nil.
func StoredConfigCurrent(r *openreports.Report) *openreports.ReportResult {
	return findResult(r, ConfigCurrent)
}

func findResult(r *openreports.Report, rule string) *openreports.ReportResult {
	if r == nil {
		return nil
	}
	for i := range r.Results {
		if r.Results[i].Source == Source && r.Results[i].Rule == rule {
			return &r.Results[i]
		}
	}
	return nil
}

func summarize(results []openreports.ReportResult) openreports.ReportSummary {
	var s openreports.ReportSummary
	for _, r := range results {
		switch r.Result {
		case "pass":
			s.Pass++
		case "fail":
			s.Fail++
		case "warn":
			s.Warn++
		case "error":
			s.Error++
		case "skip":
			s.Skip++
		}
	}
	return s
}

// Differs reports whether stored must be rewritten to become want: its
// content or ownership differ. Metadata the API server keeps (UID,
// resourceVersion, managed fields) does not count.
func Differs(stored, want *openreports.Report) bool {
	return stored.Source != want.Source ||
		!equality.Semantic.DeepEqual(stored.Scope, want.Scope) ||
		!equality.Semantic.DeepEqual(stored.Results, want.Results) ||
		!equality.Semantic.DeepEqual(stored.Summary, want.Summary) ||
		!equality.Semantic.DeepEqual(stored.OwnerReferences, want.OwnerReferences) ||
		stored.Labels[ManagedByLabel] != want.Labels[ManagedByLabel]
}
