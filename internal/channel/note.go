package channel

import (
	"fmt"
	"strings"
	"time"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/revision"
)

// Nothing in Kubernetes writes several objects, or several volumes of a
// pod, at once: the channels of a change set's members are written one
// after the other, and a pod's kubelet swaps each volume from its own
// cache. So each channel carries a Note, written with its content, that
// says what every member written with it holds in its wave, and when it
// was written. A pod mounts a mix exactly when some channel it mounts holds
// other than what the newest note listing that config says (Expected). The note is an annotation: the kubelet projects no
// annotation, so no program's glob reads it.

// Note is what a channel's last write said of its wave.
type Note struct {
	// At is when the channels controller wrote it (its clock, to the
	// nanosecond): the newest note about a config decides.
	At time.Time
	// Record is the ConfigDelivery the write followed ("" when none), and
	// Version the declared ConfigSet's version it delivers ("" when it
	// delivers a change set or one config).
	Record, Version string
	// Holds are the snapshots of every config written with the channel in
	// its wave, the channel's own among them.
	Holds revision.Snapshots
}

// Encode is the annotation's value: "<at>;<record>;<version>;<holds>".
func (n Note) Encode() string {
	return strings.Join([]string{n.At.UTC().Format(time.RFC3339Nano), n.Record, n.Version, n.Holds.Encode()}, ";")
}

// NoteOf reads a channel's note; false when it carries none configward
// wrote (a channel written before notes, or by hand).
func NoteOf(annotations map[string]string) (Note, bool) {
	v, ok := annotations[v1alpha1.ChannelSetAnnotation]
	if !ok {
		return Note{}, false
	}
	n, err := ParseNote(v)
	return n, err == nil
}

// ParseNote reads an annotation's value.
func ParseNote(v string) (Note, error) {
	parts := strings.Split(v, ";")
	if len(parts) != 4 {
		return Note{}, fmt.Errorf("%q is not at;record;version;holds", v)
	}
	at, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return Note{}, fmt.Errorf("%q: %w", v, err)
	}
	holds, err := revision.Decode(parts[3])
	if err != nil || len(holds) == 0 {
		return Note{}, fmt.Errorf("%q names no snapshots", v)
	}
	return Note{At: at, Record: parts[1], Version: parts[2], Holds: holds}, nil
}

// Set names the set a note was written for, as a pod's agent reports the
// set it applied: "<record>", or "<record>@<version>" for a declared
// ConfigSet.
func (n Note) Set() string {
	if n.Version == "" {
		return n.Record
	}
	return n.Record + "@" + n.Version
}

// Expected is what a pod that mounts channels of these configs (by
// original, each with the note its channel carries now) must hold of each
// config some note binds to another it mounts: the snapshot the newest
// note listing it names, with that note. Bound configs must all be at their
// newest, not merely at one note's: a channel of a config changed again
// alone since (a newer note) must not let the pod hold that config's
// content from before the set. A config no note binds to another the pod
// mounts is left out: the pod cannot read a mix of it.
func Expected(notes map[revision.Source]Note) map[revision.Source]Expectation {
	bound := map[revision.Source]bool{}
	for _, n := range notes {
		var mounted []revision.Source
		for src := range n.Holds {
			if _, ok := notes[src]; ok {
				mounted = append(mounted, src)
			}
		}
		if len(mounted) > 1 {
			for _, src := range mounted {
				bound[src] = true
			}
		}
	}
	out := map[revision.Source]Expectation{}
	for src := range bound {
		var newest Note
		for _, n := range notes {
			if _, lists := n.Holds[src]; lists && n.At.After(newest.At) {
				newest = n
			}
		}
		out[src] = Expectation{Snapshot: newest.Holds[src], Note: newest}
	}
	return out
}

// Expectation is the content a pod must hold of one config, and the note
// that says so.
type Expectation struct {
	Snapshot string
	Note     Note
}
