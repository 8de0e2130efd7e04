package stamp

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// Sources are where Gather reads a stamp's facts: the inventory of config
// digests, snapshots and workload histories, and the delivery records (nil:
// no delivery pins anything). Both answer from informer caches.
type Sources struct {
	Inventory *inventory.Inventory
	Records   *deliveryrecords.Reader
}

// Subject is the workload whose stamp is gathered, with what the caller
// knows of it.
type Subject struct {
	Workload workload.Object
	Spec     *corev1.PodSpec
	Policy   configpolicy.NamespacePolicy
	// Key is the installation's key the hash and snapshot names are keyed
	// with.
	Key []byte
	// Versions is the record of CSI secret versions to carry; Rolled the
	// digests of the rotations it puts in the hash (its Rolled()).
	Versions string
	Rolled   map[string]string
	// Stored is what the stored workload carries (for a look, the workload
	// itself); Written, for a write, what the write names. Deliveries pin a
	// consumer to what its stored template names until its wave comes.
	Stored, Written *workload.Stamp
	// Unpinned leaves delivery pins out (the delivery controller asks what
	// a consumer would carry without them).
	Unpinned bool
}

// Gather reads the facts of s's stamp.
func (src Sources) Gather(ctx context.Context, s Subject) (Facts, error) {
	// Gathered even where rollouts are off: drift shows what a held
	// workload is stale against.
	f := Facts{Policy: s.Policy, Versions: s.Versions}
	// Read once: pins, existence, hash and snapshots each go through it.
	consumed := refs.ConsumedBy(s.Spec)
	pinned, err := src.pins(ctx, s, consumed)
	if err != nil {
		return f, &Unread{Fact: DeliveriesFact, Err: err}
	}
	f.Reached = pinned.reached
	ns := s.Workload.Obj.GetNamespace()
	pins, err := src.gone(ctx, ns, s, consumed, pinned.snapshots, &f)
	if err != nil {
		return f, &Unread{Fact: HashFact, Err: err}
	}
	var classes []string
	if len(s.Rolled) > 0 { // only a rotated class takes part in the hash
		classes = refs.CSIClasses(s.Spec)
	}
	if f.Hash, f.Counted, err = src.Inventory.TemplateHash(ctx, s.Key, ns, consumed, classes, s.Policy.Secrets, pins, s.Rolled); err != nil {
		return f, &Unread{Fact: HashFact, Err: err}
	}
	if !s.Policy.Revisions || f.Counted == 0 {
		return f, nil
	}
	if f.Snapshots, err = src.Inventory.Snapshots(ctx, s.Key, ns, consumed, s.Policy.RevisionSecrets, pins); err != nil {
		return f, &Unread{Fact: SnapshotsFact, Err: err}
	}
	if s.Workload.Type.OwnTemplate || s.Policy.SnapshotsBlocked != "" {
		f.Unwritten = map[string]bool{}
		for _, snaps := range []revision.Snapshots{f.Snapshots, snapshotsOf(s.Stored)} {
			for source, snap := range snaps {
				if ok, err := src.Inventory.SnapshotWritten(ctx, ns, source, snap); err != nil || !ok {
					f.Unwritten[snap] = true
				}
			}
		}
	}
	return f, nil
}

// gone finds the config s's spec requires (of consumed, what it consumes)
// that does not exist. Where the
// revision the workload runs (Stored) names a snapshot of it that exists,
// the config is pinned to that snapshot: the pods of that revision, new
// and scaled-up ones included, go on reading it until the workload stops
// naming the original. The rest is Missing. It returns pins with those
// added (a copy; pins is left as it is).
func (src Sources) gone(ctx context.Context, namespace string, s Subject, consumed []refs.Consumption, pins revision.Snapshots, f *Facts) (revision.Snapshots, error) {
	stored := snapshotsOf(s.Stored)
	out := pins
	for _, c := range consumed {
		source := revision.Source{Kind: c.Kind, Name: c.Name}
		if _, pinned := pins[source]; pinned || c.Optional || (c.Kind == refs.Secret && !s.Policy.Secrets) {
			continue
		}
		exists, err := src.Inventory.Exists(ctx, c.Kind, namespace, c.Name)
		if err != nil {
			return nil, err
		}
		if exists {
			continue
		}
		if snap := stored[source]; snap != "" {
			if written, err := src.Inventory.SnapshotWritten(ctx, namespace, source, snap); err != nil {
				return nil, err
			} else if written {
				if len(out) == len(pins) {
					out = maps.Clone(pins)
					if out == nil {
						out = revision.Snapshots{}
					}
				}
				out[source] = snap
				continue
			}
		}
		f.Missing = append(f.Missing, source)
	}
	return out, nil
}

// Fact names a fact Gather reads, for the message of one it could not.
type Fact string

const (
	DeliveriesFact Fact = "deliveries"
	HashFact       Fact = "hash"
	SnapshotsFact  Fact = "snapshots"
)

// Unread is a fact Gather could not read.
type Unread struct {
	Fact Fact
	Err  error
}

func (u *Unread) Error() string {
	return "reading the " + string(u.Fact) + " of a stamp: " + u.Err.Error()
}
func (u *Unread) Unwrap() error { return u.Err }

// Restorable reports whether hash with snapshots is a revision in w's
// history (a ReplicaSet or ControllerRevision of it carries both) whose
// snapshots all exist, from the cache.
func (src Sources) Restorable(ctx context.Context, w workload.Object, hash, snapshots string) (bool, error) {
	namespace := w.Obj.GetNamespace()
	history, err := src.Inventory.History(ctx, namespace, w.Obj.GetUID())
	if err != nil {
		return false, err
	}
	if !slices.Contains(history, inventory.Revision{Hash: hash, Snapshots: snapshots}) {
		return false, nil
	}
	snaps, err := revision.Decode(snapshots)
	if err != nil {
		return false, nil
	}
	for source, snap := range snaps {
		if ok, err := src.Inventory.SnapshotWritten(ctx, namespace, source, snap); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// snapshotsOf decodes a stamp's snapshots; one configward did not write
// names none.
func snapshotsOf(s *workload.Stamp) revision.Snapshots {
	if s == nil {
		return nil
	}
	snaps, _ := revision.Decode(s.Snapshots)
	return snaps
}

// Snapshots decodes the snapshots a stamp names; a value configward did not
// write names none.
func Snapshots(s workload.Stamp) revision.Snapshots { return snapshotsOf(&s) }
