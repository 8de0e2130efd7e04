package delivery

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/revision"
)

// errorRatio is a query check: at most 1% errors, measured every 30s.
func errorRatio(failureLimit int32, onNoData, onError v1alpha1.Inconclusive) v1alpha1.AnalysisCheck {
	limit := 0.01
	return v1alpha1.AnalysisCheck{Name: "error-ratio", Query: `sum(rate(errors{pod=~"{{ .Pods }}"}[1m]))`, Max: &limit,
		Interval: metav1.Duration{Duration: 30 * time.Second}, FailureLimit: failureLimit, OnNoData: onNoData, OnError: onError}
}

func withChecks(checks ...v1alpha1.AnalysisCheck) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) {
		r.Spec.Settings.Analysis = &v1alpha1.Analysis{Checks: checks}
	}
}

var defaultCheck = withChecks(errorRatio(0, v1alpha1.InconclusiveWait, v1alpha1.InconclusiveWait))

func withBake(n int32) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) { r.Spec.Settings.BakeSeconds = &n }
}

// measured: the current wave's (or the bake's) check was measured passing
// `ago` before.
func measured(since time.Duration) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) {
		st := []v1alpha1.CheckStatus{{Name: "error-ratio", Measurements: 1, LastAt: ago(since), Result: ResultPassed, Value: "0", Message: "0 <= max 0.01"}}
		if r.Status.Bake != nil {
			r.Status.Bake.Checks = st
			return
		}
		r.Status.Waves[CurrentWave(r)].Checks = st
	}
}

// baking: every wave completed, the bake started `since` ago.
func baking(since time.Duration) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) {
		started(2, 30*time.Minute)(r)
		r.Status.Waves[2].HealthySince, r.Status.Waves[2].CompletedAt = ago(20*time.Minute), ago(since)
		r.Status.Reason = ReasonBaking
		r.Status.Bake = &v1alpha1.BakeStatus{StartedAt: *ago(since)}
	}
}

func breakGlass(immediate bool) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) {
		r.Spec.BreakGlass = &v1alpha1.BreakGlassDelivery{Reason: "INC-7", Immediate: immediate}
	}
}

func lookWith(ms ...Measurement) Observation {
	return Observation{Now: t0, Gate: &Gate{}, Measurements: ms}
}

var (
	passed  = Measurement{Check: "error-ratio", Result: ResultPassed, Value: "0.001", Message: "0.001 <= max 0.01"}
	tooHigh = Measurement{Check: "error-ratio", Result: ResultFailed, Value: "0.2", Message: "0.2 > max 0.01"}
	noData  = Measurement{Check: "error-ratio", Result: ResultNoData, Message: "the query returned no data"}
	unreach = Measurement{Check: "error-ratio", Result: ResultError, Message: "Prometheus unreachable"}
)

const checkSaid = "check error-ratio (query \"sum(rate(errors{pod=~\\\"{{ .Pods }}\\\"}[1m]))\"): "

func analysisRows() []stepRow {
	const halts = "; no further workload is re-stamped: promote, resume, or change the config again"
	failedCanary := "wave canary failed its analysis: " + checkSaid + "Failed: 0.2 > max 0.01"
	return []stepRow{
		{
			name: "a soaked wave whose check is not measured yet waits for it", rec: record(defaultCheck, started(0, 5*time.Minute), soaking(61*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, requeue: 2 * time.Second,
		},
		{
			name: "a passing measurement is recorded", rec: record(defaultCheck, started(0, 5*time.Minute), soaking(40*time.Second)), obs: lookWith(passed),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, write: true, requeue: 2 * time.Second,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				c := s.Waves[0].Checks
				if len(c) != 1 || c[0].Measurements != 1 || c[0].Failures != 0 || c[0].Value != "0.001" || !c[0].LastAt.Time.Equal(t0) {
					t.Errorf("checks %+v, want one passing measurement now", c)
				}
			},
		},
		{
			name: "a soaked wave with its checks passed completes", rec: record(defaultCheck, started(0, 5*time.Minute), soaking(61*time.Second), measured(10*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave early started",
			history: []string{"WaveCompleted@canary", "WaveStarted@early"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave early (2 of 3) started: Deployment/b, Deployment/c"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted, WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
		},
		{
			name: "a failed measurement fails the wave", rec: record(defaultCheck, started(0, 5*time.Minute), soaking(40*time.Second)), obs: lookWith(tooHigh),
			state: v1alpha1.DeliveryHalted, reason: ReasonAnalysisFailed, message: failedCanary,
			history: []string{"CheckFailed@canary: " + checkSaid + "Failed: 0.2 > max 0.01 (failure 1, 0 allowed)", "Halted@canary: " + failedCanary + halts},
			events: []string{"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: " + failedCanary + halts,
				"Warning ConfigDeliveryHalted on Deployment/a: ConfigDelivery configmap-app-7 of ConfigMap app halted in this workload's wave: " + failedCanary + halts},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeFailed}, Finished: v1alpha1.DeliveryHalted}, write: true,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if c := s.Waves[0].Checks; len(c) != 1 || c[0].Failures != 1 || c[0].Result != ResultFailed || c[0].Value != "0.2" {
					t.Errorf("checks %+v, want the failure recorded with its value", c)
				}
			},
		},
		{
			name: "a failure within failureLimit is recorded and the wave goes on",
			rec:  record(withChecks(errorRatio(1, v1alpha1.InconclusiveWait, v1alpha1.InconclusiveWait)), started(0, 5*time.Minute), soaking(40*time.Second)), obs: lookWith(tooHigh),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted,
			history: []string{"CheckFailed@canary: " + checkSaid + "Failed: 0.2 > max 0.01 (failure 1, 1 allowed)"},
			write:   true, requeue: 2 * time.Second,
		},
		{
			name: "no data, inconclusive, halts for a person without rolling back", rec: record(defaultCheck, onFailureRollback, started(0, 5*time.Minute), soaking(40*time.Second)), obs: lookWith(noData),
			state: v1alpha1.DeliveryHalted, reason: ReasonAnalysisInconclusive, message: "wave canary: " + checkSaid + "NoData: the query returned no data; nothing was rolled back",
			history: []string{"Halted@canary: wave canary: " + checkSaid + "NoData: the query returned no data; nothing was rolled back: promote to go on, resume to measure again, or change the config again"},
			events:  []string{"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: wave canary: " + checkSaid + "NoData: the query returned no data; nothing was rolled back: promote to go on, resume to measure again, or change the config again"},
			metrics: Metrics{Finished: v1alpha1.DeliveryHalted}, write: true,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.RolledBack {
					t.Error("rolled back an inconclusive wave")
				}
			},
		},
		{
			name: "an error counted as a failure rolls the wave back",
			rec:  record(withChecks(errorRatio(0, v1alpha1.InconclusiveWait, v1alpha1.InconclusiveFail)), onFailureRollback, started(0, 5*time.Minute), soaking(40*time.Second)), obs: lookWith(unreach),
			state: v1alpha1.DeliveryHalted, reason: ReasonAnalysisFailed, message: "Error: Prometheus unreachable; the wave is rolled back",
			history: []string{"CheckFailed@canary: " + checkSaid + "Error: Prometheus unreachable (failure 1, 0 allowed)",
				"Halted@canary: wave canary failed its analysis: " + checkSaid + "Error: Prometheus unreachable; the wave is rolled back to the revisions it ran before" + halts},
			events: []string{"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: wave canary failed its analysis: " + checkSaid + "Error: Prometheus unreachable; the wave is rolled back to the revisions it ran before" + halts,
				"Warning ConfigDeliveryHalted on Deployment/a: ConfigDelivery configmap-app-7 of ConfigMap app halted in this workload's wave: wave canary failed its analysis: " + checkSaid + "Error: Prometheus unreachable; the wave is rolled back to the revisions it ran before" + halts},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeFailed}, Finished: v1alpha1.DeliveryHalted}, write: true,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if !s.RolledBack {
					t.Error("not rolled back")
				}
			},
		},
		{
			name: "the last wave soaked starts the bake", rec: record(withBake(600), started(2, 5*time.Minute), soaking(61*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonBaking, message: "every wave healthy; baking 600s",
			history: []string{"WaveCompleted@rest", "BakeStarted@bake: every wave healthy; baking 600s with the checks over every consumer"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted}}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.Bake == nil || !s.Bake.StartedAt.Time.Equal(t0) || s.FinishedAt != nil {
					t.Errorf("bake %+v, finished %v: want a bake started now, not finished", s.Bake, s.FinishedAt)
				}
			},
		},
		{
			name: "a baking delivery waits out its bake", rec: record(defaultCheck, withBake(600), baking(time.Minute), measured(time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonBaking, requeue: 2 * time.Second,
		},
		{
			name: "a bake failure rolls every wave back", rec: record(defaultCheck, withBake(600), onFailureRollback, baking(time.Minute)), obs: lookWith(tooHigh),
			state: v1alpha1.DeliveryHalted, reason: ReasonAnalysisFailed, message: "the bake after the last wave failed its analysis: " + checkSaid + "Failed: 0.2 > max 0.01; every wave is rolled back",
			history: []string{"CheckFailed@bake: " + checkSaid + "Failed: 0.2 > max 0.01 (failure 1, 0 allowed)",
				"Halted@rest: the bake after the last wave failed its analysis: " + checkSaid + "Failed: 0.2 > max 0.01; every wave is rolled back to what it ran before" + halts},
			events: []string{"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: the bake after the last wave failed its analysis: " + checkSaid + "Failed: 0.2 > max 0.01; every wave is rolled back to what it ran before" + halts,
				"Warning ConfigDeliveryHalted on Deployment/a, Deployment/b, Deployment/c, Deployment/d: ConfigDelivery configmap-app-7 of ConfigMap app halted in this workload's wave: the bake after the last wave failed its analysis: " + checkSaid + "Failed: 0.2 > max 0.01; every wave is rolled back to what it ran before" + halts},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeFailed}, Finished: v1alpha1.DeliveryHalted}, write: true,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				rec := &v1alpha1.ConfigDelivery{Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "app"}}, Status: s}
				for i := range s.Waves {
					if !RolledBack(rec, i) {
						t.Errorf("wave %d not rolled back", i)
					}
					ask := Ask{Record: rec, Config: revision.Source{Kind: "ConfigMap", Name: "app"}, Current: "app-2b", Holder: Holder{Kind: "Deployment", Name: s.Waves[i].Workloads[0].Name}, Held: "app-2b"}
					if got := Want(ask); got != (Wanted{Revision: "app-1a", Why: WhyRolledBack}) {
						t.Errorf("wave %d pinned to %q, want app-1a", i, got)
					}
				}
			},
		},
		{
			name: "a bake over with its checks measured succeeds", rec: record(defaultCheck, withBake(600), baking(601*time.Second), measured(10*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliverySucceeded, reason: ReasonAllWavesHealthy, message: "every wave healthy and baked 600s: app-2b is delivered",
			history: []string{"Succeeded@rest: every wave healthy and baked 600s: app-2b is delivered"},
			events:  []string{"Normal DeliverySucceeded on the config: ConfigDelivery configmap-app-7: every wave healthy and baked 600s: app-2b is delivered"},
			metrics: Metrics{Finished: v1alpha1.DeliverySucceeded}, write: true,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.Bake.CompletedAt == nil || s.FinishedAt == nil {
					t.Errorf("bake %+v, finished %v: want both now", s.Bake, s.FinishedAt)
				}
			},
		},
		{
			name: "promote during the bake ends it", rec: record(defaultCheck, withBake(600), baking(time.Minute), halted, request(v1alpha1.ActionPromote)), obs: look(nil),
			state: v1alpha1.DeliverySucceeded, reason: ReasonAllWavesHealthy, message: "promoted during the bake",
			history: []string{"Promoted@bake/alice", "Succeeded@rest/alice: promoted during the bake: app-2b is delivered"},
			events:  []string{"Normal DeliverySucceeded on the config: ConfigDelivery configmap-app-7: promoted during the bake: app-2b is delivered"},
			metrics: Metrics{Finished: v1alpha1.DeliverySucceeded}, write: true, requeue: time.Millisecond,
		},
		{
			name: "resume of a failed bake starts it over", rec: record(defaultCheck, withBake(600), baking(time.Minute), measured(time.Second), halted, rolledBack, request(v1alpha1.ActionResume)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonBaking, message: "baking 600s",
			history: []string{"Resumed@bake/alice", "BakeStarted@bake: every wave healthy; baking 600s with the checks over every consumer"},
			write:   true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.RolledBack || !s.Bake.StartedAt.Time.Equal(t0) || len(s.Bake.Checks) != 0 {
					t.Errorf("rolled back %v, bake %+v: want a fresh bake and every wave on the delivered content", s.RolledBack, s.Bake)
				}
			},
		},
		{
			name: "break-glass skips the first wave's approval", rec: record(canaryApproval, breakGlass(false)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary started",
			history: []string{`ApprovalSkipped@canary: break-glass (reason "INC-7") skips approvals; the waves and their checks still apply`, "WaveStarted@canary"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave canary (1 of 3) started: Deployment/a"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
		},
		{
			name: "break-glass keeps the checks", rec: record(defaultCheck, breakGlass(false), started(0, 5*time.Minute), soaking(61*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, requeue: 2 * time.Second,
		},
		{
			name: "break-glass with an immediate delivery starts every wave at once", rec: record(defaultCheck, breakGlass(true)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: `immediate delivery (break-glass, reason "INC-7"): every wave started at once`,
			history: []string{`ApprovalSkipped@: break-glass (reason "INC-7") asked for an immediate delivery: every wave starts at once, no approval, no checks, no bake`,
				"WaveStarted@canary", "WaveStarted@early", "WaveStarted@rest"},
			events: []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave canary (1 of 3) started: Deployment/a",
				"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave early (2 of 3) started: Deployment/b, Deployment/c",
				"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave rest (3 of 3) started: Deployment/d"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeStarted, WaveOutcomeStarted, WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				rec := &v1alpha1.ConfigDelivery{Status: s}
				if j := Judged(rec); len(j) != 3 {
					t.Errorf("judged waves %v, want all three", j)
				}
			},
		},
		{
			name: "an immediate delivery soaked completes every wave without checks", rec: record(defaultCheck, withBake(600), breakGlass(true), allStarted, soaking(61*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliverySucceeded, reason: ReasonAllWavesHealthy,
			history: []string{"WaveCompleted@rest", "Succeeded@rest: every wave healthy: app-2b is delivered"},
			events:  []string{"Normal DeliverySucceeded on the config: ConfigDelivery configmap-app-7: every wave healthy: app-2b is delivered"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted}, Finished: v1alpha1.DeliverySucceeded}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				for _, w := range s.Waves {
					if w.CompletedAt == nil {
						t.Errorf("wave %s not completed", w.Name)
					}
				}
			},
		},
	}
}

// allStarted: every wave started at once five minutes ago (an immediate
// delivery).
func allStarted(r *v1alpha1.ConfigDelivery) {
	for i := range r.Status.Waves {
		r.Status.Waves[i].StartedAt = ago(5 * time.Minute)
	}
	r.Status.Reason, r.Status.CurrentWave = ReasonWaveStarted, "rest"
}

func TestDue(t *testing.T) {
	rows := []struct {
		name string
		rec  *v1alpha1.ConfigDelivery
		due  int
		bake bool
	}{
		{"no checks", record(started(0, 5*time.Minute), soaking(time.Minute)), 0, false},
		{"a wave not healthy yet", record(defaultCheck, started(0, 5*time.Minute)), 0, false},
		{"healthy less than an interval", record(defaultCheck, started(0, 5*time.Minute), soaking(29*time.Second)), 0, false},
		{"healthy an interval", record(defaultCheck, started(0, 5*time.Minute), soaking(30*time.Second)), 1, false},
		{"measured less than an interval ago", record(defaultCheck, started(0, 5*time.Minute), soaking(time.Minute), measured(10*time.Second)), 0, false},
		{"measured an interval ago", record(defaultCheck, started(0, 5*time.Minute), soaking(time.Minute), measured(31*time.Second)), 1, false},
		{"a halted delivery", record(defaultCheck, started(0, 5*time.Minute), soaking(time.Minute), halted), 0, false},
		{"an immediate delivery", record(defaultCheck, breakGlass(true), allStarted, soaking(time.Minute)), 0, false},
		{"the bake", record(defaultCheck, withBake(600), baking(time.Minute)), 1, true},
		{"the bake measured", record(defaultCheck, withBake(600), baking(time.Minute), measured(time.Second)), 0, true},
	}
	for _, r := range rows {
		due, bake := Due(r.rec, t0)
		if len(due) != r.due || bake != r.bake {
			t.Errorf("%s: %d due (bake %v), want %d (bake %v)", r.name, len(due), bake, r.due, r.bake)
		}
	}
}

func TestBreakGlass(t *testing.T) {
	key := []byte("installation key")
	const content, other = "cfg-snap-aaa", "cfg-snap-bbb"
	// sealed are a write's annotations as the admission webhook leaves them:
	// the reason sealed to the content of the write that set it.
	sealed := func(reason, delivery, to string) map[string]string {
		a := map[string]string{v1alpha1.BreakGlassAnnotation: reason}
		if delivery != "" {
			a[v1alpha1.BreakGlassDeliveryAnnotation] = delivery
		}
		a[v1alpha1.BreakGlassSealAnnotation] = BreakGlassSeal(key, to, strings.TrimSpace(reason), delivery == v1alpha1.BreakGlassImmediate)
		return a
	}
	with := func(a map[string]string, k, v string) map[string]string {
		a[k] = v
		return a
	}
	saw := func(reason string) *v1alpha1.ConfigDelivery {
		return &v1alpha1.ConfigDelivery{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.BreakGlassSeenAnnotation: reason}}}
	}
	rows := []struct {
		name        string
		annotations map[string]string
		latest      *v1alpha1.ConfigDelivery
		governed    bool
		want        *v1alpha1.BreakGlassDelivery
	}{
		{"none", nil, nil, true, nil},
		{"a new reason", sealed(" INC-1 ", "", content), saw("INC-0"), true, &v1alpha1.BreakGlassDelivery{Reason: "INC-1"}},
		{"a new reason, first delivery", sealed("INC-1", "", content), nil, true, &v1alpha1.BreakGlassDelivery{Reason: "INC-1"}},
		{"immediate", sealed("INC-1", v1alpha1.BreakGlassImmediate, content), nil, true, &v1alpha1.BreakGlassDelivery{Reason: "INC-1", Immediate: true}},
		{"immediate misspelt", sealed("INC-1", "immediately", content), nil, true, &v1alpha1.BreakGlassDelivery{Reason: "INC-1"}},
		{"the reason the latest delivery saw", sealed("INC-1", v1alpha1.BreakGlassImmediate, content), saw("INC-1"), true, nil},
		{"not governed: nobody recorded who", sealed("INC-1", v1alpha1.BreakGlassImmediate, content), nil, false, nil},
		{"immediate without a reason", map[string]string{v1alpha1.BreakGlassDeliveryAnnotation: v1alpha1.BreakGlassImmediate}, nil, true, nil},
		// The attacks the seal closes.
		{"a reason without a seal (left from before delivery was on, or written past the webhook)", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-1"}, nil, true, nil},
		{"a reason sealed to the content before: a later write left it on the object", sealed("INC-1", "", other), nil, true, nil},
		{"a reason sealed with no content change, then the pipeline's change", sealed("INC-2", v1alpha1.BreakGlassImmediate, other), saw("INC-1"), true, nil},
		{"immediate added after the reason was sealed", with(sealed("INC-1", "", content), v1alpha1.BreakGlassDeliveryAnnotation, v1alpha1.BreakGlassImmediate), nil, true, nil},
		{"another reason under the seal", with(sealed("INC-1", "", content), v1alpha1.BreakGlassAnnotation, "INC-9"), nil, true, nil},
		{"a seal made with another key", with(sealed("INC-1", "", content), v1alpha1.BreakGlassSealAnnotation, BreakGlassSeal([]byte("other key"), content, "INC-1", false)), nil, true, nil},
	}
	for _, r := range rows {
		got := BreakGlass(r.annotations, r.latest, r.governed, key, content)
		if (got == nil) != (r.want == nil) || (got != nil && *got != *r.want) {
			t.Errorf("%s: %+v, want %+v", r.name, got, r.want)
		}
	}
}
