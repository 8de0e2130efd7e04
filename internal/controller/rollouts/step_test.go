package rollouts

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

var (
	t0      = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	window  = 2 * time.Second
	cfg     = revision.Source{Kind: refs.ConfigMap, Name: "cfg"}
	old     = workload.Stamp{Hash: "hash-old", Snapshots: revision.Snapshots{cfg: "cfg-old"}.Encode()}
	now     = workload.Stamp{Hash: "hash-now", Snapshots: revision.Snapshots{cfg: "cfg-now"}.Encode()}
	newer   = workload.Stamp{Hash: "hash-newer", Snapshots: revision.Snapshots{cfg: "cfg-newer"}.Encode()}
	flapTh  = flapping.Threshold{Changes: 3, Window: time.Minute}
	flapRec = flapping.Record{Since: t0.Add(-time.Minute), Writer: "kubectl-edit", Changes: []flapping.Change{{At: t0.Add(-10 * time.Second)}}}
	paused  = workload.Hold{Reason: "paused", Why: "the Deployment is paused", Until: "it is resumed"}
)

// stale is a look at a Deployment carrying old whose config gives now,
// with one logged change and no turn reserved; opts change it.
func stale(opts ...func(*seen)) seen {
	s := seen{now: t0, found: true, kind: "Deployment", carried: old, decision: stamp.Decision{Want: now},
		changed: []string{"ConfigMap/cfg"}, revisions: true, threshold: flapTh}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func noChange(s *seen)                   { s.changed = nil }
func waited(s *seen)                     { s.waited = true }
func turnAt(d time.Duration) func(*seen) { return func(s *seen) { s.turn = t0.Add(d) } }
func hold(h drift.Hold) func(*seen)      { return func(s *seen) { s.decision.Hold = h } }
func gone(s *seen)                       { *s = seen{now: s.now, turn: s.turn} }
func early(h drift.Hold) func(*seen) {
	return func(s *seen) { s.early, s.decision = true, stamp.Decision{Want: s.carried, Hold: h} }
}
func flappingHold(s *seen) {
	s.decision.Hold, s.flapping, s.flappingKey = drift.Flapping, flapRec, flapping.Key{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}
}
func reported(at time.Time) func(*seen) { return func(s *seen) { s.episode, s.reported = at, true } }

// row is one look and what the step should say, as a few words (see
// summary).
type stepCase struct {
	name string
	seen seen
	want string
}

// summary says a step in words: write, turn, snapshots, events, metrics,
// requeue, what it keeps and forgets.
func summary(st step) string {
	var b []string
	if st.write != nil {
		b = append(b, "write "+st.write.Hash)
	}
	if st.takeTurn {
		b = append(b, "take turn")
	}
	if len(st.snapshots) > 0 {
		b = append(b, "snapshots "+st.snapshots.Encode())
	}
	for _, e := range st.events {
		b = append(b, fmt.Sprintf("%s %s: %s", e.typ, e.reason, e.message))
	}
	if st.skipped != "" {
		b = append(b, "skipped "+st.skipped)
	}
	if st.triggered {
		b = append(b, "triggered")
	}
	if st.requeue > 0 {
		b = append(b, "requeue "+st.requeue.String())
	}
	for _, f := range []struct {
		on   bool
		word string
	}{{st.keep, "keep"}, {st.wait, "wait"}, {st.forgetWait, "forget wait"}, {st.rememberEpisode, "episode " + st.episode.Sub(t0).String()},
		{st.forgetEpisode, "forget episode"}, {st.cancelTurn, "cancel turn"}} {
		if f.on {
			b = append(b, f.word)
		}
	}
	return strings.Join(b, "; ")
}

const (
	rolled            = "Normal ConfigChanged: ConfigMap/cfg changed: updated configward.dev/config-hash to hash-now, which rolls the pods through the workload's own update strategy"
	notRolledFlapping = "Warning ConfigChangedNotRolled: ConfigMap/cfg changed, but ConfigMap/cfg is flapping (more than 3 content changes in 1m0s; last written by \"kubectl-edit\"; see its ConfigFlapping Event): running pods keep the config they run until it has been unchanged for 1m0s"
)

func TestNext(t *testing.T) {
	for _, tc := range []stepCase{
		// Nothing to do.
		{"gone", stale(gone), "forget wait; forget episode"},
		{"gone while its turn waits: the turn is given back", stale(turnAt(time.Second), gone), "forget wait; forget episode; cancel turn"},
		{"current: nothing to write", stale(func(s *seen) { s.carried = now }), "forget wait"},
		{"current, its turn reserved: the turn is given back", stale(func(s *seen) { s.carried = now }, turnAt(time.Second)), "forget wait; cancel turn"},
		{"opted out (early), config changed: counted", stale(early(drift.OptedOut)), "skipped opted-out; forget wait"},
		{"opted out (early), nothing changed: not counted", stale(early(drift.OptedOut), noChange), "forget wait"},
		{"rollouts off (early), config changed: counted", stale(early(drift.PolicyDisabled)), "skipped policy-disabled; forget wait"},
		{"never stamped, nothing changed (early): nothing", stale(early(drift.Hold{}), noChange), "forget wait"},
		{"held with a current hash: nothing held back to report", stale(flappingHold, func(s *seen) { s.carried.Hash = now.Hash }), "forget wait"},
		{"rolled back from the config it has: kept", stale(hold(drift.RolledBackHold)), "forget wait"},

		// A stale hash without a logged change waits for the log once.
		{"stale, no change logged yet: waits the batch window for it", stale(noChange), "requeue 2s; wait"},
		{"stale, no change logged after the wait: rolled, naming its config", stale(noChange, waited),
			"write hash-now; take turn; snapshots ConfigMap/cfg=cfg-now; Normal ConfigChanged: its config changed: updated configward.dev/config-hash to hash-now, which rolls the pods through the workload's own update strategy; triggered; forget wait; forget episode"},

		// Paced rollouts: a turn, then the write at the turn.
		{"stale: takes a turn and writes at once if it is now", stale(),
			"write hash-now; take turn; snapshots ConfigMap/cfg=cfg-now; " + rolled + "; triggered; forget wait; forget episode"},
		{"its turn is later: waits for it, keeping the change", stale(turnAt(1500 * time.Millisecond)), "requeue 1.5s; keep; forget wait; forget episode"},
		{"its turn has come: writes without another turn", stale(turnAt(-time.Millisecond)),
			"write hash-now; snapshots ConfigMap/cfg=cfg-now; " + rolled + "; triggered; forget wait; forget episode"},
		{"a change made while it waited for its turn joins the rollout: the stamp and the Event are of then",
			stale(turnAt(0), func(s *seen) { s.decision.Want, s.changed = newer, []string{"ConfigMap/cfg", "Secret/db"} }),
			"write hash-newer; snapshots ConfigMap/cfg=cfg-newer; Normal ConfigChanged: ConfigMap/cfg, Secret/db changed: updated configward.dev/config-hash to hash-newer, which rolls the pods through the workload's own update strategy; triggered; forget wait; forget episode"},
		{"revisions off: no snapshot to write first", stale(func(s *seen) { s.revisions = false }),
			"write hash-now; take turn; " + rolled + "; triggered; forget wait; forget episode"},

		// What the stamp does once written.
		{"paused: the template is written, its pods are not replaced", stale(func(s *seen) { s.hold = paused }),
			"write hash-now; take turn; snapshots ConfigMap/cfg=cfg-now; Warning ConfigChangedNotRolled: ConfigMap/cfg changed: updated configward.dev/config-hash to hash-now, but the Deployment is paused: running pods keep the old config until it is resumed; skipped paused; forget wait; forget episode"},
		{"a CronJob: its next Job takes it", stale(func(s *seen) { s.nextRun = true }),
			"write hash-now; take turn; snapshots ConfigMap/cfg=cfg-now; Normal ConfigChanged: ConfigMap/cfg changed: updated configward.dev/config-hash to hash-now, which the next Job it starts uses; Jobs already started keep theirs; triggered; forget wait; forget episode"},
		{"snapshots cannot be written: unpinned, and said so", stale(func(s *seen) {
			s.decision.Unpinned, s.snapshotsBlocked = []revision.Source{cfg}, "quota: exceeded quota"
			s.decision.Want.Snapshots = ""
		}), "write hash-now; take turn; Warning ConfigRevisionBlocked: snapshots of ConfigMap/cfg cannot be written in its namespace (quota: exceeded quota): configward took them out of the pod template, so its pods start and read them as they are now. Let configward's controller write them (its ConfigPolicy's RevisionsReady condition says what refuses it); pods are pinned again at its next change after that; triggered; forget wait; forget episode"},

		// Holds.
		{"flapping: held until stable, the change kept, reported once", stale(flappingHold),
			"" + notRolledFlapping + "; skipped flapping; requeue 51s; keep; forget wait; episode -1m0s"},
		{"flapping, the episode reported already: held quietly", stale(flappingHold, reported(flapRec.Since)),
			"requeue 51s; keep; forget wait; episode -1m0s"},
		{"flapping, a new episode: reported again", stale(flappingHold, reported(t0.Add(-time.Hour))),
			notRolledFlapping + "; skipped flapping; requeue 51s; keep; forget wait; episode -1m0s"},
		{"flapping while its turn waits: the turn is given back", stale(flappingHold, reported(flapRec.Since), turnAt(time.Second)),
			"requeue 51s; keep; forget wait; episode -1m0s; cancel turn"},
		{"a Job whose config changed: a new Job takes it, said once", stale(hold(drift.JobImmutable)),
			"Warning ConfigChangedNotRolled: ConfigMap/cfg changed, but a Job's pod template cannot change: running pods keep the old config and a new Job is needed to use the new one; skipped job-immutable; forget wait"},
		{"a Job looked at again without a change: nothing said", stale(hold(drift.JobImmutable), noChange, waited), "forget wait"},
		{"config it requires is gone: counted, not rolled", stale(hold(drift.ConfigMissing)), "skipped config-missing; forget wait"},
		{"the flapping stopped: its episode is forgotten as it rolls", stale(reported(flapRec.Since)),
			"write hash-now; take turn; snapshots ConfigMap/cfg=cfg-now; " + rolled + "; triggered; forget wait; forget episode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summary(next(tc.seen, window)); got != tc.want {
				t.Errorf("\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}
