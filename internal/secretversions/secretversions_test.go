package secretversions

import (
	"slices"
	"strings"
	"testing"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func status(pod, class string, versions ...string) PodStatus {
	s := PodStatus{Pod: pod, Class: class}
	for i, v := range versions {
		s.Objects = append(s.Objects, Object{ID: "secret/" + string(rune('a'+i)), Version: v})
	}
	return s
}

func look(r Record, statuses ...PodStatus) (Record, []string) {
	pods := map[string]bool{"p1": true, "p2": true, "p3": true}
	return Next(r, "k1", []string{"db"}, Observe(key, "ns", []string{"db"}, pods, statuses))
}

func TestBaselineRollsNothing(t *testing.T) {
	r, rotated := look(Record{}, status("p1", "db", "1"), status("p2", "db", "1"))
	if len(rotated) != 0 || r.Classes["db"].Rolled != "" || len(r.Classes["db"].Seen) != 1 {
		t.Fatalf("first versions are a baseline, got %+v rotated %v", r, rotated)
	}
	if got := r.Rolled(); len(got) != 0 {
		t.Fatalf("a baseline takes no part in the hash, got %v", got)
	}
	// Pods that disagree at the first look are a baseline too.
	r, rotated = look(Record{}, status("p1", "db", "1"), status("p2", "db", "2"))
	if len(rotated) != 0 || len(r.Classes["db"].Seen) != 2 {
		t.Fatalf("disagreeing first versions are a baseline, got %+v rotated %v", r, rotated)
	}
}

func TestOneRotationOneDecision(t *testing.T) {
	base, _ := look(Record{}, status("p1", "db", "1"), status("p2", "db", "1"))
	// The driver rotates p1 first: one decision.
	r, rotated := look(base, status("p1", "db", "2"), status("p2", "db", "1"))
	if !slices.Equal(rotated, []string{"db"}) || r.Classes["db"].Rolled == "" {
		t.Fatalf("a new version is a rotation, got %+v rotated %v", r, rotated)
	}
	rolled := r.Classes["db"].Rolled
	// p2 catches up, then the rollout's new pod reports it: no second one.
	r, rotated = look(r, status("p1", "db", "2"), status("p2", "db", "2"))
	if len(rotated) != 0 || r.Classes["db"].Rolled != rolled {
		t.Fatalf("the same rotation seen on another pod decides nothing, got %+v rotated %v", r, rotated)
	}
	r, rotated = look(r, status("p3", "db", "2"))
	if len(rotated) != 0 || r.Classes["db"].Rolled != rolled || len(r.Classes["db"].Seen) != 1 {
		t.Fatalf("new pods on the new version decide nothing, got %+v rotated %v", r, rotated)
	}
	// A version that returns after no pod reports it is a rotation again.
	r, rotated = look(r, status("p3", "db", "1"))
	if len(rotated) != 1 || r.Classes["db"].Rolled == rolled {
		t.Fatalf("a version coming back is a rotation, got %+v rotated %v", r, rotated)
	}
}

func TestUnknownPodsCountForNothing(t *testing.T) {
	base, _ := look(Record{}, status("p1", "db", "1"))
	// No status, a status without objects, another class, another pod.
	r, rotated := look(base, status("p2", "db"), status("p1", "other", "9"), status("p9", "db", "9"))
	if len(rotated) != 0 || r.Encode() != base.Encode() {
		t.Fatalf("unknown pods changed the record: %+v rotated %v", r, rotated)
	}
}

func TestOtherKeyIsABaseline(t *testing.T) {
	base, _ := look(Record{}, status("p1", "db", "1"))
	r, _ := look(base, status("p1", "db", "2"))
	rolled := r.Classes["db"].Rolled
	r.Key = "k0"
	next, rotated := look(r, status("p1", "db", "2"))
	if len(rotated) != 0 || next.Classes["db"].Rolled != rolled || next.Key != "k1" {
		t.Fatalf("a record of another key is a baseline keeping its rolled digest, got %+v rotated %v", next, rotated)
	}
}

func TestClassesNoLongerMountedLeave(t *testing.T) {
	base, _ := look(Record{}, status("p1", "db", "1"))
	next, _ := Next(base, "k1", nil, Observed{})
	if next.Encode() != "" {
		t.Fatalf("a class no longer mounted stays: %q", next.Encode())
	}
}

func TestEncodeRoundTripAndNoVersionsInside(t *testing.T) {
	r, _ := look(Record{}, status("p1", "db", "version-7f3a"))
	r, _ = look(r, status("p1", "db", "version-8b4c"))
	enc := r.Encode()
	if strings.Contains(enc, "version-") || strings.Contains(enc, "secret/") {
		t.Fatalf("the record shows versions or ids: %s", enc)
	}
	back, err := Decode(enc)
	if err != nil || back.Encode() != enc {
		t.Fatalf("round trip: %v, %q != %q", err, back.Encode(), enc)
	}
	if _, err := Decode("{not json"); err == nil {
		t.Fatal("an unreadable record is no error")
	}
}

func TestDigestIsKeyedAndBound(t *testing.T) {
	objs := []Object{{ID: "a", Version: "1"}, {ID: "b", Version: "2"}}
	d := Digest(key, "ns", "db", objs)
	if d != Digest(key, "ns", "db", []Object{objs[1], objs[0]}) {
		t.Fatal("the order the driver lists objects in changes the digest")
	}
	for _, other := range []string{Digest([]byte("another key"), "ns", "db", objs), Digest(key, "ns2", "db", objs), Digest(key, "ns", "db2", objs)} {
		if other == d {
			t.Fatal("the digest is not bound to its key, namespace and class")
		}
	}
}

func TestPodStatusOf(t *testing.T) {
	s := PodStatusOf(map[string]any{"status": map[string]any{
		"podName": "p1", "secretProviderClassName": "db", "mounted": true,
		"objects": []any{map[string]any{"id": "secret/a", "version": "3"}},
	}})
	if s.Pod != "p1" || s.Class != "db" || len(s.Objects) != 1 || s.Objects[0].Version != "3" {
		t.Fatalf("read %+v", s)
	}
	if s := PodStatusOf(map[string]any{"status": "garbage"}); s.Pod != "" || len(s.Objects) != 0 {
		t.Fatalf("garbage read as %+v", s)
	}
}
