package flapping

import (
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func change(sec int, version string) Change {
	return Change{At: t0.Add(time.Duration(sec) * time.Second), Version: version}
}

func TestObserveStartsFlappingPastTheThreshold(t *testing.T) {
	th := Threshold{Changes: 3, Window: time.Minute}
	var r Record
	for i, sec := range []int{0, 10, 20} {
		if r.Observe(change(sec, strconv.Itoa(i)), "eso", th) {
			t.Fatalf("change %d of 3 started flapping", i+1)
		}
	}
	if !r.Observe(change(30, "3"), "external-secrets", th) {
		t.Fatal("the 4th change within the window did not start flapping")
	}
	if r.Writer != "external-secrets" || !r.Since.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("record = %+v", r)
	}
	if r.Observe(change(31, "4"), "", th) {
		t.Fatal("a change while flapping started it again")
	}
	if !r.Flapping(th, t0.Add(90*time.Second)) {
		t.Fatal("not flapping 59s after its last change")
	}
	if r.Settle(th, t0.Add(90*time.Second)) {
		t.Fatal("settled before a stable window")
	}
	if r.Flapping(th, t0.Add(91*time.Second)) || !r.Settle(th, t0.Add(91*time.Second)) {
		t.Fatal("still flapping a window after its last change")
	}
	if !r.Since.IsZero() || r.Announced {
		t.Fatalf("settled record = %+v", r)
	}
}

func TestChangesSpreadBeyondTheWindowNeverFlap(t *testing.T) {
	th := Threshold{Changes: 3, Window: time.Minute}
	var r Record
	for i := range 20 {
		if r.Observe(change(i*21, strconv.Itoa(i)), "ci", th) {
			t.Fatalf("change %d started flapping", i)
		}
	}
}

func TestTheSameChangeSeenTwiceCountsOnce(t *testing.T) {
	th := Threshold{Changes: 1, Window: time.Minute}
	var r Record
	r.Observe(change(0, "7"), "w", th)
	if r.Observe(change(1, "7"), "w", th) {
		t.Fatal("one change seen twice (two replicas, or a resync) counted as two")
	}
	if len(r.Changes) != 1 {
		t.Fatalf("changes = %v", r.Changes)
	}
}

func TestMergeJoinsReplicasWithoutDoubleCounting(t *testing.T) {
	th := Threshold{Changes: 3, Window: time.Minute}
	var leader, standby Record
	leader.Observe(change(0, "1"), "w", th)
	leader.Observe(change(10, "2"), "w", th)
	standby.Observe(change(11, "2"), "w", th)
	standby.Observe(change(20, "3"), "w", th)
	leader.Merge(standby)
	if got := leader.InWindow(th, t0.Add(30*time.Second)); got != 3 {
		t.Fatalf("merged count = %d, want 3", got)
	}
	if !leader.Observe(change(25, "4"), "w", th) {
		t.Fatal("the 4th change after a merge did not start flapping")
	}
}

func TestRecordsAreBounded(t *testing.T) {
	th := Threshold{Changes: 1, Window: time.Minute}
	var r Record
	for i := range 500 {
		r.Observe(change(i, strconv.Itoa(i)), "w", th)
	}
	if len(r.Changes) != MaxChanges+1 {
		t.Fatalf("kept %d changes, want %d", len(r.Changes), MaxChanges+1)
	}
	r.Observe(Change{At: t0.Add(MaxWindow + time.Hour), Version: "late"}, "w", th)
	if len(r.Changes) != 1 {
		t.Fatalf("changes older than %s kept: %d", MaxWindow, len(r.Changes))
	}
}

func TestTrackerStoresAndLoads(t *testing.T) {
	th := Threshold{Changes: 1, Window: time.Minute}
	a := NewTracker()
	k := Key{Kind: "Secret", Namespace: "shop", Name: "db.creds"}
	a.Observe(k, change(0, "1"), "external-secrets", th)
	if !a.Observe(k, change(1, "2"), "external-secrets", th) {
		t.Fatal("did not start flapping")
	}
	data, ok := a.Encode()
	if !ok {
		t.Fatal("nothing to store")
	}
	if _, again := a.Encode(); again {
		t.Fatal("stored twice without a change")
	}
	b := NewTracker()
	if err := b.Load(data); err != nil {
		t.Fatal(err)
	}
	r, flapping := b.Flapping(k, th, t0.Add(30*time.Second))
	if !flapping || r.Writer != "external-secrets" || len(r.Changes) != 2 {
		t.Fatalf("loaded %+v, flapping %v", r, flapping)
	}
	if err := b.Load(map[string]string{"nodots": "{}", "Secret.a.b": "not json"}); err == nil {
		t.Fatal("unreadable records loaded without an error")
	}
}

func TestThresholds(t *testing.T) {
	if err := Default.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Threshold{{0, time.Minute}, {101, time.Minute}, {3, time.Second}, {3, 25 * time.Hour}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if got := Stricter(Threshold{5, time.Minute}, Threshold{3, 30 * time.Second}); got != (Threshold{3, time.Minute}) {
		t.Errorf("Stricter = %+v", got)
	}
}
