package analysis

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestParseAddresses(t *testing.T) {
	a, err := ParseAddresses("the list", "10.96.0.0/12, 192.168.1.7\nprometheus.monitoring.svc:9090 Hooks.Example.")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, port, ip string
		want           bool
	}{
		{"10.100.0.1", "443", "10.100.0.1", true},
		{"10.112.0.1", "443", "10.112.0.1", false},
		{"192.168.1.7", "80", "192.168.1.7", true},
		{"192.168.1.7", "80", "::ffff:192.168.1.7", true},
		{"prometheus.monitoring.svc", "9090", "172.16.0.9", true},
		{"prometheus.monitoring.svc", "9091", "172.16.0.9", false},
		{"hooks.example", "8443", "203.0.113.5", true},
		{"evil.example", "443", "203.0.113.5", false},
		// A name that resolves into a listed CIDR is admitted for it.
		{"anything.internal", "80", "10.96.0.10", true},
	} {
		if got := a.admits(tc.host, tc.port, netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("%s:%s at %s: got %v, want %v", tc.host, tc.port, tc.ip, got, tc.want)
		}
	}
	for _, bad := range []string{"", " , ", "http://x", "user@host", "x/y", "*.svc"} {
		if _, err := ParseAddresses("the list", bad); err == nil || !strings.Contains(err.Error(), "the list") {
			t.Errorf("%q: got %v", bad, err)
		}
	}
}

// TestReachAtConnect: the lists are held on the address a name resolves
// to when configward connects, for Prometheus and webhooks alike; every
// list must admit it; a refusal is not retried.
func TestReachAtConnect(t *testing.T) {
	hook, calls := fakeWebhook(t, false, func(_ int, w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"pass":true}`) })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hook.URL, "http://"))
	byName := "http://localhost:" + port // resolves to a loopback address
	loopback := mustAddresses(t, "the chart's analysis.allowedAddresses", "127.0.0.0/8, ::1")
	elsewhere := mustAddresses(t, "the Secret's configward.dev/analysis-addresses", "10.0.0.0/8")
	named := mustAddresses(t, "the Secret's configward.dev/analysis-addresses", "localhost:"+port)

	for _, tc := range []struct {
		name   string
		url    string
		reach  Reach
		refuse string
	}{
		{"no list", hook.URL, nil, ""},
		{"an IP in the list", hook.URL, Reach{loopback}, ""},
		{"a name resolved into the list", byName, Reach{loopback}, ""},
		{"a name on the list", byName, Reach{loopback, named}, ""},
		{"an IP outside a list", hook.URL, Reach{loopback, elsewhere}, "the Secret's configward.dev/analysis-addresses does not admit it"},
		{"a name resolved outside the list", byName, Reach{elsewhere}, "may not connect to localhost"},
		{"the name's port is not the one listed", "http://localhost:1", Reach{named}, "does not admit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := calls.Load()
			_, err := CallWebhook(context.Background(), Webhook{URL: tc.url, Reach: tc.reach}, sampleCall, time.Second, 3)
			switch {
			case tc.refuse == "" && (err != nil || calls.Load() != before+1):
				t.Fatalf("webhook: %v after %d calls", err, calls.Load()-before)
			case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse) || calls.Load() != before):
				t.Fatalf("webhook: got %v after %d calls, want a refusal saying %q", err, calls.Load()-before, tc.refuse)
			case tc.refuse != "" && strings.Contains(err.Error(), "attempt 2"):
				t.Errorf("a refused address was tried again: %v", err)
			}
		})
	}

	srv, _ := fakePrometheus(t, false, always(200, scalar("1")))
	if _, err := newPromReach(t, srv.URL, Reach{loopback}).Query(context.Background(), "up", time.Time{}); err != nil {
		t.Errorf("prometheus in the list: %v", err)
	}
	_, err := newPromReach(t, srv.URL, Reach{elsewhere}).Query(context.Background(), "up", time.Time{})
	if err == nil || !strings.Contains(err.Error(), "does not admit") {
		t.Errorf("prometheus outside the list: %v", err)
	}
}

func mustAddresses(t *testing.T, source, list string) Addresses {
	t.Helper()
	a, err := ParseAddresses(source, list)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newPromReach(t *testing.T, address string, r Reach) *Prometheus {
	t.Helper()
	p, err := NewPrometheus(address, Credentials{}, 5*time.Second, r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
