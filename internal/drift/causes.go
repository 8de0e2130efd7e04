package drift

import (
	"maps"
	"slices"
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
	objects map[string]bool
	at      time.Time
	// taken: the rollout controller has acted on it; the next change
	// starts a new batch.
	taken bool
}

// NewCauses returns an empty log.
func NewCauses() *Causes { return &Causes{byWorkload: map[Key]*batch{}} }

// Add records that object ("ConfigMap/web-config") changed and reaches w.
func (c *Causes) Add(w Key, object string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.byWorkload[w]
	if b == nil || b.taken {
		b = &batch{objects: map[string]bool{}, at: now}
		c.byWorkload[w] = b
	}
	b.objects[object] = true
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
	return slices.Sorted(maps.Keys(b.objects))
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
		b = &batch{objects: map[string]bool{}, at: now}
		c.byWorkload[w] = b
	}
	b.taken = false
	for _, o := range objects {
		b.objects[o] = true
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
	return slices.Sorted(maps.Keys(b.objects)), b.at
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
