package delivery

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
)

// Next decides the next transition of an open delivery whose placement is
// written (Begin). rec is only read. A finished record, or one without its
// placement, takes no step.
//
// In order: a person's request not handled yet is acted on; a delivery
// waiting for approval or halted waits; the first wave starts; otherwise
// the current wave's gate decides: a failure halts, a wave unready during
// its soak halts, a wave that stops being healthy starts its soak over, a
// wave past its progress deadline halts, a waiting wave says what it
// waits for, a healthy wave starts its soak, and a wave soaked long
// enough completes.
func Next(rec *v1alpha1.ConfigDelivery, obs Observation) Step {
	c := change{rec: rec, now: metav1.NewTime(obs.Now), step: Step{Status: rec.Status}}
	state := rec.Status.State
	if !Placed(rec) {
		return c.step
	}
	if req := rec.Spec.Request; req != nil && req.ID != rec.Status.HandledRequest {
		c.handle(*req)
		return c.then(soon)
	}
	if state == v1alpha1.DeliveryWaitingForApproval || state == v1alpha1.DeliveryHalted {
		return c.then(waitingPoll)
	}
	i := CurrentWave(rec)
	if i < 0 {
		switch {
		case immediate(rec):
			c.startAll()
			return c.then(soon)
		case rec.Status.Waves[0].Approval && rec.Spec.BreakGlass == nil:
			// Even the first wave may wait for a person: nothing moves
			// before they promote it.
			c.awaitApproval(0)
			return c.then(waitingPoll)
		}
		c.skipApproval(0)
		c.startWave(0, "")
		return c.then(soon)
	}
	if obs.Gate == nil {
		c.step.NeedsGate = true
		return c.step
	}
	if rec.Status.Bake != nil {
		return c.atBake(obs.Measurements)
	}
	return c.atGate(i, obs)
}

// change builds one Step from a record and leaves the record as it was.
// The status is copied shallowly, and what a step changes (the waves, the
// history) is copied before it is changed: the record may be the cache's,
// and a status of a thousand workloads is too large to copy on every look.
type change struct {
	rec         *v1alpha1.ConfigDelivery
	now         metav1.Time
	step        Step
	wavesCopied bool
}

// then is the step, looked at again after requeue.
func (c *change) then(requeue time.Duration) Step {
	c.step.Requeue = requeue
	return c.step
}

// stamp is the time of the step, for one field of the status: a copy of
// its own, so no two fields of the status share one.
func (c *change) stamp() *metav1.Time {
	t := c.now
	return &t
}

// wave is wave i of the new status, to be changed.
func (c *change) wave(i int) *v1alpha1.WaveStatus {
	if !c.wavesCopied {
		c.step.Status.Waves = slices.Clone(c.step.Status.Waves)
		c.wavesCopied = true
	}
	return &c.step.Status.Waves[i]
}

// history appends an entry to the record's history, keeping the last
// historyKept.
func (c *change) history(wave, what, by, message string) {
	// Clipped, so the append never writes into the record's own array.
	h := append(slices.Clip(c.step.Status.History), v1alpha1.DeliveryEvent{Time: c.now, Wave: wave, What: what, By: by, Message: message})
	if len(h) > historyKept {
		h = h[len(h)-historyKept:]
	}
	c.step.Status.History = h
}

// event records an Event on the delivered config.
func (c *change) event(typ, reason, message string) {
	c.step.Events = append(c.step.Events, Event{Type: typ, Reason: reason, Message: message})
}

func (c *change) countWave(o WaveOutcome) {
	c.step.Metrics.Waves = append(c.step.Metrics.Waves, o)
}

// handle acts on a person's request once; one that does not apply to the
// state is recorded as ignored.
func (c *change) handle(req v1alpha1.DeliveryRequest) {
	s := &c.step.Status
	s.HandledRequest = req.ID
	by := req.RequestedBy
	i := CurrentWave(c.rec)
	state := s.State
	switch {
	case req.Action == v1alpha1.ActionHalt && (state == v1alpha1.DeliveryProgressing || state == v1alpha1.DeliveryWaitingForApproval):
		c.finish(v1alpha1.DeliveryHalted, ReasonHaltedByUser, "halted by "+by+"; no further workload is re-stamped", by)
	case req.Action == v1alpha1.ActionPromote && Open(state) && s.Bake != nil:
		// A person ends the bake: the delivery is done.
		b := *s.Bake
		b.CompletedAt = c.stamp()
		s.Bake, s.RolledBack = &b, false
		c.history(BakeWave, v1alpha1.HistoryPromoted, by, "")
		c.finish(v1alpha1.DeliverySucceeded, ReasonAllWavesHealthy, fmt.Sprintf("promoted during the bake: %s is delivered", s.To), by)
	case req.Action == v1alpha1.ActionResume && state == v1alpha1.DeliveryHalted && s.Bake != nil:
		// The bake starts over; waves rolled back by a failed bake take
		// the delivered content again, all at once.
		s.RolledBack = false
		c.history(BakeWave, v1alpha1.HistoryResumed, by, "")
		c.startBake()
	case req.Action == v1alpha1.ActionPromote && state == v1alpha1.DeliveryWaitingForApproval:
		c.history(s.CurrentWave, v1alpha1.HistoryPromoted, by, "approved")
		c.startWave(i+1, by)
	case req.Action == v1alpha1.ActionPromote && Open(state) && i >= 0:
		c.next(i, v1alpha1.HistoryPromoted, by)
	case req.Action == v1alpha1.ActionResume && state == v1alpha1.DeliveryHalted:
		// The current wave is gated again with a new deadline; a
		// rolled-back wave takes the delivered revision again.
		s.RolledBack = false
		c.history(s.CurrentWave, v1alpha1.HistoryResumed, by, "")
		c.startWave(max(i, 0), by)
	default:
		c.history(s.CurrentWave, v1alpha1.HistoryRequestIgnored, by, fmt.Sprintf("%s does not apply to a %s delivery", req.Action, state))
		c.step.Write = true
	}
}

// atGate moves wave i on by what its gate saw.
func (c *change) atGate(i int, obs Observation) Step {
	g := obs.Gate
	wave := &c.rec.Status.Waves[i]
	healthy, waiting := g.Healthy(), g.waiting()
	s := configpolicy.DeliveryDefaults(c.rec.Spec.Settings)
	// The record keeps whole seconds: the soak is counted from the second
	// after the one written, so it is never shorter than soakSeconds.
	soak := time.Duration(*s.SoakSeconds)*time.Second + time.Second
	switch {
	case g.Failed != "":
		c.fail(ReasonWaveFailed, fmt.Sprintf("wave %s failed: %s", wave.Name, g.Failed))
		return c.then(0)
	case len(g.Unready) > 0 && wave.HealthySince != nil:
		c.fail(ReasonWaveUnhealthy, fmt.Sprintf("wave %s stopped being ready during its soak: %s", wave.Name, strings.Join(g.Unready, ", ")))
		return c.then(0)
	case !healthy && wave.HealthySince != nil:
		// A workload of the wave rolls again (another delivery, a new
		// image): the soak starts over once it is healthy.
		c.wave(i).HealthySince = nil
		c.step.Status.Message = fmt.Sprintf("wave %s: soak starts over once %s", wave.Name, waiting)
		c.history(wave.Name, v1alpha1.HistorySoakRestarted, "", waiting)
		c.step.Write = true
		return c.then(gatePoll)
	case !healthy && c.now.Sub(wave.StartedAt.Time) > time.Duration(s.ProgressDeadlineSeconds)*time.Second:
		c.fail(ReasonProgressDeadlineExceeded, fmt.Sprintf("wave %s not healthy %ds after it started: %s", wave.Name, s.ProgressDeadlineSeconds, waiting))
		return c.then(0)
	case !healthy:
		c.progress(i, fmt.Sprintf("wave %s: waiting for %s", wave.Name, waiting), g.Health, obs.LastProgressWrite)
		return c.then(gatePoll)
	case wave.HealthySince == nil:
		w := c.wave(i)
		w.HealthySince, w.Health = c.stamp(), g.Health
		c.step.Status.Message = fmt.Sprintf("wave %s healthy; soaking %ds", wave.Name, *s.SoakSeconds)
		c.history(wave.Name, v1alpha1.HistoryWaveHealthy, "", unverifiedNote(g.Health))
		c.step.Write = true
		return c.then(min(soak, gatePoll))
	}
	checks, v := c.measure(wave.Checks, obs.Measurements, wave.Name)
	if len(obs.Measurements) > 0 {
		c.wave(i).Checks = checks
	}
	switch {
	case v.failed != "":
		c.fail(ReasonAnalysisFailed, fmt.Sprintf("wave %s failed its analysis: %s", wave.Name, v.failed))
		return c.then(0)
	case v.inconclusive != "":
		c.inconclusive(fmt.Sprintf("wave %s: %s", wave.Name, v.inconclusive))
		return c.then(0)
	}
	if left := wave.HealthySince.Add(soak).Sub(c.now.Time); left > 0 || !v.measured {
		// A check not measured yet holds the wave past its soak: its
		// first measurement is one interval after the wave was healthy.
		return c.then(waitFor(left))
	}
	c.next(i, v1alpha1.HistoryWaveCompleted, "")
	return c.then(soon)
}

// atBake measures the bake after the last wave: a failure fails the whole
// delivery; once bakeSeconds are over and every check has been measured,
// it succeeds.
func (c *change) atBake(ms []Measurement) Step {
	b := *c.rec.Status.Bake
	checks, v := c.measure(b.Checks, ms, BakeWave)
	if len(ms) > 0 {
		b.Checks = checks
		c.step.Status.Bake = &b
	}
	switch {
	case v.failed != "":
		c.fail(ReasonAnalysisFailed, "the bake after the last wave failed its analysis: "+v.failed)
		return c.then(0)
	case v.inconclusive != "":
		c.inconclusive("the bake after the last wave: " + v.inconclusive)
		return c.then(0)
	}
	secs := bakeSeconds(c.rec)
	if left := b.StartedAt.Add(time.Duration(secs)*time.Second + time.Second).Sub(c.now.Time); left > 0 || !v.measured {
		return c.then(waitFor(left))
	}
	b.CompletedAt = c.stamp()
	c.step.Status.Bake = &b
	c.finish(v1alpha1.DeliverySucceeded, ReasonAllWavesHealthy, fmt.Sprintf("every wave healthy and baked %ds: %s is delivered", secs, c.step.Status.To), "")
	return c.step
}

// waitFor is when to look again at a wave or bake with left of its time to
// run: at its end, or at the next gate poll; past its end (a check not
// measured yet), at the next gate poll.
func waitFor(left time.Duration) time.Duration {
	if left <= 0 {
		return gatePoll
	}
	return min(left, gatePoll)
}

// startBake begins the bake after the last wave.
func (c *change) startBake() {
	s := &c.step.Status
	s.Bake = &v1alpha1.BakeStatus{StartedAt: c.now}
	s.State, s.Reason = v1alpha1.DeliveryProgressing, ReasonBaking
	s.Message = fmt.Sprintf("every wave healthy; baking %ds with the checks over every consumer", bakeSeconds(c.rec))
	c.history(BakeWave, v1alpha1.HistoryBakeStarted, "", s.Message)
	c.step.Write = true
}

// inconclusive halts the delivery for a person to decide: a check had no
// data or could not be measured, and its settings say a person decides.
// Nothing is rolled back.
func (c *change) inconclusive(message string) {
	c.finish(v1alpha1.DeliveryHalted, ReasonAnalysisInconclusive,
		message+"; nothing was rolled back: promote to go on, resume to measure again, or change the config again", "")
}

// startAll starts every wave at once: a break-glass write asked for an
// immediate delivery, without waves' gates between them or checks.
func (c *change) startAll() {
	bg := c.rec.Spec.BreakGlass
	c.history("", v1alpha1.HistoryApprovalSkipped, "", fmt.Sprintf("break-glass (reason %q) asked for an immediate delivery: every wave starts at once, no approval, no checks, no bake", bg.Reason))
	for i := range c.step.Status.Waves {
		c.startWave(i, "")
	}
	c.step.Status.Message = fmt.Sprintf("immediate delivery (break-glass, reason %q): every wave started at once", bg.Reason)
}

// skipApproval records that a break-glass write skips wave i's approval.
func (c *change) skipApproval(i int) {
	if bg := c.rec.Spec.BreakGlass; bg != nil && c.step.Status.Waves[i].Approval {
		c.history(c.step.Status.Waves[i].Name, v1alpha1.HistoryApprovalSkipped, "",
			fmt.Sprintf("break-glass (reason %q) skips approvals; the waves and their checks still apply", bg.Reason))
	}
}

// progress writes what wave i waits for when a workload's state at the
// gate changed, and otherwise at most every progressWrites: a wave of a
// thousand workloads would rewrite its record with every pod.
func (c *change) progress(i int, msg string, health []v1alpha1.WorkloadHealth, lastWrite time.Time) {
	changed := !sameHealth(c.rec.Status.Waves[i].Health, health)
	if !changed {
		if msg == c.rec.Status.Message || c.now.Sub(lastWrite) < progressWrites {
			return
		}
		c.step.ProgressWritten = true
	}
	c.step.Status.Message, c.wave(i).Health = msg, health
	c.step.Write = true
}

// next completes wave i and starts the one after it, waits for its
// approval, or ends the delivery. what is the history entry of the
// completion: WaveCompleted, or Promoted by a person.
func (c *change) next(i int, what, by string) {
	s := &c.step.Status
	for _, j := range Judged(c.rec) {
		// Every wave judged with it (an immediate delivery's) completes
		// with the current one.
		if j < i {
			c.wave(j).CompletedAt = c.stamp()
		}
	}
	c.wave(i).CompletedAt = c.stamp()
	s.RolledBack = false
	c.countWave(WaveOutcomeCompleted)
	c.history(s.Waves[i].Name, what, by, "")
	switch {
	case i+1 >= len(s.Waves) && bakeSeconds(c.rec) > 0:
		c.startBake()
	case i+1 >= len(s.Waves):
		c.finish(v1alpha1.DeliverySucceeded, ReasonAllWavesHealthy, fmt.Sprintf("every wave healthy: %s is delivered", s.To), by)
	case s.Waves[i+1].Approval && what != v1alpha1.HistoryPromoted && c.rec.Spec.BreakGlass == nil:
		c.awaitApproval(i + 1)
	default:
		if what != v1alpha1.HistoryPromoted {
			c.skipApproval(i + 1)
		}
		c.startWave(i+1, by)
	}
}

// awaitApproval makes the delivery wait for a person's promote before wave
// i starts.
func (c *change) awaitApproval(i int) {
	s := &c.step.Status
	s.State, s.Reason = v1alpha1.DeliveryWaitingForApproval, ReasonApprovalRequired
	s.CurrentWave = s.Waves[i].Name
	s.Message = fmt.Sprintf("wave %s waits for approval: configward delivery promote -n %s %s/%s",
		s.CurrentWave, c.rec.Namespace, strings.ToLower(c.rec.Spec.Config.Kind), c.rec.Spec.Config.Name)
	if IsSet(c.rec) {
		s.Message += " (or any other member: " + MembersNamed(c.rec) + " moves as one)"
	}
	c.step.Write = true
	c.event(corev1.EventTypeNormal, EventWaitingForApproval, fmt.Sprintf("ConfigDelivery %s: %s", c.rec.Name, s.Message))
}

// startWave records that wave i starts; the rollout controllers re-stamp
// its workloads once they see the record.
func (c *change) startWave(i int, by string) {
	s := &c.step.Status
	w := c.wave(i)
	w.StartedAt, w.HealthySince, w.CompletedAt, w.Health, w.Checks = c.stamp(), nil, nil, nil, nil
	s.State, s.Reason, s.CurrentWave = v1alpha1.DeliveryProgressing, ReasonWaveStarted, w.Name
	s.Message = fmt.Sprintf("wave %s started: %d workloads", w.Name, len(w.Workloads))
	c.history(w.Name, v1alpha1.HistoryWaveStarted, by, "")
	c.step.Write = true
	c.countWave(WaveOutcomeStarted)
	c.event(corev1.EventTypeNormal, EventWaveStarted, fmt.Sprintf("ConfigDelivery %s: wave %s (%d of %d) started: %s",
		c.rec.Name, w.Name, i+1, len(s.Waves), targetList(w.Workloads)))
}

// fail halts the delivery; with onFailure: Rollback, the failed wave goes
// back to the revisions it ran before (Pin pins it to them again).
func (c *change) fail(reason, message string) {
	c.countWave(WaveOutcomeFailed)
	baking := c.step.Status.Bake != nil
	if c.rec.Spec.Settings.OnFailure == v1alpha1.FailureRollback {
		c.step.Status.RolledBack = true
		if baking {
			message += "; every wave is rolled back to what it ran before"
		} else {
			message += "; the wave is rolled back to the revisions it ran before"
		}
	}
	message += "; no further workload is re-stamped: promote, resume, or change the config again"
	c.finish(v1alpha1.DeliveryHalted, reason, message, "")
	var halted []v1alpha1.DeliveryTarget
	for i, w := range c.step.Status.Waves {
		if baking || judged(w) || i == CurrentWave(c.rec) {
			halted = append(halted, w.Workloads...)
		}
	}
	if len(halted) > 0 {
		c.step.Events = append(c.step.Events, Event{
			Workloads: halted,
			Type:      corev1.EventTypeWarning, Reason: EventWorkloadHalted,
			Message: fmt.Sprintf("ConfigDelivery %s of %s halted in this workload's wave: %s", c.rec.Name, MembersNamed(c.rec), message),
		})
	}
}

// finish moves the delivery to a final state (or Halted) with why.
func (c *change) finish(state v1alpha1.DeliveryState, reason, message, by string) {
	s := &c.step.Status
	s.State, s.Reason, s.Message = state, reason, message
	if state != v1alpha1.DeliveryHalted {
		s.FinishedAt = c.stamp()
	}
	c.history(s.CurrentWave, string(state), by, message)
	c.step.Write = true
	c.step.Metrics.Finished = state
	switch state {
	case v1alpha1.DeliveryHalted:
		c.event(corev1.EventTypeWarning, EventHalted, fmt.Sprintf("ConfigDelivery %s: %s", c.rec.Name, message))
	case v1alpha1.DeliverySucceeded:
		c.event(corev1.EventTypeNormal, EventSucceeded, fmt.Sprintf("ConfigDelivery %s: %s", c.rec.Name, message))
	default: // Superseded, Cancelled
		c.event(corev1.EventTypeNormal, EventEnded, fmt.Sprintf("ConfigDelivery %s %s: %s", c.rec.Name, strings.ToLower(string(state)), message))
	}
}

// sameHealth: the same workloads in the same states, whatever their
// messages say, so a message that changes with every pod does not count
// as a change.
func sameHealth(a, b []v1alpha1.WorkloadHealth) bool {
	return slices.EqualFunc(a, b, func(x, y v1alpha1.WorkloadHealth) bool {
		return x.Kind == y.Kind && x.Name == y.Name && x.State == y.State
	})
}

// unverifiedNote names the workloads that passed a healthy wave without
// showing health, for its history entry.
func unverifiedNote(health []v1alpha1.WorkloadHealth) string {
	var names []string
	for _, h := range health {
		if h.State == Unverified {
			names = append(names, fmt.Sprintf("%s %s (%s)", h.Kind, h.Name, h.Message))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "passed without showing health: " + strings.Join(names, "; ")
}

// targetList names the first ten workloads of a wave, for its Event.
func targetList(ts []v1alpha1.DeliveryTarget) string {
	var names []string
	for i, t := range ts {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(ts)-10))
			break
		}
		names = append(names, t.Kind+"/"+t.Name)
	}
	return strings.Join(names, ", ")
}
