package delivery

import (
	"fmt"
	"slices"
	"time"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// A wave's checks (DeliverySettings.Analysis) run once its workloads are
// healthy, through its soak: the controller measures the checks Due says,
// and Next takes the Measurements with the gate. A wave completes once its
// soak is over and every check has been measured at least once and has
// not failed more often than its failureLimit allows; one failure more
// fails the wave as an unhealthy rollout does. A measurement that says
// nothing (no data, an error) fails or makes the delivery wait for a
// person, as the check's onNoData and onError say. The bake after the last
// wave runs the same checks over every consumer.

// Results of one measurement (CheckStatus.Result).
const (
	ResultPassed = "Passed"
	ResultFailed = "Failed"
	ResultNoData = "NoData"
	ResultError  = "Error"
)

// Reasons of a delivery that analysis halted or is baking.
const (
	// ReasonAnalysisFailed: a check failed more often than its
	// failureLimit allows (Halted).
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonAnalysisInconclusive: a check had no data or could not be
	// measured, and says a person decides (Halted; promote to go on,
	// resume to measure again).
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	// ReasonBaking: every wave completed; the checks keep running for
	// bakeSeconds.
	ReasonBaking = "Baking"
)

// BakeWave is the name the bake goes by where a wave's would: in
// measurements, queries ({{ .Wave }}) and webhook calls.
const BakeWave = "bake"

// Measurement is one check measured by the controller.
type Measurement struct {
	Check string
	// Result is ResultPassed, ResultFailed, ResultNoData or ResultError.
	Result string
	// Value over the group measured and Control over the rest ("" for a
	// webhook check, or where there is no control group).
	Value, Control string
	// Message says the result with its threshold, or the error.
	Message string
}

// Checks are the checks of a delivery's settings; none for an immediate
// delivery, which asked to skip them.
func Checks(rec *v1alpha1.ConfigDelivery) []v1alpha1.AnalysisCheck {
	a := rec.Spec.Settings.Analysis
	if a == nil || immediate(rec) {
		return nil
	}
	return a.Checks
}

// Due returns the checks to measure at now: those of the current wave once
// it is healthy, or of the bake, whose last measurement (or, for the first,
// the wave's healthy time or the bake's start) is one interval old. bake
// says they are the bake's.
func Due(rec *v1alpha1.ConfigDelivery, now time.Time) (due []v1alpha1.AnalysisCheck, bake bool) {
	checks := Checks(rec)
	if len(checks) == 0 || rec.Status.State != v1alpha1.DeliveryProgressing {
		return nil, false
	}
	var since time.Time
	var statuses []v1alpha1.CheckStatus
	if b := rec.Status.Bake; b != nil {
		if b.CompletedAt != nil {
			return nil, true
		}
		since, statuses, bake = b.StartedAt.Time, b.Checks, true
	} else {
		i := CurrentWave(rec)
		if i < 0 {
			return nil, false
		}
		w := rec.Status.Waves[i]
		if w.HealthySince == nil || w.CompletedAt != nil {
			return nil, false
		}
		since, statuses = w.HealthySince.Time, w.Checks
	}
	for _, c := range checks {
		last := since
		if st := checkStatus(statuses, c.Name); st != nil && st.LastAt != nil {
			last = st.LastAt.Time
		}
		if !now.Before(last.Add(interval(c))) {
			due = append(due, c)
		}
	}
	return due, bake
}

// interval is a check's interval; the CRD defaults it, a record written
// without it is measured every 30 seconds.
func interval(c v1alpha1.AnalysisCheck) time.Duration {
	if c.Interval.Duration > 0 {
		return c.Interval.Duration
	}
	return 30 * time.Second
}

func checkStatus(statuses []v1alpha1.CheckStatus, name string) *v1alpha1.CheckStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// verdict is what a step's measurements decide.
type verdict struct {
	// failed names the check that failed past its limit, inconclusive the
	// one that waits for a person; both with the measurement.
	failed, inconclusive string
	// measured: every check has been measured at least once.
	measured bool
}

// measure records ms in statuses (copied, never changed in place) and
// returns the new statuses and what they decide. where names the wave or
// the bake, for the history.
func (c *change) measure(statuses []v1alpha1.CheckStatus, ms []Measurement, where string) ([]v1alpha1.CheckStatus, verdict) {
	checks := Checks(c.rec)
	out := slices.Clone(statuses)
	var v verdict
	for _, m := range ms {
		check := findCheck(checks, m.Check)
		if check == nil {
			continue
		}
		st := checkStatus(out, m.Check)
		if st == nil {
			out = append(out, v1alpha1.CheckStatus{Name: m.Check})
			st = &out[len(out)-1]
		}
		st.Measurements++
		st.LastAt, st.Result, st.Value, st.Control, st.Message = c.stamp(), m.Result, m.Value, m.Control, m.Message
		said := describe(*check, m)
		failed := m.Result == ResultFailed
		switch {
		case m.Result == ResultNoData && check.OnNoData == v1alpha1.InconclusiveFail,
			m.Result == ResultError && check.OnError == v1alpha1.InconclusiveFail:
			failed = true
		case m.Result == ResultNoData || m.Result == ResultError:
			if v.inconclusive == "" {
				v.inconclusive = said
			}
		}
		if !failed {
			continue
		}
		st.Failures++
		c.history(where, v1alpha1.HistoryCheckFailed, "", fmt.Sprintf("%s (failure %d, %d allowed)", said, st.Failures, check.FailureLimit))
		if st.Failures > check.FailureLimit && v.failed == "" {
			v.failed = said
		}
	}
	v.measured = true
	for _, check := range checks {
		if st := checkStatus(out, check.Name); st == nil || st.Measurements == 0 {
			v.measured = false
		}
	}
	if len(ms) > 0 {
		c.step.Write = true
	}
	return out, v
}

func findCheck(checks []v1alpha1.AnalysisCheck, name string) *v1alpha1.AnalysisCheck {
	for i := range checks {
		if checks[i].Name == name {
			return &checks[i]
		}
	}
	return nil
}

// describe says one measurement with what it measured: the query (as
// written, before its variables are filled in) or the webhook, the result
// and the threshold.
func describe(check v1alpha1.AnalysisCheck, m Measurement) string {
	what := fmt.Sprintf("query %q", check.Query)
	if check.Webhook != nil {
		what = "webhook " + check.Webhook.URL
	}
	return fmt.Sprintf("check %s (%s): %s: %s", check.Name, what, m.Result, m.Message)
}

// immediate: a break-glass write asked for every wave at once.
func immediate(rec *v1alpha1.ConfigDelivery) bool {
	return rec.Spec.BreakGlass != nil && rec.Spec.BreakGlass.Immediate
}

// bakeSeconds is the settings' bake; none for an immediate delivery.
func bakeSeconds(rec *v1alpha1.ConfigDelivery) int32 {
	if b := rec.Spec.Settings.BakeSeconds; b != nil && !immediate(rec) {
		return *b
	}
	return 0
}
