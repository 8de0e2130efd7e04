// Package stamp decides configward's central invariant: what a workload's
// pod template says about the config its pods run (workload.Stamp: the
// keyed config hash, the snapshots a revision's pods read, the rolled-back
// marker and the record of CSI secret versions) and, when the workload
// keeps what it carries instead, why (a hold). This is the one place it is
// decided:
//
//   - the config-hash webhook stamps the answer on every write of a
//     workload (Decide with a Write);
//   - the rollout controller writes it when config changes under a
//     workload, and checks after its patch that the whole of it stuck (a
//     webhook replica with an older view of the policies may drop a part);
//   - the drift controller counts pods against it, and the delivery
//     controller reads from it which consumers are behind (a Look).
//
// Gather reads the facts, all from memory (the informer caches of config
// digests, workload histories and delivery records); Decide is pure.
package stamp

import (
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// Facts are what the config a workload consumes gives now, gathered by
// Gather.
type Facts struct {
	// Policy is what the ConfigPolicies say for the workload's namespace.
	Policy configpolicy.NamespacePolicy
	// Hash is the keyed hash of the rollout-mode config the pod spec
	// consumes (revisions a delivery pins, and rotated CSI versions,
	// included); Counted is how many objects it covers: none, no hash.
	Hash    string
	Counted int
	// Snapshots name the snapshot of each config the revision reads, where
	// revisions are on.
	Snapshots revision.Snapshots
	// Unwritten names the snapshots, of Snapshots and of those the stored
	// workload names, that are not written. Gathered only where a pod
	// cannot wait for them: for a kind that is its own template (a bare
	// Pod, which no controller creates again once they are), and where
	// snapshots cannot be written now (Policy.SnapshotsBlocked).
	Unwritten map[string]bool
	// Reached: an open delivery has reached the workload (its wave started,
	// or was rolled back). The delivery waits until the template names
	// exactly the revision it assigns, so the whole stamp counts, not only
	// the hash.
	Reached bool
	// Versions is the record of CSI secret versions to carry.
	Versions string
	// Missing are the ConfigMaps and Secrets the spec requires that do not
	// exist, and that no snapshot the workload's revision names stands
	// for: pods that name them cannot start.
	Missing []revision.Source
}

// Write is a write of a workload that the webhook judges.
type Write struct {
	// Update: the object is stored already; Stored is what it carried.
	Update bool
	Stored workload.Stamp
	// TemplateChanged: the template changed beyond configward's own
	// annotations (the pipeline wrote a new revision).
	TemplateChanged bool
	// Restorable: the hash and snapshots the write names are a revision
	// of the workload (one of its ReplicaSets or ControllerRevisions
	// carries them) whose snapshots all exist.
	Restorable bool
}

// Look is a controller's look at a stored workload.
type Look struct {
	// Changed: config it consumes changed since the last look (a logged
	// change, or versions the CSI driver reports rotated). A workload
	// never stamped is stamped only then: installing configward restarts
	// nothing.
	Changed bool
	// Exact: the caller needs the whole stamp to match, not only the hash:
	// its own last write of it did not stick.
	Exact bool
	// Flapping: config it consumes changes too often to roll it.
	Flapping bool
	// Rotations: the workload mounts CSI secrets, whose rotations the
	// caller reads with the facts; one may yet be a change (Changed).
	Rotations bool
}

// Input is one decision's input: a Write or a Look (Write nil) of w.
type Input struct {
	Workload workload.Object
	Facts    Facts
	Write    *Write
	Look     Look
}

// Decision is what the workload's template should carry.
type Decision struct {
	// Want is the stamp configward wants the object to carry. Where a hold
	// keeps the template, Want is still what the config gives now (what
	// it is stale against), except for a rolled-back workload, whose
	// restored revision is what configward wants it to keep.
	Want workload.Stamp
	// Hold, when set, says why the object keeps what it carries: nothing
	// is written.
	Hold drift.Hold
	// RolledBack: this write restores an earlier revision with its
	// snapshots (kubectl rollout undo).
	RolledBack bool
	// Unpinned are the configs whose snapshots the stamp leaves out because
	// they are not written: the pods read them as they are now.
	Unpinned []revision.Source
	// HashReset: a write named a hash of its own (kubectl rollout undo
	// copies an earlier revision's template) that is kept neither as a
	// rollback nor as the stored one, and gets the config's of now: the
	// writer is told that a rollback does not bring old config back.
	HashReset bool
}

// Writes reports whether the decision changes what the object carries.
func (d Decision) Writes(carried workload.Stamp) bool {
	return d.Hold.Reason == "" && d.Want != carried
}

// Holds for objects configward never re-stamps, beside drift's (opted out,
// rollouts off, flapping, a Job, rolled back).
var (
	// Controlled is a workload another controls (a Deployment's
	// ReplicaSets, a CronJob's Jobs, any workload's Pods): its owner's
	// template carries the hash it was made from, and changing an owned
	// template breaks the owner's bookkeeping (a Deployment finds its
	// ReplicaSets by comparing templates).
	Controlled = drift.Hold{Reason: "controlled", Why: "another workload controls it and carries its config hash", Until: "its owner rolls"}
	// TemplateElsewhere is a declared kind's that takes its pod template
	// from another object (an Argo Rollout's workloadRef): never stamped.
	TemplateElsewhere = drift.Hold{Reason: "template-ref", Why: "it takes its pod template from another object", Until: "that object rolls"}
	// PodStarted is a Pod's on update: it keeps the hash of the config it
	// started with, since an update (a label) does not restart it.
	PodStarted = drift.Hold{Reason: "pod", Why: "a Pod keeps the config hash it was created with", Until: "it is replaced"}
)

// Held says why w keeps what it carries whatever its config gives, from the
// object alone: nothing needs gathering. update says a stored object is
// written (a write), as opposed to created or looked at.
func Held(w workload.Object, write *Write) (drift.Hold, bool) {
	update := write != nil && write.Update
	switch {
	case isTemplateElsewhere(w):
		return TemplateElsewhere, true
	case w.RolloutsDisabled():
		return drift.OptedOut, true
	case update && w.Type.OwnTemplate:
		return PodStarted, true
	case w.Type.ImmutableTemplate && (update || write == nil):
		// A Job's template cannot change: a new hash on any later update (a
		// label, resuming it) would have the API server refuse it.
		return drift.JobImmutable, true
	case w.Controlled():
		return Controlled, true
	}
	return drift.Hold{}, false
}

func isTemplateElsewhere(w workload.Object) bool {
	_, ok := w.TemplateRef()
	return ok
}

// Early decides, before any fact is gathered, what needs none: a write or
// a look of an object that keeps what it carries whatever its config gives
// (Held; for a look, but a Job, whose immutability is reported only when
// its hash is stale, which takes the facts), in a namespace where
// rollouts are off (in.Facts.Policy, the one fact read first), or, for a
// look, a workload never stamped that nothing changed under: installing
// configward restarts nothing. ok is false when the facts must be
// gathered and Decide asked.
func Early(in Input) (d Decision, ok bool) {
	carried := in.Workload.Stamp()
	if hold, held := Held(in.Workload, in.Write); held && (in.Write != nil || hold != drift.JobImmutable) {
		return Decision{Want: carried, Hold: hold}, true
	}
	if in.Write == nil && carried.Hash == "" && !in.Look.Changed && !in.Look.Rotations {
		return Decision{Want: carried}, true
	}
	if !in.Facts.Policy.Rollouts {
		return Decision{Want: carried, Hold: drift.PolicyDisabled}, true
	}
	return Decision{}, false
}

// Decide decides the stamp of one write or look.
func Decide(in Input) Decision {
	if in.Write != nil {
		d := decideWrite(in.Workload, in.Facts, *in.Write)
		written := in.Workload.Stamp()
		d.HashReset = !d.RolledBack && d.Want.Hash != "" && written.Hash != d.Want.Hash && in.Write.Update &&
			written.Hash != "" && written.Hash != in.Write.Stored.Hash
		return d
	}
	return decideLook(in.Workload, in.Facts, in.Look)
}

// decideLook decides what a stored workload should carry: the config of
// now when its hash is stale, and what it carries otherwise.
func decideLook(w workload.Object, f Facts, l Look) Decision {
	carried := w.Stamp()
	keep := func(h drift.Hold) Decision { return Decision{Want: carried, Hold: h} }
	if f.Counted == 0 {
		// It consumes no config configward counts: nothing to be stale
		// against, and a look does not roll it to take an old hash off.
		if h, held := Held(w, nil); held {
			return keep(h)
		}
		return keep(drift.Hold{})
	}
	if blocked := f.Policy.SnapshotsBlocked != ""; blocked && names(carried, f.Unwritten) {
		// Its revision names snapshots that cannot be written: its pods are
		// refused until they are. It moves to the config of now with only
		// the snapshots that are written, and its new pods start on the
		// originals.
		d := Decision{Want: now(f)}
		d.Want.Snapshots, d.Unpinned = onlyWritten(f.Snapshots, f.Unwritten)
		return d
	}
	if f.Policy.Revisions && carried.RolledBackFrom != "" && carried.RolledBackFrom == f.Hash && carried.Hash != f.Hash {
		// Rolled back (kubectl rollout undo) from the config it still
		// has: configward keeps the restored revision until that config
		// changes, and its pods are counted against it.
		return keep(drift.RolledBackHold)
	}
	want := now(f)
	if h, held := Held(w, nil); held {
		return Decision{Want: want, Hold: h}
	}
	if !f.Policy.Rollouts {
		return Decision{Want: want, Hold: drift.PolicyDisabled}
	}
	if len(f.Missing) > 0 && want.Hash != carried.Hash {
		// Rolled now, its new pods would name config that is gone and
		// never start, while the rollout takes running ones down.
		return Decision{Want: want, Hold: drift.ConfigMissing}
	}
	if carried.Hash == "" && !l.Changed {
		// Never stamped, and nothing changed: left to its own next write.
		return keep(drift.Hold{})
	}
	if want.Hash == carried.Hash && !l.Exact && !f.Reached {
		// The hash is current. Snapshots alone do not move it: they
		// differ with the hash the same when revisions were turned on or
		// off since it was stamped (pods keep their revision), or when
		// only keys it does not read changed.
		return keep(drift.Hold{})
	}
	if l.Flapping {
		return Decision{Want: want, Hold: drift.Flapping}
	}
	return Decision{Want: want}
}

// now is the stamp the config gives now: the hash of the counted config,
// the snapshots where revisions are on, and, on the workload, no rollback
// marker (a rolled-back workload moves on with its config) and the CSI
// record.
func now(f Facts) workload.Stamp {
	s := workload.Stamp{SecretVersions: f.Versions}
	if f.Counted > 0 {
		// With no rollout-mode config any more, a stale hash would only
		// mislead: it goes.
		s.Hash = f.Hash
		if f.Policy.Revisions {
			s.Snapshots = f.Snapshots.Encode()
		}
	}
	return s
}

// decideWrite decides what a write carries: the config of now, except for
// a rollback (kubectl rollout undo copies an earlier revision's template,
// with its hash) to a revision whose snapshots exist, which is kept, the
// workload recording the hash it was rolled back from. Later writes keep it
// while the config still gives that hash and the template does not change;
// a config change, or a new revision from the pipeline, moves it on to the
// config of now.
func decideWrite(w workload.Object, f Facts, write Write) Decision {
	written := w.Stamp()
	if h, held := Held(w, &write); held {
		return Decision{Want: written, Hold: h}
	}
	if !f.Policy.Rollouts {
		return Decision{Want: written, Hold: drift.PolicyDisabled}
	}
	want := now(f)
	d := Decision{Want: want}
	if w.Type.OwnTemplate || f.Policy.SnapshotsBlocked != "" {
		// A bare Pod is its own template: no controller retries its
		// creation. Where snapshots cannot be written, nothing would ever
		// let its pods start. Either names only snapshots written already,
		// and reads the others as they are (the controller writes their
		// snapshots for later pods where it can).
		if want.Snapshots != "" {
			d.Want.Snapshots, d.Unpinned = onlyWritten(f.Snapshots, f.Unwritten)
		}
		if w.Type.OwnTemplate {
			return d
		}
	}
	if !f.Policy.Revisions || !write.Update || want.Hash == "" {
		return d
	}
	stored := write.Stored
	switch {
	case written.Hash != "" && written.Hash != stored.Hash && written.Hash != want.Hash && write.Restorable:
		d.Want.Hash, d.Want.Snapshots, d.Want.RolledBackFrom = written.Hash, written.Snapshots, want.Hash
		d.RolledBack = true
	case written.RolledBackFrom != "" && written.RolledBackFrom == want.Hash && written.Hash == stored.Hash && !write.TemplateChanged:
		d.Want.Hash, d.Want.Snapshots, d.Want.RolledBackFrom = written.Hash, written.Snapshots, written.RolledBackFrom
	}
	return d
}

// NeedsRestorable reports whether a write's decision depends on whether
// what it names is a revision of the workload (Write.Restorable): the
// write names a hash that is neither the stored one nor the config's now,
// with snapshots. Reading the workload's history costs a look through its
// ReplicaSets, so it is read only then.
func NeedsRestorable(f Facts, update bool, written, stored workload.Stamp) bool {
	return f.Policy.Revisions && update && f.Counted > 0 && written.Hash != "" && written.Hash != stored.Hash &&
		written.Hash != f.Hash && written.Snapshots != ""
}

// onlyWritten encodes the snapshots of snaps that are written (not in
// unwritten), and lists the sources left out.
func onlyWritten(snaps revision.Snapshots, unwritten map[string]bool) (string, []revision.Source) {
	kept := revision.Snapshots{}
	var out []revision.Source
	for _, src := range snaps.Sorted() {
		if unwritten[snaps[src]] {
			out = append(out, src)
			continue
		}
		kept[src] = snaps[src]
	}
	return kept.Encode(), out
}

// names reports whether s names a snapshot of unwritten.
func names(s workload.Stamp, unwritten map[string]bool) bool {
	for _, snap := range Snapshots(s) {
		if unwritten[snap] {
			return true
		}
	}
	return false
}

// UnpinnedBecause says why the revision of a workload carrying carried
// reads config f counts unpinned, "" when it does not: snapshots cannot be
// written in its namespace, and its template names none, or names ones not
// written (its pods are refused until configward takes them out).
func (f Facts) UnpinnedBecause(carried workload.Stamp) string {
	blocked := f.Policy.SnapshotsBlocked
	if blocked == "" || f.Counted == 0 {
		return ""
	}
	if names(carried, f.Unwritten) {
		return "its revision names snapshots that cannot be written (" + blocked + "): its new pods are refused until configward takes them out of its template"
	}
	if carried.Snapshots == "" {
		return "config snapshots cannot be written in its namespace (" + blocked + "), so its revision reads the originals as they are now"
	}
	return ""
}
