package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/configward/configward/internal/reload"
)

// program is the program the agent reloads.
type program struct {
	trigger reload.Trigger
	check   *reload.Check
	client  *http.Client
	// proc is where processes are listed (/proc).
	proc string
	// settle is how long after a reload the check is first read: a program
	// reloads after it answers the signal or the call.
	settle time.Duration
	// checkFor bounds how long the check is read for a proof of what the
	// program made of one content.
	checkFor time.Duration
	// failing: the program's last proven reload was rejected, so its check
	// already says "rejected" before it looks at a new content.
	failing bool
}

// result is what came of one reload; the zero result says the content
// was swapped again before anything came of it.
type result struct {
	what, message string
}

// reloadAndCheck triggers the program's reload of the content swapped in
// at swapped and reads back what it made of it, while current says that
// content is still the one on disk.
//
// kept says the content is again what the program ran when it last
// rejected one: it runs it whatever its check says (see judge).
func (p *program) reloadAndCheck(ctx context.Context, swapped time.Time, current func() bool, kept bool) result {
	r := p.reload(ctx)
	if r.what == reload.Rejected || p.check == nil {
		return r
	}
	return p.await(ctx, r, swapped, current, kept)
}

// reload triggers the program's reload once.
func (p *program) reload(ctx context.Context) result {
	switch p.trigger.Mode {
	case reload.Signal:
		n, err := p.signal()
		if err != nil {
			return result{reload.Rejected, reload.Cut("the reload signal was not sent: " + err.Error())}
		}
		return result{reload.Triggered, fmt.Sprintf("%s sent to %d processes of container %s", signalName(p.trigger.Signal), n, p.trigger.Container)}
	case reload.HTTP:
		status, body, err := p.call(ctx, http.MethodPost, p.trigger.URL)
		switch {
		case err != nil:
			return result{reload.Rejected, reload.Cut("the reload call failed: " + err.Error())}
		case status/100 != 2:
			return result{reload.Rejected, reload.Cut(fmt.Sprintf("the reload call answered %d: %s", status, body))}
		}
		return result{reload.Applied, reload.Cut(body)}
	}
	return result{reload.Seen, ""}
}

// await reads the check until it proves what the program made of the
// content swapped in at swapped, or checkFor has passed: then the last
// reading stands, and one that proves nothing (a success from before the
// swap) leaves the reload unproven (triggered, or seen for a program that
// watches its files). It gives up, with the zero result,
// once the content is swapped again: the next one is reloaded and
// checked in its turn.
func (p *program) await(ctx context.Context, sent result, swapped time.Time, current func() bool, kept bool) result {
	deadline := time.Now().Add(p.checkFor)
	wait := p.settle
	for {
		select {
		case <-ctx.Done():
			return sent
		case <-time.After(wait):
		}
		if !current() {
			return result{}
		}
		r, proven := p.judge(ctx, swapped, kept)
		if proven || !time.Now().Before(deadline) {
			return r
		}
		wait = min(2*wait, maxCheckWait)
	}
}

// maxCheckWait bounds the wait between two readings of the check.
const maxCheckWait = 5 * time.Second

// judge reads the check once: what it says of the content swapped in at
// swapped, and whether that is proven of this content (else the reading
// is taken only when the time to prove it is out).
//
// A success metric alone proves little: it still shows the previous
// reload until the program acts. With the program's last success time
// (Check.Since) a 1 proves the content applied once that time is after
// the swap. A 0 where the program was running a good config is a reload
// that failed since, so this content's rejection; where it already ran
// on a rejection, only the time to prove it running out tells, unless
// the content is the one it kept (kept): a program that rejects keeps its
// last good configuration, so it runs this content, and a program that
// reloads only what differs from what it runs (Caddy's watch) never
// reloads it nor clears its gauge.
func (p *program) judge(ctx context.Context, swapped time.Time, kept bool) (result, bool) {
	if p.check.Since == "" {
		r := p.read(ctx)
		p.learn(r)
		return r, r.what != reload.Triggered
	}
	_, body, err := p.call(ctx, http.MethodGet, p.check.URL)
	if err != nil {
		return result{reload.Triggered, reload.Cut("the check could not be read: " + err.Error())}, false
	}
	ok, found := metric(body, p.check.Metric)
	at, foundAt := metric(body, p.check.Since)
	if p.check.Metric == "" {
		ok, found = 1, true // only the time: a reload after the swap is the verdict
	}
	switch {
	case !found || !foundAt:
		return result{reload.Triggered, reload.Cut(fmt.Sprintf("the check serves no %s or no %s", p.check.Metric, p.check.Since))}, false
	case ok == 0 && !p.failing:
		p.failing = true
		return result{reload.Rejected, p.check.Metric + " 0: the program kept its last good configuration"}, true
	case ok == 0 && kept:
		return result{reload.Applied, p.check.Metric + " 0 from the rejection before: the program runs its last good configuration, which is this content again"}, true
	case ok == 0:
		return result{reload.Rejected, fmt.Sprintf("%s 0 and no successful reload since the swap at %s: the program kept its last good configuration", p.check.Metric, stamp(swapped))}, false
	case at > float64(time.Now().Add(24*time.Hour).Unix()):
		return result{reload.Triggered, reload.Cut(fmt.Sprintf("%s is %v, not a Unix time in seconds (milliseconds or nanoseconds are not taken)", p.check.Since, at))}, false
	case ok == 1 && after(at, swapped):
		p.failing = false
		return result{reload.Applied, reload.Cut(fmt.Sprintf("the program reloaded at %s, after the swap at %s (%s)", stamp(unixTime(at)), stamp(swapped), p.check.Since))}, true
	case ok == 1:
		return result{p.unproven(), reload.Cut(fmt.Sprintf("the program has not reloaded since the swap at %s: its last successful reload (%s) was at %s", stamp(swapped), p.check.Since, stamp(unixTime(at))))}, false
	}
	return result{reload.Triggered, reload.Cut(fmt.Sprintf("%s is %v", p.check.Metric, ok))}, false
}

// after says whether the Unix time at (seconds) is after t. A program that
// keeps whole seconds only is taken at its precision: a reload in the
// swap's second counts (the reload before is minutes earlier, far more
// often than within the same second).
func after(at float64, t time.Time) bool {
	if at == math.Trunc(at) {
		return at >= float64(t.Unix())
	}
	return unixTime(at).After(t)
}

// unproven is the result of a reload nothing proves came to anything: it
// was triggered, or, for a program that watches its files, seen.
func (p *program) unproven() string {
	if p.trigger.Mode == reload.Watch {
		return reload.Seen
	}
	return reload.Triggered
}

// learn keeps what a reading without the success time says of the
// program's state.
func (p *program) learn(r result) {
	switch r.what {
	case reload.Applied:
		p.failing = false
	case reload.Rejected:
		p.failing = true
	}
}

// unixTime is a gauge of Unix seconds as a time.
func unixTime(seconds float64) time.Time {
	return time.Unix(0, int64(seconds*1e9)).UTC()
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// read reads back what the program runs, as its check says, without
// telling one content from another.
func (p *program) read(ctx context.Context) result {
	status, body, err := p.call(ctx, http.MethodGet, p.check.URL)
	switch {
	case err != nil:
		return result{reload.Triggered, reload.Cut("the check could not be read: " + err.Error())}
	case p.check.Metric != "":
		v, ok := metric(body, p.check.Metric)
		switch {
		case !ok:
			return result{reload.Triggered, reload.Cut(fmt.Sprintf("the check serves no %s", p.check.Metric))}
		case v == 1:
			return result{reload.Applied, p.check.Metric + " 1"}
		case v == 0:
			return result{reload.Rejected, p.check.Metric + " 0: the program kept its last good configuration"}
		}
		return result{reload.Triggered, reload.Cut(fmt.Sprintf("%s is %v", p.check.Metric, v))}
	case status/100 != 2:
		return result{reload.Rejected, reload.Cut(fmt.Sprintf("the check answered %d: %s", status, body))}
	}
	return result{reload.Applied, reload.Cut(body)}
}

// maxBody bounds what the agent reads of a program's answer.
const maxBody = 16 << 10

// call asks the program (its reload URL or its check) and returns its
// answer, cut to maxBody.
//
// A call that gets no answer (the program is busy starting, a connection
// refused) is tried again, callAttempts times in all, a little longer
// apart each time; an answer, whatever its status, is final. Reloading
// twice, where a first call was taken but its answer lost, is harmless.
func (p *program) call(ctx context.Context, method, url string) (status int, body string, err error) {
	wait := p.settle
	for attempt := 1; ; attempt++ {
		if status, body, err = p.callOnce(ctx, method, url); err == nil || attempt == callAttempts {
			return status, body, err
		}
		select {
		case <-ctx.Done():
			return 0, "", err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// callAttempts bounds the tries of one call.
const callAttempts = 3

// callOnce is one try of call.
func (p *program) callOnce(ctx context.Context, method, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if method == http.MethodGet && p.check != nil && (p.check.Metric != "" || p.check.Since != "") {
		body, err := samples(resp.Body, p.check.Metric, p.check.Since)
		return resp.StatusCode, body, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// maxMetrics bounds what the agent reads of a program's metrics: a
// program's whole exposition is often far past maxBody (Prometheus'
// own is over 100 KiB, its reload gauges past the first 16 KiB), so it is
// read line by line and only the lines of the check's metrics are kept.
const maxMetrics = 16 << 20

// samples reads Prometheus text from r and keeps the lines that start
// with one of names (metric can tell those apart from longer names).
func samples(r io.Reader, names ...string) (string, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxMetrics))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var kept []string
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if n != "" && strings.HasPrefix(line, n) && len(kept) < 64 {
				kept = append(kept, line)
				break
			}
		}
	}
	return strings.Join(kept, "\n"), sc.Err()
}

// metric reads the first sample of name in Prometheus text exposition.
func metric(text, name string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		} else if rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue // another metric whose name starts with name
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err == nil {
			return v, true
		}
	}
	return 0, false
}

// signal sends the trigger's signal to the main processes of its container:
// those marked with ContainerEnv whose parent is not (a program's own
// children take the signal from it, as they would from a terminal).
func (p *program) signal() (int, error) {
	marker := []byte(reload.ContainerEnv + "=" + p.trigger.Container + "\x00")
	entries, err := os.ReadDir(p.proc)
	if err != nil {
		return 0, err
	}
	marked := map[int]int{} // pid -> parent
	denied := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join(p.proc, e.Name(), "environ"))
		if errors.Is(err, os.ErrPermission) {
			denied++
			continue
		}
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, marker...)) {
			continue
		}
		marked[pid] = parentOf(p.proc, pid)
	}
	n := 0
	for pid, parent := range marked {
		if _, child := marked[parent]; child {
			continue
		}
		if err := syscall.Kill(pid, p.trigger.Signal); err != nil {
			return n, fmt.Errorf("process %d: %w (the agent must run as the program's user: set runAsUser)", pid, err)
		}
		n++
	}
	if n == 0 {
		why := "is it running, and does the pod share its process namespace?"
		if denied > 0 {
			why = fmt.Sprintf("%d processes could not be looked at: the agent must run as the program's user (set runAsUser)", denied)
		}
		return 0, fmt.Errorf("no process of container %s found: %s", p.trigger.Container, why)
	}
	return n, nil
}

// parentOf reads a process's parent from /proc/<pid>/stat (0 when it
// cannot).
func parentOf(proc string, pid int) int {
	stat, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The command may hold spaces and parentheses: the fields follow the
	// last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	}
	return s.String()
}
