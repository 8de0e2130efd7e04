package analysis

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// bigWave is a wave of 5,000 pods and 500 workloads with the longest
// names Kubernetes allows, dotted so that every dot is quoted as "[.]":
// the largest {{ .Pods }} a query can meet.
func bigWave() Vars {
	long := func(prefix string, i int) string {
		s := fmt.Sprintf("%s-%d.", prefix, i)
		return s + strings.Repeat("a.", (253-len(s))/2)
	}
	v := Vars{Namespace: "shop", Config: "checkout-config", Kind: "ConfigMap", Delivery: "checkout-config-7", Wave: "canary", Group: "wave"}
	for i := range 5000 {
		v.Pods = append(v.Pods, long("pod", i))
	}
	for i := range 500 {
		v.Workloads = append(v.Workloads, long("workload", i))
	}
	return v
}

// doubling builds a string in a variable it never writes, doubling it at
// every step: the attack the render budget stops.
func doubling(steps int) string {
	return `{{ $x := "aaaaaaaaaaaaaaaa" }}` + strings.Repeat(`{{ $x = print $x $x }}`, steps) + `up`
}

func TestQueryBudgetRefusesWhatItCannotAfford(t *testing.T) {
	for _, tc := range []struct{ name, query, want string }{
		{"a string doubled in a variable", doubling(40), "make more than 8 MiB"},
		{"printf padding", `{{ printf "%0999999999d" 1 }}`, "at most 256"},
		{"printf precision", `{{ printf "%.999999f" 1.0 }}`, "at most 256"},
		{"printf width from an argument", `{{ printf "%*d" 999999999 1 }}`, "(*)"},
		{"a format built at render time", `{{ printf (print "%0" "9999999" "d") 1 }}`, "at most 256"},
		{"html of a doubled string", `{{ $x := "<<<<<<<<" }}` + strings.Repeat(`{{ $x = html $x $x }}`, 20) + `up`, "make more than 8 MiB"},
		{"extra arguments", `{{ $x := "aaaaaaaaaaaaaaaa" }}` + strings.Repeat(`{{ $x = printf "" $x $x }}`, 40) + `up`, "make more than 8 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.query) > MaxQueryBytes {
				t.Fatalf("the query is %d bytes, more than the CRD admits", len(tc.query))
			}
			err := Validate(tc.query)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestQueryBudgetKeepsTheBuiltins(t *testing.T) {
	v := Vars{Namespace: "shop", Pods: []string{"web-1"}, Group: "wave"}
	for query, want := range map[string]string{
		`{{ printf "%s/%q/%5d/%x/%%" .Namespace .Group 7 "ab" }}`:          `shop/"wave"/    7/6162/%`,
		`{{ print .Namespace 1 2 }}`:                                       `shop1 2`,
		`{{ println .Namespace }}`:                                         "shop\n",
		`{{ html "<a>" }}{{ js "'" }}{{ urlquery "a b" }}`:                 `&lt;a&gt;\'a+b`,
		`{{ printf "%[1]s-%[1]s" .Pods }}`:                                 `web-1-web-1`,
		`{{ printf "%d" }}`:                                                `%!d(MISSING)`,
		`{{ len .Pods }} {{ slice .Namespace 1 3 }} {{ index . "Group" }}`: `5 ho wave`,
	} {
		got, err := Render(query, v)
		if err != nil || got != want {
			t.Errorf("Render(%q) = %q, %v; want %q", query, got, err, want)
		}
	}
	// A query a wave of 5,000 pods writes in full still renders.
	got, err := Render(`sum(up{pod=~"{{ printf "%s" .Pods }}"})`, bigWave())
	if err != nil || len(got) < 2<<20 {
		t.Errorf("a printf of a big wave's pods: %d bytes, %v", len(got), err)
	}
}

// MaxQueryBytesAlloc is the most that validating a query, or rendering it for
// a wave of 5,000 pods, may allocate (the bound).
const MaxQueryBytesAlloc = 64 << 20

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzQueryCost holds validating and rendering any query of the allowed
// size to MaxQueryBytesAlloc. Time follows from it: without {{ range }} or
// sub-templates a rendering runs each action once, and every action's
// work is bounded by the bytes it may make. The seeds are the attacks the
// budget was written for; BenchmarkQueryCost times them.
func FuzzQueryCost(f *testing.F) {
	for _, seed := range costSeeds() {
		f.Add(seed)
	}
	wave := bigWave()
	f.Fuzz(func(t *testing.T, query string) {
		if len(query) > MaxQueryBytes {
			return
		}
		if n := allocated(func() { _ = Validate(query) }); n > MaxQueryBytesAlloc {
			t.Fatalf("validating %q allocated %d MiB", query, n>>20)
		}
		if n := allocated(func() { _, _ = Render(query, wave) }); n > MaxQueryBytesAlloc {
			t.Fatalf("rendering %q for 5,000 pods allocated %d MiB", query, n>>20)
		}
	})
}

// costSeeds are queries that try to make the most of 4 KiB.
func costSeeds() []string {
	fill := func(head, step, tail string) string {
		return head + strings.Repeat(step, (MaxQueryBytes-len(head)-len(tail))/len(step)) + tail
	}
	return []string{
		fill(`{{ $x := "aaaaaaaaaaaaaaaa" }}`, `{{ $x = print $x $x }}`, `up`),
		fill(`{{ $x := .Pods }}`, `{{ $x = print $x $x }}`, `up`),
		fill(``, `{{ .Pods }}`, ``),
		fill(`{{ print `, `.Pods `, `}}`),
		fill(`{{ printf "`, `%[1]s`, `" .Pods }}`),
		fill(`{{ printf "`, `% #x`, `" .Pods }}`),
		fill(`{{ printf "`, `%256d`, `" 1 }}`),
		fill(`{{ html `, `.Pods `, `}}`),
		fill(`{{ js `, `. `, `}}`),
		fill(`{{ printf "%#v" `, `. `, `}}`),
		fill(`{{ $x := "<" }}`, `{{ $x = js $x $x }}`, `up`),
		fill(`{{ if eq .Pods `, `.Pods `, `}}up{{ end }}`),
		fill(``, `{{ printf "%v" . }}`, ``),
	}
}

func BenchmarkQueryCost(b *testing.B) {
	wave := bigWave()
	for i, query := range costSeeds() {
		b.Run(fmt.Sprint(i), func(b *testing.B) {
			for b.Loop() {
				_ = Validate(query)
				_, _ = Render(query, wave)
			}
		})
	}
}
