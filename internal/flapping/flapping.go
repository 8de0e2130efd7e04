// Package flapping tells a ConfigMap or Secret whose content changes too often
// for its changes to roll its consumers: a writer whose output differs on
// every refresh (a template with a random salt, a generator that re-mints),
// or two controllers fighting over one object. Rolling every consumer on
// each such change restarts the fleet every refresh interval; past a
// threshold configward holds those rollouts instead, and resumes once the
// object has been stable for a window.
//
// It is pure: the controller feeds it the changes its informers see and
// keeps its Records in a ConfigMap, so that a restart or failover does not
// reset the count. A Record holds times, resource versions and a field
// manager's name, never anything of the object's content.
package flapping

import (
	"fmt"
	"slices"
	"time"
)

// Threshold is when an object is flapping: more than Changes content
// changes within Window. It stays flapping until it has been unchanged
// for Window.
type Threshold struct {
	Changes int
	Window  time.Duration
}

// Default is the threshold where no ConfigPolicy sets one.
var Default = Threshold{Changes: 3, Window: 10 * time.Minute}

// Bounds of what a ConfigPolicy may set; a Record keeps at most
// MaxChanges+1 changes, and none older than MaxWindow.
const (
	MaxChanges = 100
	MinWindow  = 10 * time.Second
	MaxWindow  = 24 * time.Hour
)

// Validate says what is wrong with t, if anything.
func (t Threshold) Validate() error {
	if t.Changes < 1 || t.Changes > MaxChanges {
		return fmt.Errorf("changes must be between 1 and %d, not %d", MaxChanges, t.Changes)
	}
	if t.Window < MinWindow || t.Window > MaxWindow {
		return fmt.Errorf("window must be between %s and %s, not %s", MinWindow, "24h", t.Window)
	}
	return nil
}

// Stricter combines two thresholds into the one that catches flapping
// first: the fewer changes and the longer window.
func Stricter(a, b Threshold) Threshold {
	return Threshold{Changes: min(a.Changes, b.Changes), Window: max(a.Window, b.Window)}
}

// String reads as in messages: "more than 3 changes in 10m0s".
func (t Threshold) String() string {
	return fmt.Sprintf("more than %d content changes in %s", t.Changes, t.Window)
}

// Change is one content change, as the informer saw it. Version is the
// object's resourceVersion after it: two replicas that both saw the change
// name it alike, so their counts merge without counting it twice.
type Change struct {
	At      time.Time `json:"at"`
	Version string    `json:"version"`
}

// Record is what is known of one object's recent content changes.
type Record struct {
	// Changes, oldest first, at most MaxChanges+1 and none older than
	// MaxWindow.
	Changes []Change `json:"changes,omitempty"`
	// Writer is the field manager of the latest change that named one.
	Writer string `json:"writer,omitempty"`
	// Since is when the object started flapping; zero while it is not.
	Since time.Time `json:"since,omitzero"`
	// Announced says the controller has recorded the ConfigFlapping Event
	// of this episode.
	Announced bool `json:"announced,omitempty"`
}

// Observe adds a change and reports whether it made the object start
// flapping. A change already recorded (by version) is not counted again.
func (r *Record) Observe(c Change, writer string, t Threshold) (started bool) {
	if writer != "" {
		r.Writer = writer
	}
	if !slices.ContainsFunc(r.Changes, func(o Change) bool { return o.Version == c.Version && c.Version != "" }) {
		r.Changes = append(r.Changes, c)
		slices.SortStableFunc(r.Changes, func(a, b Change) int { return a.At.Compare(b.At) })
	}
	r.prune(c.At)
	if r.Since.IsZero() && r.InWindow(t, c.At) > t.Changes {
		r.Since, r.Announced = c.At, false
		return true
	}
	return false
}

// prune drops what no threshold can need any more.
func (r *Record) prune(now time.Time) {
	r.Changes = slices.DeleteFunc(r.Changes, func(c Change) bool { return now.Sub(c.At) > MaxWindow })
	if n := len(r.Changes) - (MaxChanges + 1); n > 0 {
		r.Changes = slices.Delete(r.Changes, 0, n)
	}
}

// InWindow counts the changes within t.Window before now.
func (r Record) InWindow(t Threshold, now time.Time) int {
	n := 0
	for _, c := range r.Changes {
		if d := now.Sub(c.At); d >= 0 && d < t.Window {
			n++
		}
	}
	return n
}

// Last is when the object last changed; zero when no change is recorded.
func (r Record) Last() time.Time {
	if len(r.Changes) == 0 {
		return time.Time{}
	}
	return r.Changes[len(r.Changes)-1].At
}

// Flapping says whether the object is flapping at now: it crossed the
// threshold and has not been stable for a whole window since.
func (r Record) Flapping(t Threshold, now time.Time) bool {
	return !r.Since.IsZero() && now.Before(r.Until(t))
}

// Until is when a flapping object counts as stable again, if it does not
// change before: a window after its last change.
func (r Record) Until(t Threshold) time.Time { return r.Last().Add(t.Window) }

// Settle ends an episode that is over at now, and reports whether it did.
func (r *Record) Settle(t Threshold, now time.Time) bool {
	if r.Since.IsZero() || r.Flapping(t, now) {
		return false
	}
	r.Since, r.Announced = time.Time{}, false
	return true
}

// Idle says the record holds nothing t needs at now: it can be
// forgotten.
func (r Record) Idle(now time.Time, t Threshold) bool {
	return r.Since.IsZero() && (len(r.Changes) == 0 || now.Sub(r.Last()) >= t.Window)
}

// Merge adds another replica's (or the stored) record of the same object:
// changes are joined by version, and the earlier episode start wins.
func (r *Record) Merge(o Record) {
	for _, c := range o.Changes {
		if !slices.ContainsFunc(r.Changes, func(m Change) bool { return m.Version == c.Version }) {
			r.Changes = append(r.Changes, c)
		}
	}
	slices.SortStableFunc(r.Changes, func(a, b Change) int { return a.At.Compare(b.At) })
	if r.Writer == "" {
		r.Writer = o.Writer
	}
	if !o.Since.IsZero() && (r.Since.IsZero() || o.Since.Before(r.Since)) {
		r.Since = o.Since
	}
	r.Announced = r.Announced || o.Announced
	if len(r.Changes) > 0 {
		r.prune(r.Last())
	}
}
