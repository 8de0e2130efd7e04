// Package reload is the contract between configward and its reload agent,
// the native sidecar that brings a change of hot config to a running
// program and says what the program made of it:
//
//   - how a pod asks for the agent (its annotations: Trigger and Check);
//   - what the injection tells the agent (Spec: the config directories to
//     watch, where to report);
//   - what the agent reports (Report): per config, the content on disk
//     now and when the kubelet swapped it in, and whether the program
//     applied or rejected it;
//   - how content is named without anything that reveals a Secret's value:
//     the agent sends, per key, an HMAC of the key's digest under a key
//     derived from its own service-account token (Fingerprints), which
//     only the agent and configward, who receives that token, can compute;
//     configward compares them with the digests it keeps of the current
//     content and of each snapshot (Matches) and keeps only the verdict.
//
// It is pure; the agent (internal/agent) does the watching, reading and
// calling, and the webhook (internal/admission) injects and judges.
package reload

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// Mode is how the program takes in a change.
type Mode string

const (
	// Signal: a signal to the processes of one container (they share the
	// pod's process namespace).
	Signal Mode = "signal"
	// HTTP: a POST to a local URL.
	HTTP Mode = "http"
	// Watch: the program watches its files; the agent only reports.
	Watch Mode = "watch"
)

// Trigger is what a pod's ReloadAgentAnnotation asks for.
type Trigger struct {
	Mode Mode
	// Signal and Container, for Signal.
	Signal    syscall.Signal
	Container string
	// URL, for HTTP.
	URL string
}

// signals are those a program may take as "reload": never one that stops
// it, since the agent must never restart the program.
var signals = map[string]syscall.Signal{
	"SIGHUP":  syscall.SIGHUP,
	"SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2,
}

// ParseTrigger reads a ReloadAgentAnnotation value: "signal:SIGHUP@app",
// "http://localhost:8080/-/reload" (local addresses only: the agent calls
// its own pod), or "watch".
func ParseTrigger(v string) (Trigger, error) {
	switch {
	case v == string(Watch):
		return Trigger{Mode: Watch}, nil
	case strings.HasPrefix(v, "signal:"):
		sig, container, ok := strings.Cut(strings.TrimPrefix(v, "signal:"), "@")
		s, known := signals[strings.ToUpper(sig)]
		if !ok || container == "" {
			return Trigger{}, fmt.Errorf("%q is not signal:<SIGNAL>@<container>", v)
		}
		if !known {
			return Trigger{}, fmt.Errorf("signal %s is not one a program reloads on (SIGHUP, SIGUSR1, SIGUSR2): the agent never stops the program", sig)
		}
		return Trigger{Mode: Signal, Signal: s, Container: container}, nil
	case strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://"):
		if err := localURL(v); err != nil {
			return Trigger{}, err
		}
		return Trigger{Mode: HTTP, URL: v}, nil
	}
	return Trigger{}, fmt.Errorf("%q is none of signal:<SIGNAL>@<container>, a local http:// URL, or watch", v)
}

// Check is how the agent reads back what the program applied, from a
// pod's ReloadCheckAnnotation.
type Check struct {
	// URL is read after each reload.
	URL string
	// Metric, when set, is a gauge in the Prometheus text the URL serves:
	// 1 applied, 0 rejected. Without it the URL's answer is what the
	// program says it applied (2xx), or why it did not (any other status).
	Metric string
	// Since, when set, is a gauge beside Metric: the Unix time in seconds
	// of the program's last successful reload. It is what proves the
	// program acted on this content, not on an earlier one: a program
	// that answers a signal or a call at once and reloads later, or
	// watches its files on its own schedule, still shows the previous
	// reload's success for a while. With it, the agent takes a 1 only
	// once that time is after the kubelet swapped the content in.
	Since string
}

// ParseCheck reads a ReloadCheckAnnotation value: a local URL, with
// "#<metric>" when it serves Prometheus text, and ";since=<metric>" after
// it when the program also exposes its last successful reload's time
// ("#;since=<metric>" when it exposes only that).
func ParseCheck(v string) (Check, error) {
	u, fragment, _ := strings.Cut(v, "#")
	if err := localURL(u); err != nil {
		return Check{}, err
	}
	metric, option, hasOption := strings.Cut(fragment, ";")
	since, isSince := strings.CutPrefix(option, "since=")
	switch {
	case hasOption && !isSince:
		return Check{}, fmt.Errorf("%q after the metric is not since=<metric>", option)
	case hasOption && since == "":
		return Check{}, fmt.Errorf("%q: since= names the gauge of the last successful reload's time, as #<metric>;since=<metric> or #;since=<metric>", v)
	}
	for _, name := range []string{metric, since} {
		for _, r := range name {
			if !(r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return Check{}, fmt.Errorf("%q is not a Prometheus metric name", name)
			}
		}
	}
	return Check{URL: u, Metric: metric, Since: since}, nil
}

// localURL accepts an http(s) URL of the pod's own loopback: the agent
// calls its own program, never anything beyond the pod.
func localURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%q is not an http:// URL", v)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a local URL (localhost, 127.0.0.1 or [::1]): the agent calls the program in its own pod, nothing beyond it", v)
}
