package agent

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/reload"
)

// project writes data into dir as the kubelet's atomic writer does: a new
// timestamped directory with the files, then ..data swapped to it in one
// rename, each key a symlink through ..data, the old directory removed.
func project(t *testing.T, dir string, data map[string]string) {
	t.Helper()
	old := revisionOf(dir)
	ts := fmt.Sprintf("..%s.%d", time.Now().UTC().Format("2006_01_02_15_04_05"), time.Now().UnixNano())
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, ts, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		t.Fatal(err)
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join(dataLink, k), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
}

// configward stands for configward's report endpoint: it keeps every
// report with the token it came with.
type configward struct {
	*httptest.Server
	mu      sync.Mutex
	reports []reload.Report
	tokens  []string
	refuse  bool
	// answer answers a report that asks (nil: every set holds); asks
	// counts them.
	answer func(rep reload.Report, key []byte) reload.Answer
	asks   int
}

func newConfigward(t *testing.T) *configward {
	c := &configward{}
	c.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.refuse {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var rep reload.Report
		if r.URL.Path != reload.ReportPath || json.NewDecoder(r.Body).Decode(&rep) != nil {
			http.Error(w, "bad report", http.StatusBadRequest)
			return
		}
		if rep.Ask {
			c.asks++
			ans := reload.Answer{Holds: true}
			if c.answer != nil {
				ans = c.answer(rep, reload.FingerprintKey([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))))
			}
			ans.Outcome = reload.Asked
			_ = json.NewEncoder(w).Encode(ans)
			return
		}
		c.reports = append(c.reports, rep)
		c.tokens = append(c.tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	t.Cleanup(c.Close)
	return c
}

// last is the latest report's part for config, with the token it came
// with.
func (c *configward) last(config string) (reload.ConfigReport, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.reports) - 1; i >= 0; i-- {
		for _, p := range c.reports[i].Configs {
			if p.Config == config {
				return p, c.tokens[i], true
			}
		}
	}
	return reload.ConfigReport{}, "", false
}

func (c *configward) ca() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate().Raw}))
}

// run starts the agent with spec until the test ends.
func run(t *testing.T, spec reload.Spec, o Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, spec, o, testr.New(t)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

var fast = Options{Poll: 50 * time.Millisecond, Debounce: 20 * time.Millisecond, Settle: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond}

// appliedContent waits for the report of config to say result of content
// data: its fingerprints, checked the way configward checks them.
func appliedContent(t *testing.T, cw *configward, config, result string, data map[string]string) reload.ConfigReport {
	t.Helper()
	kept := digest.KeyDigests(data, nil)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p, token, ok := cw.last(config)
		if ok && p.Result == result && reload.Matches(reload.FingerprintKey([]byte(token)), p.Keys, p.AllKeys, kept) {
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	p, _, _ := cw.last(config)
	t.Fatalf("no report of %s %s with the content %v; the last: %+v", config, result, data, p)
	return p
}

func spec(t *testing.T, cw *configward, trigger, check string, dirs ...string) reload.Spec {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("pod-token-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := reload.Spec{Trigger: trigger, Check: check, Report: cw.URL + reload.ReportPath, CA: cw.ca(), TokenFile: token}
	for i, d := range dirs {
		s.Configs = append(s.Configs, reload.Config{Kind: "ConfigMap", Name: fmt.Sprintf("cfg%d", i), Dir: d})
	}
	return s
}

// An HTTP reload: one call per swap, the program's answer taken as what it
// applied, or as why it rejected the content.
func TestHTTPReload(t *testing.T) {
	cw := newConfigward(t)
	var mu sync.Mutex
	calls, fail := 0, false
	program := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if fail {
			http.Error(w, "line 3: unknown field \"levl\"", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, "reloaded")
	}))
	defer program.Close()
	dir := t.TempDir()
	project(t, dir, map[string]string{"app.yaml": "level: info"})
	run(t, spec(t, cw, program.URL+"/-/reload", "", dir), fast)
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Seen, map[string]string{"app.yaml": "level: info"})
	mu.Lock()
	if calls != 0 {
		t.Errorf("%d reload calls at start; the program reads its files itself", calls)
	}
	mu.Unlock()

	project(t, dir, map[string]string{"app.yaml": "level: debug"})
	p := appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"app.yaml": "level: debug"})
	if p.Message != "reloaded" || p.SwappedAt.IsZero() {
		t.Errorf("%+v", p)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	project(t, dir, map[string]string{"app.yaml": "levl: debug"})
	p = appliedContent(t, cw, "ConfigMap/cfg0", reload.Rejected, map[string]string{"app.yaml": "levl: debug"})
	if !strings.Contains(p.Message, "400") || !strings.Contains(p.Message, `unknown field "levl"`) {
		t.Errorf("message %q", p.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("%d reload calls for 2 swaps", calls)
	}
}

// A check that serves a metric: 1 applied, 0 rejected; found past the
// first 16 KiB of the exposition, as Prometheus' own reload gauge is.
func TestMetricCheck(t *testing.T) {
	cw := newConfigward(t)
	var mu sync.Mutex
	value := "1"
	program := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for i := range 1000 {
			fmt.Fprintf(w, "app_earlier_metric_total{shard=\"%d\"} 0\n", i)
		}
		fmt.Fprintf(w, "# TYPE app_config_last_reload_successful gauge\napp_config_last_reload_successful_timestamp 17\napp_config_last_reload_successful %s\n", value)
	}))
	defer program.Close()
	dir := t.TempDir()
	project(t, dir, map[string]string{"a": "1"})
	run(t, spec(t, cw, "watch", program.URL+"/metrics#app_config_last_reload_successful", dir), fast)
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"a": "1"})
	mu.Lock()
	value = "0"
	mu.Unlock()
	project(t, dir, map[string]string{"a": "2"})
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Rejected, map[string]string{"a": "2"})
}

// A program that quotes what it could not parse never has its words
// leave a pod whose hot config includes a Secret.
func TestSecretsKeepProgramMessagesInThePod(t *testing.T) {
	cw := newConfigward(t)
	program := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad password line: hunter2-canary", http.StatusUnprocessableEntity)
	}))
	defer program.Close()
	flags, creds := t.TempDir(), t.TempDir()
	project(t, flags, map[string]string{"a": "1"})
	project(t, creds, map[string]string{"password": "hunter2-canary"})
	s := spec(t, cw, program.URL+"/-/reload", "", flags, creds)
	s.Configs[1].Kind = "Secret"
	run(t, s, fast)
	appliedContent(t, cw, "Secret/cfg1", reload.Seen, map[string]string{"password": "hunter2-canary"})
	project(t, creds, map[string]string{"password": "hunter2-canary\n"})
	p := appliedContent(t, cw, "Secret/cfg1", reload.Rejected, map[string]string{"password": "hunter2-canary\n"})
	if p.Message != reload.Withheld {
		t.Errorf("message %q, want it withheld", p.Message)
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for _, rep := range cw.reports {
		for _, c := range rep.Configs {
			if strings.Contains(c.Message, "hunter2") {
				t.Errorf("%s's report carries the program's words: %q", c.Config, c.Message)
			}
		}
	}
}

// Reports go on being tried while configward does not take them; the
// latest arrives once it does.
func TestReportsAreRetried(t *testing.T) {
	cw := newConfigward(t)
	cw.refuse = true
	dir := t.TempDir()
	project(t, dir, map[string]string{"a": "1"})
	run(t, spec(t, cw, "watch", "", dir), fast)
	time.Sleep(200 * time.Millisecond)
	project(t, dir, map[string]string{"a": "2"})
	time.Sleep(200 * time.Millisecond)
	cw.mu.Lock()
	cw.refuse = false
	cw.mu.Unlock()
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Seen, map[string]string{"a": "2"})
}

// A taken report is sent again, unchanged, now and then: configward may
// not have been able to judge it (a new installation key, a content its
// cache had not seen yet).
func TestReportsAreSentAgain(t *testing.T) {
	cw := newConfigward(t)
	dir := t.TempDir()
	project(t, dir, map[string]string{"a": "1"})
	o := fast
	o.Resend = 100 * time.Millisecond
	run(t, spec(t, cw, "watch", "", dir), o)
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Seen, map[string]string{"a": "1"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		cw.mu.Lock()
		n := len(cw.reports)
		cw.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reports of one swap in 5s, want it sent again every 100ms", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A signal goes to the container's main process, which goes on running.
func TestSignalReload(t *testing.T) {
	if os.Getenv("CONFIGWARD_AGENT_TEST_CHILD") != "" {
		return // the child's part is in TestMain
	}
	marker := filepath.Join(t.TempDir(), "hup")
	child := exec.Command(os.Args[0], "-test.run=^$")
	// The agent looks through the whole machine's /proc here, not a pod's:
	// a container name of this test alone (the node suite's pods, on this
	// machine too, mark theirs "app").
	container := fmt.Sprintf("agent-test-%d", os.Getpid())
	child.Env = append(os.Environ(), "CONFIGWARD_AGENT_TEST_CHILD="+marker, reload.ContainerEnv+"="+container)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	// The child is up once it has written its pid.
	waitFor(t, func() bool { _, err := os.Stat(marker + ".ready"); return err == nil })

	cw := newConfigward(t)
	dir := t.TempDir()
	project(t, dir, map[string]string{"a": "1"})
	run(t, spec(t, cw, "signal:SIGHUP@"+container, "", dir), fast)
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Seen, map[string]string{"a": "1"})
	project(t, dir, map[string]string{"a": "2"})
	p := appliedContent(t, cw, "ConfigMap/cfg0", reload.Triggered, map[string]string{"a": "2"})
	if !strings.Contains(p.Message, "SIGHUP sent to 1 processes of container "+container) {
		t.Errorf("message %q", p.Message)
	}
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return string(b) == "1" })
	if child.ProcessState != nil {
		t.Fatal("the program stopped")
	}

	By := "a signal to a container with no process"
	cw2 := newConfigward(t)
	dir2 := t.TempDir()
	project(t, dir2, map[string]string{"a": "1"})
	run(t, spec(t, cw2, "signal:SIGHUP@nobody", "", dir2), fast)
	appliedContent(t, cw2, "ConfigMap/cfg0", reload.Seen, map[string]string{"a": "1"})
	project(t, dir2, map[string]string{"a": "2"})
	p = appliedContent(t, cw2, "ConfigMap/cfg0", reload.Rejected, map[string]string{"a": "2"})
	if !strings.Contains(p.Message, "no process of container nobody") {
		t.Errorf("%s: message %q", By, p.Message)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMain doubles as the program of TestSignalReload: it counts the
// SIGHUPs it gets into a file, and runs until it is killed.
func TestMain(m *testing.M) {
	if marker := os.Getenv("CONFIGWARD_AGENT_TEST_CHILD"); marker != "" {
		hups := make(chan os.Signal, 1)
		signal.Notify(hups, syscall.SIGHUP)
		_ = os.WriteFile(marker+".ready", nil, 0o600)
		n := 0
		for range hups {
			n++
			_ = os.WriteFile(marker, []byte(fmt.Sprint(n)), 0o600)
		}
	}
	os.Exit(m.Run())
}

// A program that does not answer yet (busy starting) is called again, a
// bounded number of times; its first answer is final.
func TestCallsAreTriedAgain(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			// No answer: the connection is dropped.
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		fmt.Fprint(w, "reloaded")
	}))
	defer server.Close()
	p := &program{trigger: reload.Trigger{Mode: reload.HTTP, URL: server.URL}, client: server.Client(), settle: 10 * time.Millisecond}
	r := p.reload(context.Background())
	mu.Lock()
	n := calls
	mu.Unlock()
	if r.what != reload.Applied || r.message != "reloaded" || n != 2 {
		t.Errorf("%+v after %d calls, want applied on the second", r, n)
	}
	server.Close()
	start := time.Now()
	if r = p.reload(context.Background()); r.what != reload.Rejected || !strings.Contains(r.message, "the reload call failed") {
		t.Errorf("%+v, want the failure after the last try", r)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("gave up after %s: it did not wait between tries", took)
	}
}

// A pod that mounts two configs of one set: its program is reloaded only
// once configward says both hold the set's content, and, while configward
// cannot be asked, a config it said is in a set waits; one it never said
// so reloads as before.
func TestReloadWaitsForTheWholeSet(t *testing.T) {
	cw := newConfigward(t)
	a, b := t.TempDir(), t.TempDir()
	read := func(dir string) string {
		v, _ := os.ReadFile(filepath.Join(dir, "v"))
		return string(v)
	}
	var mu sync.Mutex
	var reloads []string // what the program read at each reload: "<a>/<b>"
	program := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		reloads = append(reloads, read(a)+"/"+read(b))
		fmt.Fprint(w, "reloaded")
	}))
	defer program.Close()
	inSet := true
	// configward's side: the set holds when both configs hold one version.
	cw.answer = func(rep reload.Report, key []byte) reload.Answer {
		if !inSet {
			return reload.Answer{Holds: true}
		}
		ans := reload.Answer{Sets: map[string]string{}}
		version := map[string]string{}
		for _, p := range rep.Configs {
			ans.Sets[p.Config] = "configset-pair-2@v2"
			for _, v := range []string{"1", "2", "3", "4"} {
				if reload.Matches(key, p.Keys, p.AllKeys, digest.KeyDigests(map[string]string{"v": v}, nil)) {
					version[p.Config] = v
				}
			}
		}
		ans.Holds = version["ConfigMap/cfg0"] == version["ConfigMap/cfg1"]
		if !ans.Holds {
			ans.WaitingFor = []string{"ConfigMap/cfg1"}
		}
		return ans
	}
	project(t, a, map[string]string{"v": "1"})
	project(t, b, map[string]string{"v": "1"})
	run(t, spec(t, cw, program.URL+"/-/reload", "", a, b), fast)
	appliedContent(t, cw, "ConfigMap/cfg1", reload.Seen, map[string]string{"v": "1"})
	reloaded := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reloads...)
	}
	asks := func() int {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		return cw.asks
	}

	project(t, a, map[string]string{"v": "2"})
	for deadline := time.Now().Add(5 * time.Second); asks() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // several polls
	if got := reloaded(); len(got) != 0 || asks() == 0 {
		t.Fatalf("after one member swapped: reloads %v, %d questions; want none, and a question", got, asks())
	}
	project(t, b, map[string]string{"v": "2"})
	p := appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"v": "2"})
	if p.Set != "configset-pair-2@v2" {
		t.Errorf("the report names set %q, want configset-pair-2@v2", p.Set)
	}
	if got := reloaded(); len(got) != 1 || got[0] != "2/2" {
		t.Fatalf("reloads %v, want one on 2/2", got)
	}

	// configward unreachable: members wait, whatever is on disk.
	cw.mu.Lock()
	cw.refuse = true
	cw.mu.Unlock()
	project(t, a, map[string]string{"v": "3"})
	project(t, b, map[string]string{"v": "3"})
	time.Sleep(1500 * time.Millisecond)
	if got := reloaded(); len(got) != 1 {
		t.Fatalf("reloads %v while configward could not be asked; want none more", got)
	}
	cw.mu.Lock()
	cw.refuse = false
	cw.mu.Unlock()
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"v": "3"})
	if got := reloaded(); len(got) != 2 || got[1] != "3/3" {
		t.Fatalf("reloads %v, want a second one on 3/3", got)
	}

	// Configs configward never said are in a set reload while it is down.
	cw.mu.Lock()
	inSet = false
	cw.mu.Unlock()
	project(t, a, map[string]string{"v": "4"})
	appliedContent(t, cw, "ConfigMap/cfg0", reload.Applied, map[string]string{"v": "4"})
	cw.mu.Lock()
	cw.refuse = true
	cw.mu.Unlock()
	project(t, b, map[string]string{"v": "4"})
	for deadline := time.Now().Add(5 * time.Second); len(reloaded()) < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := reloaded(); len(got) != 4 || got[3] != "4/4" {
		t.Fatalf("reloads %v: configs in no set must reload while configward is down", got)
	}
}
