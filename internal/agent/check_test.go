package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configward/configward/internal/reload"
)

// lateProgram stands for the programs whose answer comes after the agent
// looks: one that polls its file (Caddy's --watch) or answers its reload
// call at once and reloads later. It applies its file a's content some
// time after it is asked to or after it sees the swap, unless the content
// is "bad", and serves its state as Prometheus text: a success gauge and
// its last success's time, as Prometheus, Alertmanager and Caddy do.
type lateProgram struct {
	*httptest.Server
	dir   string
	delay time.Duration

	mu sync.Mutex
	ok int
	at time.Time
	// seen is the revision it last looked at; asleep, it never reloads.
	seen   string
	asleep bool
	// runs is the content it runs; with onlyChanges it reloads only a
	// content that differs from it, as Caddy's watch does.
	runs        string
	onlyChanges bool
}

func newLateProgram(t *testing.T, dir string, delay time.Duration, polls bool) *lateProgram {
	first, _ := os.ReadFile(filepath.Join(dir, "a"))
	p := &lateProgram{dir: dir, delay: delay, ok: 1, at: time.Now(), seen: revisionOf(dir), runs: string(first)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		// As client_golang writes a time gauge: seconds, in exponent form.
		fmt.Fprintf(w, "# TYPE late_config_last_reload_successful gauge\nlate_config_last_reload_successful %d\n"+
			"# TYPE late_config_last_reload_success_timestamp_seconds gauge\nlate_config_last_reload_success_timestamp_seconds %g\n",
			p.ok, float64(p.at.UnixNano())/1e9)
	})
	mux.HandleFunc("POST /-/reload", func(w http.ResponseWriter, _ *http.Request) {
		time.AfterFunc(p.delay, p.reload)
		fmt.Fprintln(w, "reloading")
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	if polls {
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(p.delay):
				}
				p.mu.Lock()
				rev, was := revisionOf(dir), p.seen
				p.seen = rev
				p.mu.Unlock()
				if rev != was {
					p.reload()
				}
			}
		}()
	}
	return p
}

func (p *lateProgram) reload() {
	b, _ := os.ReadFile(filepath.Join(p.dir, "a"))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asleep || p.onlyChanges && string(b) == p.runs {
		return
	}
	if string(b) == "bad" {
		p.ok = 0
		return
	}
	p.ok, p.at, p.runs = 1, time.Now(), string(b)
}

func (p *lateProgram) check() string {
	return p.URL + "/metrics#late_config_last_reload_successful;since=late_config_last_reload_success_timestamp_seconds"
}

// A program that acts after the agent first looks still shows the
// previous reload's verdict: the agent takes its check only once it is
// about this content (a success after the swap, a failure where the
// program ran a good config), so a rejected change is not reported
// applied, nor the good one after it rejected.
func TestCheckProvesThisContent(t *testing.T) {
	o := fast
	o.CheckFor = 3 * time.Second
	for _, c := range []struct {
		name, trigger string
		polls         bool
		unproven      string
	}{
		{name: "a program that polls its file", trigger: "watch", polls: true, unproven: reload.Seen},
		{name: "a reload call answered before it is done", trigger: "http", unproven: reload.Triggered},
	} {
		t.Run(c.name, func(t *testing.T) {
			cw := newConfigward(t)
			dir := t.TempDir()
			project(t, dir, map[string]string{"a": "1"})
			prog := newLateProgram(t, dir, 400*time.Millisecond, c.polls)
			trigger := c.trigger
			if trigger == "http" {
				trigger = prog.URL + "/-/reload"
			}
			run(t, spec(t, cw, trigger, prog.check(), dir), o)
			appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "1"})

			project(t, dir, map[string]string{"a": "bad"})
			p := appliedContent(t, cw, "ConfigMap/cfg0", reload.Rejected, map[string]string{"a": "bad"})
			if !strings.Contains(p.Message, "late_config_last_reload_successful 0") {
				t.Errorf("rejected with %q", p.Message)
			}

			// Still 0 from the rejection until the program reloads.
			project(t, dir, map[string]string{"a": "2"})
			p = appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "2"})
			if !strings.Contains(p.Message, "after the swap") {
				t.Errorf("applied with %q", p.Message)
			}

			// A program that never acts on a content is not said to have
			// applied it, however long its last success stays 1.
			prog.mu.Lock()
			prog.asleep = true
			prog.mu.Unlock()
			project(t, dir, map[string]string{"a": "3"})
			p = appliedContent(t, cw, "ConfigMap/cfg0", c.unproven, map[string]string{"a": "3"})
			if !strings.Contains(p.Message, "has not reloaded since the swap") {
				t.Errorf("%s with %q", c.unproven, p.Message)
			}
		})
	}
}

// A last success time is taken at the precision the program keeps, and
// one that is not in seconds proves nothing.
func TestSuccessTimes(t *testing.T) {
	swap := time.Date(2026, 12, 7, 12, 0, 0, 290_000_000, time.UTC)
	for _, c := range []struct {
		at   float64
		want bool
	}{
		{float64(swap.Unix()), true},      // whole seconds: the swap's second counts
		{float64(swap.Unix() - 1), false}, // the second before
		{float64(swap.UnixNano())/1e9 - 0.1, false},
		{float64(swap.UnixNano())/1e9 + 0.1, true},
	} {
		if got := after(c.at, swap); got != c.want {
			t.Errorf("after(%f, %s) = %v", c.at, swap, got)
		}
	}
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ok 1\nat_ms %d\n", time.Now().UnixMilli())
	}))
	defer metrics.Close()
	p := &program{trigger: reload.Trigger{Mode: reload.Watch}, check: &reload.Check{URL: metrics.URL, Metric: "ok", Since: "at_ms"}, client: http.DefaultClient, settle: time.Millisecond}
	r, proven := p.judge(t.Context(), time.Now().Add(-time.Minute), false)
	if proven || r.what != reload.Triggered || !strings.Contains(r.message, "not a Unix time in seconds") {
		t.Errorf("a time in milliseconds: %+v, proven %v", r, proven)
	}
}

// A program that exposes only its last success's time: a reload after
// the swap is applied; none, however long, is never taken as applied.
func TestCheckOnTheTimeAlone(t *testing.T) {
	o := fast
	o.CheckFor = 2 * time.Second
	cw := newConfigward(t)
	dir := t.TempDir()
	project(t, dir, map[string]string{"a": "1"})
	prog := newLateProgram(t, dir, 300*time.Millisecond, true)
	run(t, spec(t, cw, "watch", prog.URL+"/metrics#;since=late_config_last_reload_success_timestamp_seconds", dir), o)
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "1"})
	project(t, dir, map[string]string{"a": "2"})
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "2"})
	project(t, dir, map[string]string{"a": "bad"})
	p := appliedContent(t, cw, "ConfigMap/cfg0", reload.Seen, map[string]string{"a": "bad"})
	if !strings.Contains(p.Message, "has not reloaded since the swap") {
		t.Errorf("seen with %q", p.Message)
	}
}

// A rollback after a rejection brings back the content the program kept
// running: a program that reloads only what differs from what it runs
// never reloads it, and its gauge still says it rejected the one between.
// It runs this content all the same.
func TestCheckAfterARollback(t *testing.T) {
	o := fast
	o.CheckFor = 5 * time.Second
	cw := newConfigward(t)
	dir := t.TempDir()
	project(t, dir, map[string]string{"a": "1"})
	prog := newLateProgram(t, dir, 300*time.Millisecond, true)
	prog.mu.Lock()
	prog.onlyChanges = true
	prog.mu.Unlock()
	run(t, spec(t, cw, "watch", prog.check(), dir), o)
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "1"})
	project(t, dir, map[string]string{"a": "bad"})
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Rejected, map[string]string{"a": "bad"})
	project(t, dir, map[string]string{"a": "1"})
	p := appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "1"})
	if !strings.Contains(p.Message, "which is this content again") {
		t.Errorf("applied with %q", p.Message)
	}
	// And its gauge still says 0: a new good content is proven by its time.
	project(t, dir, map[string]string{"a": "2"})
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "2"})
}
