package drift

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Key names a workload across kinds.
type Key struct {
	Group, Kind string
	types.NamespacedName
}

// Causes remembers, per workload, which config objects changed since the
// rollout controller last acted on it, and keeps the last such batch once
// acted on, with when it began: what `configward status` and the Reports
// show as "last change". One `kubectl apply` of three ConfigMaps is one
// batch. It lives in memory only; a restarted controller knows no history
// (and rolls nothing for changes it did not see happen).
type Causes struct {
	mu         sync.Mutex
	byWorkload map[Key]*batch
}

type batch struct {
	// objects maps each changed object to a note on it, "" for none
	// (which delivery wave moved it).
	objects map[string]string
	at      time.Time
	// taken: the rollout controller has acted on it; the next change
	// starts a new batch.
	taken bool
}

// NewCauses returns an empty log.
func NewCauses() *Causes { return &Causes{byWorkload: map[Key]*batch{}} }

// Add records that object ("ConfigMap/web-config") changed and reaches w,
// keeping the note it has in the batch.
func (c *Causes) Add(w Key, object string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.open(w, now)
	if _, named := b.objects[object]; !named {
		b.objects[object] = ""
	}
}

// Note records that object changed and reaches w, noting how ("delivery
// configmap-app-3, wave canary"; "" takes an earlier note off): an object
// is named once in a batch, with its latest note.
func (c *Causes) Note(w Key, object, note string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open(w, now).objects[object] = note
}

// open is w's open batch, started at now if there is none.
func (c *Causes) open(w Key, now time.Time) *batch {
	b := c.byWorkload[w]
	if b == nil || b.taken {
		b = &batch{objects: map[string]string{}, at: now}
		c.byWorkload[w] = b
	}
	return b
}

// names are a batch's objects as Events name them: "ConfigMap/web-config",
// or with its note, "ConfigMap/web-config (delivery ..., wave canary)",
// sorted.
func (b *batch) names() []string {
	out := make([]string, 0, len(b.objects))
	for _, o := range slices.Sorted(maps.Keys(b.objects)) {
		if note := b.objects[o]; note != "" {
			o += " (" + note + ")"
		}
		out = append(out, o)
	}
	return out
}

// Take returns the objects of w's open batch, sorted, and closes it; nil
// when nothing changed since the last Take.
func (c *Causes) Take(w Key) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.byWorkload[w]
	if b == nil || b.taken {
		return nil
	}
	b.taken = true
	return b.names()
}

// PutBack reopens w's batch with objects after acting on them failed, so
// the retry names them again.
func (c *Causes) PutBack(w Key, objects []string, now time.Time) {
	if len(objects) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.byWorkload[w]
	if b == nil {
		b = &batch{objects: map[string]string{}, at: now}
		c.byWorkload[w] = b
	}
	b.taken = false
	for _, name := range objects {
		// A name is "object" or "object (note)"; object names hold no
		// space.
		o, note, _ := strings.Cut(name, " (")
		if _, seen := b.objects[o]; !seen || note != "" {
			b.objects[o] = strings.TrimSuffix(note, ")")
		}
	}
}

// Last returns the objects of w's latest batch, acted on or not, and when
// it began.
func (c *Causes) Last(w Key) ([]string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.byWorkload[w]
	if b == nil {
		return nil, time.Time{}
	}
	return b.names(), b.at
}

// Retain forgets the workloads of namespace for which keep is false (they
// are gone), so the log does not outgrow the cluster.
func (c *Causes) Retain(namespace string, keep func(Key) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.byWorkload {
		if k.Namespace == namespace && !keep(k) {
			delete(c.byWorkload, k)
		}
	}
}
