// Command reloadapp is the test node's program that reloads its config in
// place, as the reload agent's users' programs do: the node suite runs it
// beside configward's agent to see a hot ConfigMap's change reach a running
// program, or be refused by it, without a restart.
//
// Its config is the file `settings` of the directory -config (a ConfigMap
// mounted whole), whose content must be `level=<word>` (a word of letters);
// anything else is invalid. It reads it at start (and exits if it is
// invalid there: a program that cannot start), then again on SIGHUP, on
// POST /-/reload and, with -watch, whenever the kubelet swaps the
// directory's ..data link. An invalid content is rejected and the last good
// settings are kept. It serves, on -listen:
//
//	GET  /config/version  200 and the applied settings when the last reload
//	                      succeeded; 422 and the error when it was rejected
//	GET  /metrics         reloadapp_config_last_reload_successful 1 or 0,
//	                      reloadapp_config_last_reload_success_timestamp_seconds
//	                      (the last good reload's Unix time)
//	POST /-/reload        reloads; 200 and the settings, or 422 and the error
//
// and prints, so a spec can tell it never restarted:
//
//	started
//	applied <settings>
//	rejected <error>
//
// With -also DIR it reads DIR/settings too at each reload, as a program
// does whose config is two objects that must match (a ConfigMap and a
// Secret of one set): the two must hold the same settings, and a reload
// that reads two different ones prints
//
//	mixed <settings> <other settings>
//
// and counts it in reloadapp_mixed_reloads_total (it applies the first: a
// program cannot tell which is right).
//
// -watch looks at the link every -watch-every (100ms): a longer one is a
// program that polls its files, whose check still shows the previous
// reload's verdict for a while after the swap.
//
// It exits on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

var valid = regexp.MustCompile(`^level=[A-Za-z]+$`)

// app holds what the program runs on.
type app struct {
	dir, also string

	mu sync.Mutex
	// applied is the last good settings, lastErr why the last reload was
	// rejected (nil when it succeeded).
	applied string
	lastErr error
	// appliedAt is when the last good reload was.
	appliedAt time.Time
	// mixes counts the reloads that read two settings that differ (-also).
	mixes int
}

// reload reads the settings again: applied when valid, else rejected and
// the last good ones kept.
func (a *app) reload() (string, error) {
	b, err := os.ReadFile(filepath.Join(a.dir, "settings"))
	content := strings.TrimSpace(string(b))
	if err == nil && !valid.MatchString(content) {
		err = fmt.Errorf("invalid settings %q: want level=<word>", content)
	}
	var other string
	if a.also != "" {
		b, _ := os.ReadFile(filepath.Join(a.also, "settings"))
		other = strings.TrimSpace(string(b))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.also != "" && err == nil && other != content {
		a.mixes++
		fmt.Printf("mixed %s %s\n", content, other)
	}
	if err != nil && a.applied != "" {
		err = fmt.Errorf("%w; keeping %s", err, a.applied)
	}
	a.lastErr = err
	if err != nil {
		fmt.Printf("rejected %v\n", err)
		return a.applied, err
	}
	a.applied, a.appliedAt = content, time.Now()
	fmt.Printf("applied %s\n", content)
	return content, nil
}

func (a *app) state() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied, a.lastErr
}

func main() {
	dir := flag.String("config", "/config", "the directory holding the file settings")
	listen := flag.String("listen", ":8080", "where to serve /config/version, /metrics and /-/reload")
	watch := flag.Bool("watch", false, "reload whenever the directory's ..data link changes (a program that watches its files)")
	watchEvery := flag.Duration("watch-every", 100*time.Millisecond, "how often -watch looks at the ..data link")
	also := flag.String("also", "", "a second directory whose file settings must hold the same settings, read at each reload")
	flag.Parse()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)

	fmt.Println("started")
	a := &app{dir: *dir, also: *also}
	if _, err := a.reload(); err != nil {
		os.Exit(1)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /config/version", func(w http.ResponseWriter, _ *http.Request) {
		applied, err := a.state()
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintln(w, applied)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, err := a.state()
		ok := 1
		if err != nil {
			ok = 0
		}
		a.mu.Lock()
		mixes, at := a.mixes, a.appliedAt
		a.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP reloadapp_config_last_reload_successful Whether the last reload applied its settings.\n"+
			"# TYPE reloadapp_config_last_reload_successful gauge\nreloadapp_config_last_reload_successful %d\n"+
			"# HELP reloadapp_config_last_reload_success_timestamp_seconds When the last good reload was.\n"+
			"# TYPE reloadapp_config_last_reload_success_timestamp_seconds gauge\nreloadapp_config_last_reload_success_timestamp_seconds %g\n"+
			"# HELP reloadapp_mixed_reloads_total Reloads that read two settings that differ (-also).\n"+
			"# TYPE reloadapp_mixed_reloads_total counter\nreloadapp_mixed_reloads_total %d\n", ok, float64(at.UnixNano())/1e9, mixes)
	})
	mux.HandleFunc("POST /-/reload", func(w http.ResponseWriter, _ *http.Request) {
		applied, err := a.reload()
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintln(w, applied)
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("serving:", err)
			os.Exit(1)
		}
	}()

	// -watch polls the ..data link: the kubelet swaps it in one rename,
	// so a change of its target is one new content.
	var tick <-chan time.Time
	link := filepath.Join(*dir, "..data")
	seen, _ := os.Readlink(link)
	if *watch {
		t := time.NewTicker(*watchEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-stop:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = srv.Shutdown(ctx)
			cancel()
			return
		case <-hup:
			_, _ = a.reload()
		case <-tick:
			if target, _ := os.Readlink(link); target != seen {
				seen = target
				_, _ = a.reload()
			}
		}
	}
}
