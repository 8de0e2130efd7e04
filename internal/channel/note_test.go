package channel

import (
	"testing"
	"time"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

func TestNoteRoundTrip(t *testing.T) {
	n := Note{At: time.Date(2026, 12, 7, 5, 0, 0, 123456789, time.UTC), Record: "configset-pair-2", Version: "v2",
		Holds: revision.Snapshots{flags: "flags-2a", limits: "limits-2b"}}
	got, err := ParseNote(n.Encode())
	if err != nil || !got.At.Equal(n.At) || got.Record != n.Record || got.Version != n.Version || got.Holds.Encode() != n.Holds.Encode() {
		t.Fatalf("ParseNote(%q) = %+v, %v", n.Encode(), got, err)
	}
	if got.Set() != "configset-pair-2@v2" {
		t.Errorf("Set() = %q", got.Set())
	}
	for _, bad := range []string{"", "x;y", "nottime;r;v;ConfigMap/a=a-1", "2026-12-07T05:00:00Z;r;v;", "2026-12-07T05:00:00Z;r;v;Pod/a=b"} {
		if _, err := ParseNote(bad); err == nil {
			t.Errorf("ParseNote(%q) took it", bad)
		}
	}
}

var (
	flags  = revision.Source{Kind: refs.ConfigMap, Name: "flags"}
	limits = revision.Source{Kind: refs.ConfigMap, Name: "limits"}
	token  = revision.Source{Kind: refs.Secret, Name: "token"}
)

func TestExpected(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 12, 7, 5, 0, s, 0, time.UTC) }
	single := func(s int, src revision.Source, snap string) Note {
		return Note{At: at(s), Record: "r", Holds: revision.Snapshots{src: snap}}
	}
	pair := func(s int, f, l string) Note {
		return Note{At: at(s), Record: "configset-pair-2", Holds: revision.Snapshots{flags: f, limits: l}}
	}
	for _, tc := range []struct {
		name  string
		notes map[revision.Source]Note
		want  map[revision.Source]string
	}{
		{"configs never delivered together bind nothing",
			map[revision.Source]Note{flags: single(1, flags, "f1"), limits: single(1, limits, "l1")}, map[revision.Source]string{}},
		{"half way through writing a set: the member written last must follow the first",
			map[revision.Source]Note{flags: pair(2, "f2", "l2"), limits: single(1, limits, "l1")},
			map[revision.Source]string{flags: "f2", limits: "l2"}},
		{"a set written whole", map[revision.Source]Note{flags: pair(2, "f2", "l2"), limits: pair(2, "f2", "l2")},
			map[revision.Source]string{flags: "f2", limits: "l2"}},
		{"a member changed alone since: bound members are at their newest",
			map[revision.Source]Note{flags: single(3, flags, "f3"), limits: pair(2, "f2", "l2")},
			map[revision.Source]string{flags: "f3", limits: "l2"}},
		{"a pod mounting one member of a set cannot read a mix",
			map[revision.Source]Note{flags: pair(2, "f2", "l2")}, map[revision.Source]string{}},
		{"a config in no set beside a set",
			map[revision.Source]Note{flags: pair(2, "f2", "l2"), limits: pair(2, "f2", "l2"), token: single(1, token, "t1")},
			map[revision.Source]string{flags: "f2", limits: "l2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Expected(tc.notes)
			if len(got) != len(tc.want) {
				t.Fatalf("Expected = %+v, want %v", got, tc.want)
			}
			for src, snap := range tc.want {
				if got[src].Snapshot != snap {
					t.Errorf("%s: %q, want %q", src, got[src].Snapshot, snap)
				}
			}
		})
	}
}
