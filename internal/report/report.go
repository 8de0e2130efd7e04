// Package report turns a workload's config drift into an OpenReports
// Report (openreports.io/v1alpha1), which Policy Reporter and other tools
// read. There is one Report per workload, named after its UID and owned by
// it, so no Report grows with the namespace and the garbage collector
// removes it with its workload. A Report holds facts that change with the
// config, never with each pod replaced (counts stay with `configward
// status`), so it is written a few times per config change, not per pod.
package report

import (
	"fmt"
	"strings"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configward/configward/internal/drift"
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
	PropWanted       = "wantedHash"
	PropTemplate     = "templateHash"
	PropState        = "state"
	PropReason       = "reason"
	PropWhy          = "why"
	PropUntil        = "until"
	PropChanged      = "changed"
	PropChangedAt    = "changedAt"
	changedSeparator = ","
)

// Name is the name of the Report of the workload with uid. A UID always
// fits a name; kind and name together may not.
func Name(uid types.UID) string { return "configward-" + string(uid) }

// ForWorkload builds the Report of one workload from its drift. prev is
// the Report stored now, or nil: a result whose facts did not change keeps
// its timestamp, so unchanged facts give an equal Report and no write.
func ForWorkload(s drift.Status, prev *openreports.Report, now time.Time) *openreports.Report {
	subject := corev1.ObjectReference{APIVersion: s.APIVersion, Kind: s.Kind, Namespace: s.Namespace, Name: s.Name, UID: s.UID}
	result := configCurrent(s, subject)
	result.Timestamp = metav1.Timestamp{Seconds: now.Unix(), Nanos: int32(now.Nanosecond())}
	if old := findResult(prev, ConfigCurrent); old != nil {
		kept := *old
		kept.Timestamp = result.Timestamp
		if equality.Semantic.DeepEqual(kept, result) {
			result.Timestamp = old.Timestamp
		}
	}
	r := &openreports.Report{
		TypeMeta: metav1.TypeMeta{APIVersion: openreports.SchemeGroupVersion.String(), Kind: "Report"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(s.UID),
			Namespace: s.Namespace,
			Labels:    map[string]string{ManagedByLabel: Source},
			// Owned, not controlled, and without blockOwnerDeletion, which
			// would need rights on the workload's finalizers: the garbage
			// collector deletes the Report with its workload.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: s.APIVersion, Kind: s.Kind, Name: s.Name, UID: s.UID}},
		},
		Source:  Source,
		Scope:   &subject,
		Results: []openreports.ReportResult{result},
	}
	r.Summary = summarize(r.Results)
	return r
}

func configCurrent(s drift.Status, subject corev1.ObjectReference) openreports.ReportResult {
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
	res := openreports.ReportResult{
		Source:      Source,
		Policy:      Policy,
		Rule:        ConfigCurrent,
		Category:    "Config drift",
		Result:      "pass",
		Subjects:    []corev1.ObjectReference{subject},
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

// ConfigCurrentResult returns a Report's config-current result, or nil.
func ConfigCurrentResult(r *openreports.Report) *openreports.ReportResult {
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
