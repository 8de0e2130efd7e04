package drift

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func key(ns, name string) Key {
	return Key{Group: "apps", Kind: "Deployment", NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func TestCausesTake(t *testing.T) {
	web, api, otherNS := key("shop", "web"), key("shop", "api"), key("other", "web")
	sts := Key{Group: "apps", Kind: "StatefulSet", NamespacedName: web.NamespacedName}
	type op struct {
		do   string // add, putBack or take
		w    Key
		what []string // for add (one) and putBack
		want []string // for take
	}
	add := func(w Key, what string) op { return op{do: "add", w: w, what: []string{what}} }
	note := func(w Key, what, note string) op { return op{do: "note", w: w, what: []string{what, note}} }
	putBack := func(w Key, what ...string) op { return op{do: "putBack", w: w, what: what} }
	take := func(w Key, want ...string) op { return op{do: "take", w: w, want: want} }
	for _, tc := range []struct {
		name string
		ops  []op
	}{
		{"nothing to take", []op{take(web)}},
		{"one change", []op{add(web, "ConfigMap/app"), take(web, "ConfigMap/app")}},
		{"sorted, whatever the order of the changes", []op{
			add(web, "Secret/db"), add(web, "ConfigMap/zeta"), add(web, "ConfigMap/app"),
			take(web, "ConfigMap/app", "ConfigMap/zeta", "Secret/db")}},
		{"a change seen twice is named once", []op{add(web, "ConfigMap/app"), add(web, "ConfigMap/app"), take(web, "ConfigMap/app")}},
		{"take clears", []op{add(web, "ConfigMap/app"), take(web, "ConfigMap/app"), take(web)}},
		{"a change after a take starts afresh", []op{add(web, "ConfigMap/app"), take(web, "ConfigMap/app"), add(web, "Secret/db"), take(web, "Secret/db")}},
		{"workloads are apart, by namespace and kind too", []op{
			add(web, "ConfigMap/app"), add(api, "Secret/db"), add(otherNS, "ConfigMap/other"), add(sts, "ConfigMap/sts"),
			take(web, "ConfigMap/app"), take(api, "Secret/db"), take(otherNS, "ConfigMap/other"), take(sts, "ConfigMap/sts")}},
		{"take leaves the others", []op{add(web, "ConfigMap/app"), add(api, "Secret/db"), take(web, "ConfigMap/app"), take(web), take(api, "Secret/db")}},
		// What Reconcile does when a patch fails: the causes go back for the retry.
		{"putBack returns taken changes, with new ones", []op{
			add(web, "ConfigMap/app"), add(web, "Secret/db"), take(web, "ConfigMap/app", "Secret/db"),
			add(web, "ConfigMap/new"), putBack(web, "ConfigMap/app", "Secret/db"),
			take(web, "ConfigMap/app", "ConfigMap/new", "Secret/db")}},
		{"putBack reopens what was taken", []op{add(web, "ConfigMap/app"), take(web, "ConfigMap/app"), putBack(web, "ConfigMap/app"), take(web, "ConfigMap/app")}},
		{"putBack of nothing", []op{putBack(web), take(web)}},
		{"putBack of nothing keeps what is there", []op{add(web, "ConfigMap/app"), putBack(web), take(web, "ConfigMap/app")}},
		// A delivery's wave notes how a change reached a workload: the
		// object is named once, with its note.
		{"a change and its delivery wave name the object once", []op{
			add(web, "ConfigMap/app"), note(web, "ConfigMap/app", "delivery configmap-app-1, wave canary"),
			take(web, "ConfigMap/app (delivery configmap-app-1, wave canary)")}},
		{"a later change keeps the note", []op{
			note(web, "ConfigMap/app", "delivery configmap-app-1, wave canary"), add(web, "ConfigMap/app"),
			take(web, "ConfigMap/app (delivery configmap-app-1, wave canary)")}},
		{"a cancelled delivery takes its wave off", []op{
			note(web, "ConfigMap/app", "delivery configmap-app-1, wave canary"), note(web, "ConfigMap/app", ""),
			take(web, "ConfigMap/app")}},
		{"putBack keeps the note once", []op{
			note(web, "ConfigMap/app", "delivery configmap-app-1, wave canary"), take(web, "ConfigMap/app (delivery configmap-app-1, wave canary)"),
			add(web, "ConfigMap/app"), putBack(web, "ConfigMap/app (delivery configmap-app-1, wave canary)"),
			take(web, "ConfigMap/app (delivery configmap-app-1, wave canary)")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewCauses()
			for i, o := range tc.ops {
				switch o.do {
				case "add":
					l.Add(o.w, o.what[0], time.Now())
				case "note":
					l.Note(o.w, o.what[0], o.what[1], time.Now())
				case "putBack":
					l.PutBack(o.w, o.what, time.Now())
				case "take":
					got := l.Take(o.w)
					if len(got) != 0 || len(o.want) != 0 {
						if !reflect.DeepEqual(got, o.want) {
							t.Fatalf("op %d: Take(%s) = %q, want %q", i, o.w, got, o.want)
						}
					}
				}
			}
		})
	}
}

// Last is what status shows: the latest batch, taken or not, from when its
// first change was seen; a retry keeps that time.
func TestCausesLast(t *testing.T) {
	web := key("shop", "web")
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := NewCauses()
	if got, at := l.Last(web); got != nil || !at.IsZero() {
		t.Fatalf("Last of nothing = %q, %v", got, at)
	}
	l.Add(web, "ConfigMap/b", t0)
	l.Add(web, "ConfigMap/a", t0.Add(time.Second))
	check := func(wantAt time.Time, want ...string) {
		t.Helper()
		got, at := l.Last(web)
		if !reflect.DeepEqual(got, want) || !at.Equal(wantAt) {
			t.Fatalf("Last = %q at %v, want %q at %v", got, at, want, wantAt)
		}
	}
	check(t0, "ConfigMap/a", "ConfigMap/b")
	taken := l.Take(web)
	check(t0, "ConfigMap/a", "ConfigMap/b")
	l.PutBack(web, taken, t0.Add(time.Minute))
	check(t0, "ConfigMap/a", "ConfigMap/b")
	l.Take(web)
	l.Add(web, "Secret/c", t0.Add(time.Hour))
	check(t0.Add(time.Hour), "Secret/c")

	l.Retain("shop", func(k Key) bool { return k != web })
	check(time.Time{})
}

// The event handlers add while Reconcile takes, from other goroutines.
func TestCausesConcurrentUse(t *testing.T) {
	l := NewCauses()
	web := key("shop", "web")
	var wg sync.WaitGroup
	seen := map[string]bool{}
	var mu sync.Mutex
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 50 {
				l.Add(web, "ConfigMap/"+string(rune('a'+i))+string(rune('a'+j%26)), time.Now())
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				for _, x := range l.Take(web) {
					mu.Lock()
					seen[x] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for _, x := range l.Take(web) {
		seen[x] = true
	}
	if len(seen) != 8*26 {
		t.Fatalf("%d distinct changes taken, want %d", len(seen), 8*26)
	}
}
