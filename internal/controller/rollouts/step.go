package rollouts

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

// A reconcile of the rollout controller is one look (look: every read,
// stamp.Gather at most once), one pure step (next: what to write, what to
// report, when to look again) and one act (act: the writes, in order, and
// the Events once they stuck). The pacing of rollouts is a turn reserved
// at the controller-wide rate: a workload whose turn is not due waits by a
// requeue, not by holding a worker, and its look at the turn decides on
// the config of then, so a change made during the wait joins the rollout.

// seen is what one look saw of one workload.
type seen struct {
	// now is the time of the look.
	now time.Time
	// found: the workload exists. kind is its kind, for metrics.
	found bool
	kind  string
	// carried is the stamp it carries, decision what it should carry;
	// early: decided without facts (stamp.Early).
	carried  workload.Stamp
	decision stamp.Decision
	early    bool
	// changed are the logged changes of config it consumes since the last
	// rollout (rotated CSI versions included); waited: the last look found
	// its hash stale with none, and waited for them.
	changed []string
	waited  bool
	// turn is when its reserved turn at the pace is (zero: none reserved).
	turn time.Time
	// revisions: revisions are on in its namespace; snapshotsBlocked says
	// why snapshots cannot be written there.
	revisions        bool
	snapshotsBlocked string
	// flapping names the config that holds it (a flapping hold), the
	// threshold, the record, and the start of the episode already reported
	// (reported: one was).
	flappingKey flapping.Key
	flapping    flapping.Record
	threshold   flapping.Threshold
	episode     time.Time
	reported    bool
	// hold is what its own update strategy does with a new template
	// (paused, OnDelete, ...); nextRun: its next run takes the template (a
	// CronJob).
	hold    workload.Hold
	nextRun bool
}

// step is what a look decides: writes, Events, metrics, when to look
// again, and what the controller keeps in memory for the next look.
type step struct {
	// write is the stamp to write, after the snapshots it names
	// (snapshots) are written; takeTurn: first reserve a turn at the pace.
	write     *workload.Stamp
	snapshots revision.Snapshots
	takeTurn  bool
	// events are recorded once the step is done: for a write, once the
	// stamp stuck.
	events []notice
	// skipped and triggered count the rollouts metrics (by reason; a
	// rollout started), once the step is done.
	skipped   string
	triggered bool
	// log is what the controller logs once the step is done.
	log     string
	requeue time.Duration
	// keep: the logged changes stay for the next look (they are not
	// rolled out by this one).
	keep bool
	// wait, forgetWait: remember, or forget, that the look waited for a
	// logged change; episode (with rememberEpisode) is the flapping episode
	// to remember as reported, forgetEpisode forgets it; cancelTurn gives
	// a reserved turn back.
	wait, forgetWait bool
	episode          time.Time
	rememberEpisode  bool
	forgetEpisode    bool
	cancelTurn       bool
	// what names the changed config, for the Events of an act that fails.
	what string
}

// notice is an Event a step asks for, on the workload.
type notice struct {
	typ, reason, message string
}

// Reasons of the Events the rollout controller records on workloads.
const (
	EventChanged   = "ConfigChanged"
	EventNotRolled = "ConfigChangedNotRolled"
	// EventBlocked: a snapshot of the new revision cannot be written, or the
	// revision goes out unpinned because none can.
	EventBlocked = "ConfigRevisionBlocked"
)

// EventReasons are the reasons of every Event the rollout controller
// records.
func EventReasons() []string { return []string{EventChanged, EventNotRolled, EventBlocked} }

// retryStuck is how soon a stamp that did not stick whole is written again:
// the webhook replica that answered had an older view.
const retryStuck = time.Second

// next decides one step of the rollout controller from what one look saw.
// window is the batch window: a stale hash with no logged change waits it
// once for the change's log.
func next(s seen, window time.Duration) step {
	if !s.found {
		// Gone: nothing of it is kept.
		return step{forgetWait: true, forgetEpisode: true, cancelTurn: !s.turn.IsZero()}
	}
	d := s.decision
	st := step{cancelTurn: !s.turn.IsZero()}
	if s.early {
		st.forgetWait = true
		if len(s.changed) > 0 && (d.Hold == drift.OptedOut || d.Hold == drift.PolicyDisabled) {
			st.skipped = d.Hold.Reason
		}
		return st
	}
	if !d.Writes(s.carried) && (d.Hold.Reason == "" || d.Want.Hash == s.carried.Hash) {
		// Nothing to write, and nothing held back to report.
		st.forgetWait = true
		return st
	}
	if len(s.changed) == 0 && !s.waited {
		// Stale with no logged change: the change that made it stale may be
		// in the cache already while the handler that logs it has not run.
		// Wait the batch window for it, as a logged change would have, so
		// the Event names what changed.
		st.wait, st.requeue = true, max(window, time.Millisecond)
		return st
	}
	st.forgetWait = true
	st.what = "its config"
	if len(s.changed) > 0 {
		st.what = strings.Join(s.changed, ", ")
	}
	if d.Hold != (drift.Hold{}) {
		return held(s, st)
	}
	st.forgetEpisode = true
	switch {
	case s.turn.IsZero():
		st.takeTurn = true
	case s.turn.After(s.now):
		// Waiting for its turn: the changes stay for the look at the turn.
		st.cancelTurn, st.keep, st.requeue = false, true, s.turn.Sub(s.now)
		return st
	}
	st.cancelTurn = false
	want := d.Want
	st.write = &want
	if s.revisions {
		// A revision is rolled out only once every snapshot it names is
		// written: its pods would be refused, or read other bytes.
		st.snapshots = stamp.Snapshots(want)
	}
	switch {
	case s.hold.Reason != "":
		st.skipped = s.hold.Reason
		st.log = "config changed; pod template updated, pods not replaced"
		st.events = []notice{{corev1.EventTypeWarning, EventNotRolled, fmt.Sprintf(
			"%s changed: updated %s to %s, but %s: running pods keep the old config until %s", st.what, v1alpha1.ConfigHashAnnotation, want.Hash, s.hold.Why, s.hold.Until)}}
	case len(d.Unpinned) > 0:
		st.triggered = true
		st.log = "revision unpinned: its snapshots cannot be written"
		st.events = []notice{{corev1.EventTypeWarning, EventBlocked, fmt.Sprintf(
			"snapshots of %s cannot be written in its namespace (%s): configward took them out of the pod template, so its pods start and read them as they are now. "+
				"Let configward's controller write them (its ConfigPolicy's RevisionsReady condition says what refuses it); pods are pinned again at its next change after that",
			unpinnedList(d.Unpinned), s.snapshotsBlocked)}}
	default:
		st.triggered = true
		st.log = "config changed; rolling workload"
		effect := "which rolls the pods through the workload's own update strategy"
		if s.nextRun {
			effect = "which the next Job it starts uses; Jobs already started keep theirs"
		}
		st.events = []notice{{corev1.EventTypeNormal, EventChanged, fmt.Sprintf(
			"%s changed: updated %s to %s, %s", st.what, v1alpha1.ConfigHashAnnotation, want.Hash, effect)}}
	}
	return st
}

// held is the step of a look whose stamp a hold keeps: a Job's immutable
// template is reported once per change; flapping config holds the
// workload until it has been stable for its window, reported once per
// episode, with the logged changes kept for the rollout that follows.
func held(s seen, st step) step {
	changed := len(s.changed) > 0
	switch s.decision.Hold {
	case drift.Flapping:
		st.keep = true
		st.requeue = s.flapping.Until(s.threshold).Sub(s.now) + time.Second
		st.episode, st.rememberEpisode = s.flapping.Since, true
		if !s.reported || !s.episode.Equal(s.flapping.Since) {
			st.skipped = drift.Flapping.Reason
			st.log = "config changed; not rolled while config it consumes is flapping"
			st.events = []notice{{corev1.EventTypeWarning, EventNotRolled, fmt.Sprintf(
				"%s changed, but %s is flapping (%s; last written by %q; see its ConfigFlapping Event): running pods keep the config they run until it has been unchanged for %s",
				st.what, s.flappingKey.Object(), s.threshold, s.flapping.Writer, s.threshold.Window)}}
		}
	case drift.JobImmutable:
		// A Job's pod template is immutable; the next Job picks the change up.
		if changed {
			st.skipped = drift.JobImmutable.Reason
			st.events = []notice{{corev1.EventTypeWarning, EventNotRolled, fmt.Sprintf(
				"%s changed, but %s: running pods keep the old config and a new Job is needed to use the new one", st.what, drift.JobImmutable.Why)}}
		}
	case drift.ConfigMissing:
		if changed {
			st.skipped = drift.ConfigMissing.Reason
		}
	}
	return st
}

func unpinnedList(srcs []revision.Source) string {
	names := make([]string, len(srcs))
	for i, src := range srcs {
		names[i] = src.String()
	}
	return strings.Join(names, ", ")
}
