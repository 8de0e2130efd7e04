package delivery

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// t0 is the time of every look in these tests.
var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time {
	t := metav1.NewTime(t0.Add(-d))
	return &t
}

// record is a delivery of ConfigMap app to four Deployments in three
// waves: canary (a), early (b, c) and rest (d), which waits for approval.
// Its placement is written and no wave has started; opts move it on.
func record(opts ...func(*v1alpha1.ConfigDelivery)) *v1alpha1.ConfigDelivery {
	soak := int32(60)
	target := func(name string) v1alpha1.DeliveryTarget {
		return v1alpha1.DeliveryTarget{Kind: "Deployment", Name: name, From: "app-1a"}
	}
	rec := &v1alpha1.ConfigDelivery{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "configmap-app-7", UID: "uid-7"},
		Spec: v1alpha1.ConfigDeliverySpec{
			Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "app"}, Sequence: 7, Policy: "waves",
			Settings: v1alpha1.DeliverySettings{ProgressDeadlineSeconds: 300, SoakSeconds: &soak, OnFailure: v1alpha1.FailureHalt, Waves: []v1alpha1.Wave{
				{Name: "canary"}, {Name: "early"}, {Name: "rest", Approval: true},
			}},
		},
		Status: v1alpha1.ConfigDeliveryStatus{
			State: v1alpha1.DeliveryProgressing, Reason: ReasonStarted, Message: "delivering ConfigMap app-2b to 4 workloads in 3 waves",
			To: "app-2b", From: "app-1a", StartedAt: ago(time.Hour),
			Waves: []v1alpha1.WaveStatus{
				{Name: "canary", Workloads: []v1alpha1.DeliveryTarget{target("a")}},
				{Name: "early", Workloads: []v1alpha1.DeliveryTarget{target("b"), target("c")}},
				{Name: "rest", Approval: true, Workloads: []v1alpha1.DeliveryTarget{target("d")}},
			},
			History: []v1alpha1.DeliveryEvent{{Time: *ago(time.Hour), What: v1alpha1.HistoryStarted}},
		},
	}
	for _, o := range opts {
		o(rec)
	}
	return rec
}

// started: wave i started `since` ago, the waves before it completed.
// canaryApproval makes the first wave ask for approval.
func canaryApproval(rec *v1alpha1.ConfigDelivery) {
	rec.Spec.Settings.Waves[0].Approval, rec.Status.Waves[0].Approval = true, true
}

// waitingForCanary is a delivery whose first wave waits for approval.
func waitingForCanary(rec *v1alpha1.ConfigDelivery) {
	rec.Status.State, rec.Status.Reason, rec.Status.CurrentWave = v1alpha1.DeliveryWaitingForApproval, ReasonApprovalRequired, "canary"
}

func started(i int, since time.Duration) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) {
		for j := range i {
			r.Status.Waves[j].StartedAt, r.Status.Waves[j].HealthySince, r.Status.Waves[j].CompletedAt = ago(50*time.Minute), ago(45*time.Minute), ago(40*time.Minute)
		}
		r.Status.Waves[i].StartedAt = ago(since)
		r.Status.Reason, r.Status.CurrentWave = ReasonWaveStarted, r.Status.Waves[i].Name
		r.Status.Message = fmt.Sprintf("wave %s started: %d workloads", r.Status.Waves[i].Name, len(r.Status.Waves[i].Workloads))
	}
}

// soaking: the current wave has been healthy for `since`.
func soaking(since time.Duration) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) {
		r.Status.Waves[CurrentWave(r)].HealthySince = ago(since)
		r.Status.Message = "wave " + r.Status.CurrentWave + " healthy; soaking 60s"
	}
}

// waitingForRest: early soaked and completed, rest waits for approval.
func waitingForRest(r *v1alpha1.ConfigDelivery) {
	started(1, 30*time.Minute)(r)
	r.Status.Waves[1].HealthySince, r.Status.Waves[1].CompletedAt = ago(20*time.Minute), ago(time.Minute)
	r.Status.State, r.Status.Reason, r.Status.CurrentWave = v1alpha1.DeliveryWaitingForApproval, ReasonApprovalRequired, "rest"
	r.Status.Message = "wave rest waits for approval: configward delivery promote -n shop configmap/app"
}

// halted: the delivery halted (a wave failed, or a person halted it).
func halted(r *v1alpha1.ConfigDelivery) {
	r.Status.State, r.Status.Reason, r.Status.Message = v1alpha1.DeliveryHalted, ReasonWaveFailed, "wave failed"
}

func rolledBack(r *v1alpha1.ConfigDelivery) { r.Status.RolledBack = true }

func onFailureRollback(r *v1alpha1.ConfigDelivery) {
	r.Spec.Settings.OnFailure = v1alpha1.FailureRollback
}

func soakSeconds(n int32) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) { r.Spec.Settings.SoakSeconds = &n }
}

func message(m string) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) { r.Status.Message = m }
}

func waveHealth(h ...v1alpha1.WorkloadHealth) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) { r.Status.Waves[CurrentWave(r)].Health = h }
}

// request is a person's request, by alice, not handled yet.
func request(action v1alpha1.DeliveryAction) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) {
		r.Spec.Request = &v1alpha1.DeliveryRequest{Action: action, ID: "req-2", RequestedBy: "alice"}
	}
}

func handled(r *v1alpha1.ConfigDelivery) { r.Status.HandledRequest = r.Spec.Request.ID }

func finished(state v1alpha1.DeliveryState) func(*v1alpha1.ConfigDelivery) {
	return func(r *v1alpha1.ConfigDelivery) { r.Status.State = state }
}

// What the gate can say of a workload.
var (
	progressingA = "Deployment a (waiting for its template to be stamped with the delivered revision)"
	unreadyA     = "Deployment a (pod a-1 of the delivered revision is not ready)"
	unreadyB     = "Deployment b (pod b-1 of the delivered revision is not ready)"
	cronJobE     = v1alpha1.WorkloadHealth{Kind: "CronJob", Name: "e", State: Unverified, Message: "its next Job takes the delivered revision; a CronJob shows no health until then"}
)

func look(g *Gate) Observation { return Observation{Now: t0, Gate: g} }

// stepRow is one look at a delivery and the step it should take.
type stepRow struct {
	name string
	rec  *v1alpha1.ConfigDelivery
	obs  Observation

	state   v1alpha1.DeliveryState
	reason  string
	message string // a part of the status message
	// history are the entries the step appends, as
	// What@wave/by: message (see entry).
	history []string
	// events are the Events asked for, as "Type Reason on target: message".
	events  []string
	metrics Metrics
	write   bool
	// progressWritten and needsGate as Step says.
	progressWritten, needsGate bool
	requeue                    time.Duration
	// also checks what the columns do not say.
	also func(t *testing.T, s v1alpha1.ConfigDeliveryStatus)
}

func stepRows() []stepRow {
	const rejected = "; no further workload is re-stamped: promote, resume, or change the config again"
	failedA := "Deployment a: pod a-1 of the delivered revision restarted (container \"app\", 1 restarts)"
	return append(analysisRows(), []stepRow{
		// A person's requests.
		{
			name: "halt while a wave rolls", rec: record(started(0, time.Minute), request(v1alpha1.ActionHalt)), obs: look(nil),
			state: v1alpha1.DeliveryHalted, reason: ReasonHaltedByUser, message: "halted by alice; no further workload is re-stamped",
			history: []string{"Halted@canary/alice: halted by alice; no further workload is re-stamped"},
			events:  []string{"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: halted by alice; no further workload is re-stamped"},
			metrics: Metrics{Finished: v1alpha1.DeliveryHalted}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.FinishedAt != nil || s.HandledRequest != "req-2" {
					t.Errorf("FinishedAt %v, HandledRequest %q: want none and req-2", s.FinishedAt, s.HandledRequest)
				}
			},
		},
		{
			name: "halt while a wave waits for approval", rec: record(waitingForRest, request(v1alpha1.ActionHalt)), obs: look(nil),
			state: v1alpha1.DeliveryHalted, reason: ReasonHaltedByUser, message: "halted by alice",
			history: []string{"Halted@rest/alice: halted by alice; no further workload is re-stamped"},
			events:  []string{"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: halted by alice; no further workload is re-stamped"},
			metrics: Metrics{Finished: v1alpha1.DeliveryHalted}, write: true, requeue: time.Millisecond,
		},
		{
			name: "halt of a halted delivery is ignored", rec: record(started(0, time.Minute), halted, request(v1alpha1.ActionHalt)), obs: look(nil),
			state: v1alpha1.DeliveryHalted, reason: ReasonWaveFailed, message: "wave failed",
			history: []string{"RequestIgnored@canary/alice: Halt does not apply to a Halted delivery"},
			write:   true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.HandledRequest != "req-2" {
					t.Errorf("HandledRequest %q, want req-2", s.HandledRequest)
				}
			},
		},
		{
			name: "promote while a wave waits for approval starts it", rec: record(waitingForRest, request(v1alpha1.ActionPromote)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave rest started: 1 workloads",
			history: []string{"Promoted@rest/alice: approved", "WaveStarted@rest/alice"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave rest (3 of 3) started: Deployment/d"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.CurrentWave != "rest" || !s.Waves[2].StartedAt.Time.Equal(t0) {
					t.Errorf("current wave %s started %v, want rest started now", s.CurrentWave, s.Waves[2].StartedAt)
				}
			},
		},
		{
			name: "promote while a wave rolls completes it and starts the next, approval or not", rec: record(started(1, time.Minute), request(v1alpha1.ActionPromote)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave rest started: 1 workloads",
			history: []string{"Promoted@early/alice", "WaveStarted@rest/alice"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave rest (3 of 3) started: Deployment/d"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted, WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if !s.Waves[1].CompletedAt.Time.Equal(t0) {
					t.Errorf("early completed %v, want now", s.Waves[1].CompletedAt)
				}
			},
		},
		{
			name: "promote of a halted last wave ends the delivery", rec: record(started(2, time.Minute), halted, rolledBack, request(v1alpha1.ActionPromote)), obs: look(nil),
			state: v1alpha1.DeliverySucceeded, reason: ReasonAllWavesHealthy, message: "every wave healthy: app-2b is delivered",
			history: []string{"Promoted@rest/alice", "Succeeded@rest/alice: every wave healthy: app-2b is delivered"},
			events:  []string{"Normal DeliverySucceeded on the config: ConfigDelivery configmap-app-7: every wave healthy: app-2b is delivered"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted}, Finished: v1alpha1.DeliverySucceeded}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.RolledBack || s.FinishedAt == nil || !s.FinishedAt.Time.Equal(t0) {
					t.Errorf("RolledBack %v, FinishedAt %v: want false and now", s.RolledBack, s.FinishedAt)
				}
			},
		},
		{
			name: "promote of a delivery halted before its first wave is ignored", rec: record(halted, request(v1alpha1.ActionPromote)), obs: look(nil),
			state: v1alpha1.DeliveryHalted, reason: ReasonWaveFailed,
			history: []string{"RequestIgnored@/alice: Promote does not apply to a Halted delivery"},
			write:   true, requeue: time.Millisecond,
		},
		{
			name: "resume of a rolled-back wave gates it again with the delivered revision",
			rec:  record(started(0, time.Hour), soaking(time.Minute), waveHealth(cronJobE), halted, rolledBack, request(v1alpha1.ActionResume)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary started: 1 workloads",
			history: []string{"Resumed@canary/alice", "WaveStarted@canary/alice"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave canary (1 of 3) started: Deployment/a"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				w := s.Waves[0]
				if s.RolledBack || !w.StartedAt.Time.Equal(t0) || w.HealthySince != nil || w.Health != nil {
					t.Errorf("RolledBack %v, canary %+v: want not rolled back, started now, nothing else", s.RolledBack, w)
				}
			},
		},
		{
			name: "resume of a delivery halted before its first wave starts the first", rec: record(halted, request(v1alpha1.ActionResume)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary started",
			history: []string{"Resumed@/alice", "WaveStarted@canary/alice"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave canary (1 of 3) started: Deployment/a"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
		},
		{
			name: "resume of a rolling delivery is ignored", rec: record(started(0, time.Minute), request(v1alpha1.ActionResume)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary started",
			history: []string{"RequestIgnored@canary/alice: Resume does not apply to a Progressing delivery"},
			write:   true, requeue: time.Millisecond,
		},
		{
			name: "resume of a delivery waiting for approval is ignored", rec: record(waitingForRest, request(v1alpha1.ActionResume)), obs: look(nil),
			state: v1alpha1.DeliveryWaitingForApproval, reason: ReasonApprovalRequired,
			history: []string{"RequestIgnored@rest/alice: Resume does not apply to a WaitingForApproval delivery"},
			write:   true, requeue: time.Millisecond,
		},
		{
			name: "a request handled before is not acted on again", rec: record(started(0, time.Minute), request(v1alpha1.ActionHalt), handled), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, needsGate: true,
		},

		// Waiting for a person.
		{
			name: "a wave waiting for approval waits", rec: record(waitingForRest), obs: look(nil),
			state: v1alpha1.DeliveryWaitingForApproval, reason: ReasonApprovalRequired, requeue: 30 * time.Second,
		},
		{
			name: "a halted delivery waits", rec: record(started(0, time.Minute), halted), obs: look(nil),
			state: v1alpha1.DeliveryHalted, reason: ReasonWaveFailed, requeue: 30 * time.Second,
		},

		// The first wave.
		{
			name: "the first wave starts", rec: record(), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary started: 1 workloads",
			history: []string{"WaveStarted@canary"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave canary (1 of 3) started: Deployment/a"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
		},
		{
			name: "a first wave that asks for approval waits for it before anything moves", rec: record(canaryApproval), obs: look(nil),
			state: v1alpha1.DeliveryWaitingForApproval, reason: ReasonApprovalRequired,
			message: "wave canary waits for approval: configward delivery promote -n shop configmap/app",
			events:  []string{"Normal DeliveryWaitingForApproval on the config: ConfigDelivery configmap-app-7: wave canary waits for approval: configward delivery promote -n shop configmap/app"},
			write:   true, requeue: 30 * time.Second,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.CurrentWave != "canary" || s.Waves[0].StartedAt != nil {
					t.Errorf("current wave %q started %v: want canary, not started", s.CurrentWave, s.Waves[0].StartedAt)
				}
			},
		},
		{
			name: "a promote starts a first wave that waited for approval", rec: record(canaryApproval, waitingForCanary, request(v1alpha1.ActionPromote)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary started: 1 workloads",
			history: []string{"Promoted@canary/alice: approved", "WaveStarted@canary/alice"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave canary (1 of 3) started: Deployment/a"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
		},
		{
			name: "a started wave needs its gate", rec: record(started(0, time.Minute)), obs: look(nil),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, needsGate: true,
		},

		// The gate.
		{
			name: "a failed workload halts the delivery", rec: record(started(0, time.Minute)), obs: look(&Gate{Failed: failedA}),
			state: v1alpha1.DeliveryHalted, reason: ReasonWaveFailed, message: "wave canary failed: " + failedA + rejected,
			history: []string{"Halted@canary: wave canary failed: " + failedA + rejected},
			events: []string{
				"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: wave canary failed: " + failedA + rejected,
				"Warning ConfigDeliveryHalted on Deployment/a: ConfigDelivery configmap-app-7 of ConfigMap app halted in this workload's wave: wave canary failed: " + failedA + rejected,
			},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeFailed}, Finished: v1alpha1.DeliveryHalted}, write: true,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.RolledBack || s.FinishedAt != nil {
					t.Errorf("RolledBack %v, FinishedAt %v: want neither", s.RolledBack, s.FinishedAt)
				}
			},
		},
		{
			name: "a failed workload with onFailure Rollback rolls its wave back", rec: record(onFailureRollback, started(0, time.Minute)), obs: look(&Gate{Failed: failedA}),
			state: v1alpha1.DeliveryHalted, reason: ReasonWaveFailed,
			message: "wave canary failed: " + failedA + "; the wave is rolled back to the revisions it ran before" + rejected,
			history: []string{"Halted@canary: wave canary failed: " + failedA + "; the wave is rolled back to the revisions it ran before" + rejected},
			events: []string{
				"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: wave canary failed: " + failedA + "; the wave is rolled back to the revisions it ran before" + rejected,
				"Warning ConfigDeliveryHalted on Deployment/a: ConfigDelivery configmap-app-7 of ConfigMap app halted in this workload's wave: wave canary failed: " + failedA + "; the wave is rolled back to the revisions it ran before" + rejected,
			},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeFailed}, Finished: v1alpha1.DeliveryHalted}, write: true,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if !s.RolledBack {
					t.Error("the wave is not rolled back")
				}
			},
		},
		{
			name: "a workload unready during the soak halts the delivery", rec: record(started(1, 5*time.Minute), soaking(10*time.Second)), obs: look(&Gate{Unready: []string{unreadyB}}),
			state: v1alpha1.DeliveryHalted, reason: ReasonWaveUnhealthy, message: "wave early stopped being ready during its soak: " + unreadyB + rejected,
			history: []string{"Halted@early: wave early stopped being ready during its soak: " + unreadyB + rejected},
			events: []string{
				"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: wave early stopped being ready during its soak: " + unreadyB + rejected,
				"Warning ConfigDeliveryHalted on Deployment/b, Deployment/c: ConfigDelivery configmap-app-7 of ConfigMap app halted in this workload's wave: wave early stopped being ready during its soak: " + unreadyB + rejected,
			},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeFailed}, Finished: v1alpha1.DeliveryHalted}, write: true,
		},
		{
			name: "a workload unready before its wave was healthy is waited for", rec: record(started(0, time.Minute)), obs: look(&Gate{Unready: []string{unreadyA}}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary: waiting for " + unreadyA,
			write: true, progressWritten: true, requeue: 2 * time.Second,
		},
		{
			name: "the soak starts over when a workload rolls again", rec: record(started(0, 5*time.Minute), soaking(30*time.Second)), obs: look(&Gate{Progressing: []string{progressingA}}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary: soak starts over once " + progressingA,
			history: []string{"SoakRestarted@canary: " + progressingA},
			write:   true, requeue: 2 * time.Second,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.Waves[0].HealthySince != nil {
					t.Errorf("healthy since %v, want the soak reset", s.Waves[0].HealthySince)
				}
			},
		},
		{
			name: "a wave not healthy past its progress deadline halts the delivery", rec: record(started(0, 301*time.Second)), obs: look(&Gate{Progressing: []string{progressingA}}),
			state: v1alpha1.DeliveryHalted, reason: ReasonProgressDeadlineExceeded, message: "wave canary not healthy 300s after it started: " + progressingA + rejected,
			history: []string{"Halted@canary: wave canary not healthy 300s after it started: " + progressingA + rejected},
			events: []string{
				"Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: wave canary not healthy 300s after it started: " + progressingA + rejected,
				"Warning ConfigDeliveryHalted on Deployment/a: ConfigDelivery configmap-app-7 of ConfigMap app halted in this workload's wave: wave canary not healthy 300s after it started: " + progressingA + rejected,
			},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeFailed}, Finished: v1alpha1.DeliveryHalted}, write: true,
		},
		{
			name: "a wave at its progress deadline exactly still waits", rec: record(started(0, 300*time.Second)), obs: look(&Gate{Progressing: []string{progressingA}}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary: waiting for " + progressingA,
			write: true, progressWritten: true, requeue: 2 * time.Second,
		},
		{
			name: "a waiting wave writes what it waits for once the last write is progressWrites old",
			rec:  record(started(0, time.Minute)), obs: Observation{Now: t0, Gate: &Gate{Progressing: []string{progressingA}}, LastProgressWrite: t0.Add(-10 * time.Second)},
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary: waiting for " + progressingA,
			write: true, progressWritten: true, requeue: 2 * time.Second,
		},
		{
			name: "a waiting wave does not write again sooner",
			rec:  record(started(0, time.Minute)), obs: Observation{Now: t0, Gate: &Gate{Progressing: []string{progressingA}}, LastProgressWrite: t0.Add(-9 * time.Second)},
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary started: 1 workloads",
			requeue: 2 * time.Second,
		},
		{
			name: "a waiting wave writes at once when a workload's state at the gate changes",
			rec:  record(started(0, time.Minute)), obs: Observation{Now: t0, Gate: &Gate{Progressing: []string{progressingA}, Health: []v1alpha1.WorkloadHealth{cronJobE}}, LastProgressWrite: t0.Add(-time.Second)},
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary: waiting for " + progressingA,
			write: true, requeue: 2 * time.Second,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if len(s.Waves[0].Health) != 1 || s.Waves[0].Health[0] != cronJobE {
					t.Errorf("health %v, want %v", s.Waves[0].Health, cronJobE)
				}
			},
		},
		{
			name: "a waiting wave whose message is written already writes nothing",
			rec:  record(started(0, time.Minute), message("wave canary: waiting for "+progressingA)), obs: look(&Gate{Progressing: []string{progressingA}}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, requeue: 2 * time.Second,
		},
		{
			name: "a healthy wave starts its soak", rec: record(started(0, time.Minute)), obs: look(&Gate{Health: []v1alpha1.WorkloadHealth{cronJobE}}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary healthy; soaking 60s",
			history: []string{"WaveHealthy@canary: passed without showing health: CronJob e (" + cronJobE.Message + ")"},
			write:   true, requeue: 2 * time.Second,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if w := s.Waves[0]; w.HealthySince == nil || !w.HealthySince.Time.Equal(t0) || len(w.Health) != 1 {
					t.Errorf("canary %+v, want healthy since now with its unverified workload", w)
				}
			},
		},
		{
			name: "a healthy wave without a soak is looked at again a second later", rec: record(soakSeconds(0), started(0, time.Minute)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave canary healthy; soaking 0s",
			history: []string{"WaveHealthy@canary"},
			write:   true, requeue: time.Second,
		},
		{
			name: "a soaking wave waits out its soak", rec: record(started(0, 5*time.Minute), soaking(30*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, requeue: 2 * time.Second,
		},
		{
			name: "a soak's last moments are waited out to the end", rec: record(started(0, 5*time.Minute), soaking(60*time.Second+500*time.Millisecond)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, requeue: 500 * time.Millisecond,
		},
		{
			name: "a soaked wave completes and the next starts", rec: record(started(0, 5*time.Minute), soaking(61*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryProgressing, reason: ReasonWaveStarted, message: "wave early started: 2 workloads",
			history: []string{"WaveCompleted@canary", "WaveStarted@early"},
			events:  []string{"Normal DeliveryWaveStarted on the config: ConfigDelivery configmap-app-7: wave early (2 of 3) started: Deployment/b, Deployment/c"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted, WaveOutcomeStarted}}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if !s.Waves[0].CompletedAt.Time.Equal(t0) || s.CurrentWave != "early" {
					t.Errorf("canary completed %v, current wave %s: want now and early", s.Waves[0].CompletedAt, s.CurrentWave)
				}
			},
		},
		{
			name: "a soaked wave before a wave that needs approval waits for it", rec: record(started(1, 5*time.Minute), soaking(61*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliveryWaitingForApproval, reason: ReasonApprovalRequired, message: "wave rest waits for approval: configward delivery promote -n shop configmap/app",
			history: []string{"WaveCompleted@early"},
			events:  []string{"Normal DeliveryWaitingForApproval on the config: ConfigDelivery configmap-app-7: wave rest waits for approval: configward delivery promote -n shop configmap/app"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted}}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.CurrentWave != "rest" || s.Waves[2].StartedAt != nil {
					t.Errorf("current wave %s, rest started %v: want rest, not started", s.CurrentWave, s.Waves[2].StartedAt)
				}
			},
		},
		{
			name: "the last wave soaked ends the delivery", rec: record(started(2, 5*time.Minute), soaking(61*time.Second)), obs: look(&Gate{}),
			state: v1alpha1.DeliverySucceeded, reason: ReasonAllWavesHealthy, message: "every wave healthy: app-2b is delivered",
			history: []string{"WaveCompleted@rest", "Succeeded@rest: every wave healthy: app-2b is delivered"},
			events:  []string{"Normal DeliverySucceeded on the config: ConfigDelivery configmap-app-7: every wave healthy: app-2b is delivered"},
			metrics: Metrics{Waves: []WaveOutcome{WaveOutcomeCompleted}, Finished: v1alpha1.DeliverySucceeded}, write: true, requeue: time.Millisecond,
			also: func(t *testing.T, s v1alpha1.ConfigDeliveryStatus) {
				if s.FinishedAt == nil || !s.FinishedAt.Time.Equal(t0) {
					t.Errorf("finished %v, want now", s.FinishedAt)
				}
			},
		},

		// Records Next does not move.
		{
			name: "a finished delivery takes no step", rec: record(started(0, time.Minute), finished(v1alpha1.DeliverySucceeded), request(v1alpha1.ActionResume)), obs: look(nil),
			state: v1alpha1.DeliverySucceeded, reason: ReasonWaveStarted,
		},
		{
			name: "a record without its placement takes no step", rec: record(finished("")), obs: look(nil),
			reason: ReasonStarted,
		},
	}...)
}

func TestNext(t *testing.T) {
	for _, tc := range stepRows() {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.rec.DeepCopy()
			step := Next(tc.rec, tc.obs)
			if !equality.Semantic.DeepEqual(tc.rec, before) {
				t.Fatal("Next changed the record it was given")
			}
			checkStep(t, before, step, tc)
		})
	}
}

// checkStep compares a step with what row wants.
func checkStep(t *testing.T, rec *v1alpha1.ConfigDelivery, step Step, row stepRow) {
	t.Helper()
	s := step.Status
	if s.State != row.state || s.Reason != row.reason {
		t.Errorf("state %s/%s, want %s/%s", s.State, s.Reason, row.state, row.reason)
	}
	if !strings.Contains(s.Message, row.message) {
		t.Errorf("message %q, want it to contain %q", s.Message, row.message)
	}
	if got := appended(t, rec.Status.History, s.History); !slices.Equal(got, row.history) {
		t.Errorf("history entries\n%q\nwant\n%q", got, row.history)
	}
	if got := described(step.Events); !slices.Equal(got, row.events) {
		t.Errorf("events\n%q\nwant\n%q", got, row.events)
	}
	if !slices.Equal(step.Metrics.Waves, row.metrics.Waves) || step.Metrics.Finished != row.metrics.Finished {
		t.Errorf("metrics %+v, want %+v", step.Metrics, row.metrics)
	}
	if step.Write != row.write || step.ProgressWritten != row.progressWritten || step.NeedsGate != row.needsGate {
		t.Errorf("write %v, progress written %v, needs the gate %v; want %v, %v, %v",
			step.Write, step.ProgressWritten, step.NeedsGate, row.write, row.progressWritten, row.needsGate)
	}
	if step.Requeue != row.requeue {
		t.Errorf("requeue after %v, want %v", step.Requeue, row.requeue)
	}
	if !step.Write && !equality.Semantic.DeepEqual(s, rec.Status) {
		t.Error("a step that writes nothing changed the status")
	}
	if row.also != nil {
		row.also(t, s)
	}
}

// appended are the entries after's history has beyond before's, as
// What@wave/by: message; each must be stamped with the look's time.
func appended(t *testing.T, before, after []v1alpha1.DeliveryEvent) []string {
	t.Helper()
	if len(after) < len(before) || !equality.Semantic.DeepEqual(after[:len(before)], before) {
		t.Fatalf("history %v does not keep %v", after, before)
	}
	var out []string
	for _, e := range after[len(before):] {
		if !e.Time.Time.Equal(t0) {
			t.Errorf("history entry %s at %v, want the look's time", e.What, e.Time)
		}
		out = append(out, entry(e))
	}
	return out
}

func entry(e v1alpha1.DeliveryEvent) string {
	s := e.What + "@" + e.Wave
	if e.By != "" {
		s += "/" + e.By
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func described(events []Event) []string {
	var out []string
	for _, e := range events {
		on := "the config"
		if len(e.Workloads) > 0 {
			on = targetList(e.Workloads)
		}
		out = append(out, fmt.Sprintf("%s %s on %s: %s", e.Type, e.Reason, on, e.Message))
	}
	return out
}

func TestFinish(t *testing.T) {
	for _, tc := range []struct {
		state      v1alpha1.DeliveryState
		reason, by string
		event      string
		finishedAt bool
	}{
		{v1alpha1.DeliverySucceeded, ReasonAllWavesHealthy, "", "Normal DeliverySucceeded on the config: ConfigDelivery configmap-app-7: why", true},
		{v1alpha1.DeliveryHalted, ReasonHaltedByUser, "alice", "Warning DeliveryHalted on the config: ConfigDelivery configmap-app-7: why", false},
		{v1alpha1.DeliverySuperseded, ReasonNewerContent, "", "Normal DeliveryEnded on the config: ConfigDelivery configmap-app-7 superseded: why", true},
		{v1alpha1.DeliveryCancelled, ReasonNotDelivered, "", "Normal DeliveryEnded on the config: ConfigDelivery configmap-app-7 cancelled: why", true},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			rec := record(started(1, time.Minute))
			before := rec.DeepCopy()
			step := Finish(rec, tc.state, tc.reason, "why", tc.by, t0)
			if !equality.Semantic.DeepEqual(rec, before) {
				t.Fatal("Finish changed the record it was given")
			}
			history := fmt.Sprintf("%s@early: why", tc.state)
			if tc.by != "" {
				history = fmt.Sprintf("%s@early/%s: why", tc.state, tc.by)
			}
			checkStep(t, before, step, stepRow{
				state: tc.state, reason: tc.reason, message: "why", history: []string{history}, events: []string{tc.event},
				metrics: Metrics{Finished: tc.state}, write: true,
			})
			if got := step.Status.FinishedAt != nil && step.Status.FinishedAt.Time.Equal(t0); got != tc.finishedAt {
				t.Errorf("finished at %v; want it written: %v", step.Status.FinishedAt, tc.finishedAt)
			}
		})
	}
}

func TestBegin(t *testing.T) {
	consumers := []Consumer{
		{Kind: "Deployment", Name: "b", From: "app-1a"},
		{Kind: "Deployment", Name: "a", From: "app-1a"},
		{Kind: "Deployment", Name: "c", From: "app-0z"},
	}
	bare := []Consumer{{Kind: "Deployment", Name: "a"}}
	const unkept = "; no consumer's revision names a snapshot of the old content (revisions were turned on after they were last stamped), so pods created for consumers not reached yet read the new content"
	for _, tc := range []struct {
		name      string
		consumers []Consumer
		from      string
		message   string
		waves     [][]string
	}{
		{"most consumers' revision is kept for the ones not reached", consumers, "app-1a",
			"delivering ConfigMap app-2b to 3 workloads in 1 waves", [][]string{{"a", "b", "c"}}},
		{"no revision kept: says what that means", bare, "",
			"delivering ConfigMap app-2b to 1 workloads in 1 waves" + unkept, [][]string{{"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A record whose creator stopped before it wrote the placement,
			// with a request and a status left from an earlier leader's try.
			rec := record(request(v1alpha1.ActionHalt), finished(""), handled)
			rec.Spec.Settings.Waves = []v1alpha1.Wave{{Name: "all"}}
			step := Begin(rec, appTo("app-2b"), tc.consumers, t0)
			s := step.Status
			if s.State != v1alpha1.DeliveryProgressing || s.Reason != ReasonStarted || s.Message != tc.message || s.To != "app-2b" || s.From != tc.from {
				t.Errorf("status %s/%s %q to %s from %s; want Progressing/Started %q to app-2b from %s", s.State, s.Reason, s.Message, s.To, s.From, tc.message, tc.from)
			}
			if got := names(s.Waves); fmt.Sprint(got) != fmt.Sprint(tc.waves) {
				t.Errorf("waves %v, want %v", got, tc.waves)
			}
			if got := appended(t, nil, s.History); !slices.Equal(got, []string{"Started@: " + tc.message}) {
				t.Errorf("history %q, want only Started", got)
			}
			if s.HandledRequest != "" || s.StartedAt == nil || !s.StartedAt.Time.Equal(t0) {
				t.Errorf("handled request %q, started %v: want none and now", s.HandledRequest, s.StartedAt)
			}
			want := []string{"Normal DeliveryStarted on the config: " + tc.message + " (ConfigDelivery configmap-app-7)"}
			if got := described(step.Events); !slices.Equal(got, want) || !step.Write || step.Requeue != time.Millisecond {
				t.Errorf("events %q, write %v, requeue %v; want %q, a write, and a look right after", got, step.Write, step.Requeue, want)
			}
		})
	}
}

func TestHistoryKeepsTheLast50(t *testing.T) {
	rec := record()
	rec.Status.History = nil
	for i := range 50 {
		rec.Status.History = append(rec.Status.History, v1alpha1.DeliveryEvent{What: fmt.Sprint(i)})
	}
	h := Next(rec, look(nil)).Status.History
	if len(h) != 50 || h[0].What != "1" || h[49].What != v1alpha1.HistoryWaveStarted {
		t.Fatalf("history of %d from %s to %s, want 50 from 1 to WaveStarted", len(h), h[0].What, h[len(h)-1].What)
	}
}

// TestNextLeavesSharedArrays: a step appends to a history or changes a
// wave without writing into the arrays the record's status holds, which
// may be the cache's.
func TestNextLeavesSharedArrays(t *testing.T) {
	rec := record(started(0, 5*time.Minute), soaking(61*time.Second))
	rec.Status.History = slices.Grow(rec.Status.History, 10)
	spare := rec.Status.History[:cap(rec.Status.History)]
	step := Next(rec, look(&Gate{}))
	if len(step.Status.History) != 3 || spare[1].What != "" {
		t.Fatalf("history %v; the record's spare capacity holds %q", step.Status.History, spare[1].What)
	}
	if rec.Status.Waves[0].CompletedAt != nil || rec.Status.Waves[1].StartedAt != nil {
		t.Fatal("the record's waves changed")
	}
}

func TestGate(t *testing.T) {
	var g Gate
	target := func(name string) v1alpha1.DeliveryTarget {
		return v1alpha1.DeliveryTarget{Kind: "Deployment", Name: name}
	}
	g.Add(target("a"), Healthy, "")
	g.Add(target("b"), Progressing, "rolling")
	g.Add(target("c"), Unready, "pod c-1 not ready")
	g.Add(target("d"), Unverified, "paused")
	g.Add(target("e"), Failed, "crashed")
	g.Add(target("f"), Failed, "crashed too")
	g.Add(target("g"), Progressing, "rolling")
	g.Add(target("h"), Progressing, "rolling")
	if g.Failed != "Deployment e: crashed" {
		t.Errorf("failed %q, want the first failure", g.Failed)
	}
	if want := "Deployment c (pod c-1 not ready), Deployment b (rolling), Deployment g (rolling), 1 more"; g.waiting() != want {
		t.Errorf("waiting for %q, want %q", g.waiting(), want)
	}
	var health []string
	for _, h := range g.Health {
		health = append(health, h.Name+" "+h.State)
	}
	if want := []string{"d Unverified", "e Failed", "f Failed"}; !slices.Equal(health, want) {
		t.Errorf("health %v, want %v", health, want)
	}
	if g.Healthy() || !(&Gate{Health: []v1alpha1.WorkloadHealth{cronJobE}}).Healthy() {
		t.Error("healthy: want a gate with waiting workloads not healthy, one with only unverified ones healthy")
	}
}

// TestHistoryIsDocumented: the list of history entries in the API's doc of
// DeliveryEvent.What is exactly what the steps write, and every Event
// reason a step asks for is among EventReasons.
func TestHistoryIsDocumented(t *testing.T) {
	src, err := os.ReadFile("../api/v1alpha1/configdelivery_types.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := regexp.MustCompile(`(?s)// What happened: (.*?)\n\tWhat string`).FindSubmatch(src)
	if doc == nil {
		t.Fatal("no doc of DeliveryEvent.What in the API")
	}
	documented := regexp.MustCompile(`\b[A-Z][A-Za-z]+\b`).FindAllString(string(doc[1]), -1)

	written := map[string]bool{}
	reasons := map[string]bool{}
	note := func(before []v1alpha1.DeliveryEvent, s Step) {
		for _, e := range s.Status.History[len(before):] {
			written[e.What] = true
		}
		for _, e := range s.Events {
			reasons[e.Reason] = true
		}
	}
	for _, row := range stepRows() {
		note(row.rec.Status.History, Next(row.rec, row.obs))
	}
	for _, state := range []v1alpha1.DeliveryState{v1alpha1.DeliverySucceeded, v1alpha1.DeliveryHalted, v1alpha1.DeliverySuperseded, v1alpha1.DeliveryCancelled} {
		rec := record()
		note(rec.Status.History, Finish(rec, state, "Why", "why", "", t0))
	}
	note(nil, Begin(record(), appTo("app-2b"), nil, t0))

	for _, what := range documented {
		if !written[what] {
			t.Errorf("DeliveryEvent.What documents %s, which no step writes", what)
		}
		delete(written, what)
	}
	for what := range written {
		t.Errorf("a step writes %s, which the doc of DeliveryEvent.What does not list", what)
	}
	all := EventReasons()
	for _, r := range all {
		if !reasons[r] {
			t.Errorf("EventReasons has %s, which no step records", r)
		}
		delete(reasons, r)
	}
	for r := range reasons {
		t.Errorf("a step records Events of reason %s, which EventReasons lacks", r)
	}
}

// appTo is what Begin delivers of record()'s config, ConfigMap app.
func appTo(snap string) revision.Snapshots {
	return revision.Snapshots{{Kind: refs.ConfigMap, Name: "app"}: snap}
}
