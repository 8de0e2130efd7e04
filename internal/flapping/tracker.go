package flapping

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Key names one ConfigMap or Secret.
type Key struct {
	Kind, Namespace, Name string
}

// String reads as in messages and as a ConfigMap data key:
// "Secret.shop.db-creds". Kinds and namespaces hold no dots, so the first
// two split it back (see ParseKey).
func (k Key) String() string { return k.Kind + "." + k.Namespace + "." + k.Name }

// Object names it as Events and Reports do: "Secret/db-creds".
func (k Key) Object() string { return k.Kind + "/" + k.Name }

// ParseKey reads a Key written by String.
func ParseKey(s string) (Key, error) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Key{}, fmt.Errorf("%q is not Kind.namespace.name", s)
	}
	return Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, nil
}

// Tracker holds the records of every object that changed recently. It is
// safe for concurrent use: informer handlers observe, the controller's
// reconcilers ask, and the leader stores.
type Tracker struct {
	mu      sync.Mutex
	records map[Key]*Record
	dirty   bool
	// started is told of each object that starts flapping, so that the
	// leader announces it without waiting for its next pass.
	started chan Key
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{records: map[Key]*Record{}, started: make(chan Key, 64)}
}

// Observe records a content change of k and reports whether it made k
// start flapping.
func (t *Tracker) Observe(k Key, c Change, writer string, th Threshold) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.records[k]
	if r == nil {
		r = &Record{}
		t.records[k] = r
	}
	t.dirty = true
	started := r.Observe(c, writer, th)
	if started {
		select {
		case t.started <- k:
		default: // the leader's next pass finds it anyway
		}
	}
	return started
}

// Started delivers the keys that start flapping, as they do.
func (t *Tracker) Started() <-chan Key { return t.started }

// Get returns a copy of k's record, and whether there is one.
func (t *Tracker) Get(k Key) (Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.records[k]
	if !ok {
		return Record{}, false
	}
	return r.clone(), true
}

// Flapping says whether k is flapping at now under th, with its record.
func (t *Tracker) Flapping(k Key, th Threshold, now time.Time) (Record, bool) {
	r, ok := t.Get(k)
	return r, ok && r.Flapping(th, now)
}

// Update changes k's record in place (announcing, settling); f reports
// whether it changed anything.
func (t *Tracker) Update(k Key, f func(*Record) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.records[k]; ok && f(r) {
		t.dirty = true
	}
}

// Keys lists the objects with a record.
func (t *Tracker) Keys() []Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Key, 0, len(t.records))
	for k := range t.records {
		out = append(out, k)
	}
	return out
}

// Forget drops the records nothing needs any more at now: neither
// flapping nor changed within their threshold's window.
func (t *Tracker) Forget(now time.Time, threshold func(Key) Threshold) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range t.records {
		if r.Idle(now, threshold(k)) {
			delete(t.records, k)
			t.dirty = true
		}
	}
}

// Load merges stored records (Encode's output) into the tracker; a key or
// value it cannot read is skipped and named in the error, the rest load.
func (t *Tracker) Load(data map[string]string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var bad []string
	for s, v := range data {
		k, err := ParseKey(s)
		var r Record
		if err == nil {
			err = json.Unmarshal([]byte(v), &r)
		}
		if err != nil {
			bad = append(bad, s)
			continue
		}
		if cur := t.records[k]; cur != nil {
			cur.Merge(r)
		} else {
			t.records[k] = &r
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("skipped unreadable change records %s", strings.Join(bad, ", "))
	}
	return nil
}

// Encode returns the records as ConfigMap data if they changed since the
// last Encode that was acknowledged with Stored; ok is false when there is
// nothing new to store.
func (t *Tracker) Encode() (data map[string]string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty {
		return nil, false
	}
	data = make(map[string]string, len(t.records))
	size := 0
	for k, r := range t.records {
		b, err := json.Marshal(r)
		if err != nil {
			continue // times and strings always marshal
		}
		data[k.String()] = string(b)
		size += len(b) + len(k.String())
	}
	if size > MaxStored {
		// A ConfigMap holds 1 MiB: past MaxStored, only the episodes are
		// stored, and the counts of objects not flapping restart from
		// zero after a failover.
		for k, r := range t.records {
			if r.Since.IsZero() {
				delete(data, k.String())
			}
		}
	}
	t.dirty = false
	return data, true
}

// MaxStored is how many bytes of records Encode returns before it leaves
// out those of objects not flapping.
const MaxStored = 512 << 10

// Unstored marks the records as not stored, after a failed write.
func (t *Tracker) Unstored() {
	t.mu.Lock()
	t.dirty = true
	t.mu.Unlock()
}

func (r *Record) clone() Record {
	c := *r
	c.Changes = append([]Change(nil), r.Changes...)
	return c
}
