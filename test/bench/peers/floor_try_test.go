package peers

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFloorStack installs the floor on a fresh control plane and checks
// what the comparison relies on: the API server calls it exactly twice per
// Deployment create (the registrations are configward's), it lets the
// denied variant through without a word (it judges nothing), it refuses a
// caller without the API server's client certificate (the TLS it pays for
// is configward's), and Uninstall takes it out of the admission chain.
func TestFloorStack(t *testing.T) {
	ctx := context.Background()
	w, err := StartWorld(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Env.Stop() })
	f := &Floor{}
	if err := f.Install(ctx, w, 0); err != nil {
		t.Fatal(err)
	}
	if f.PID() == 0 {
		t.Fatal("PID() = 0 while installed")
	}
	before, err := f.Reviews()
	if err != nil {
		t.Fatal(err)
	}
	const creates = 5
	for range creates {
		o, err := DryRunCreate(ctx, w, Denied, 0)
		if err != nil {
			t.Fatal(err)
		}
		if o.Denied || len(o.Warnings) > 0 {
			t.Fatalf("the floor judged a Deployment: denied=%v message=%q warnings=%q", o.Denied, o.Message, o.Warnings)
		}
	}
	after, err := f.Reviews()
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got != 2*creates {
		t.Fatalf("the floor answered %d reviews for %d Deployment creates, want %d (configward's two webhooks each)", got, creates, 2*creates)
	}

	// Without the API server's client certificate: refused in the handshake.
	tlsCfg := w.Env.ClientTLS()
	tlsCfg.Certificates = nil
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := hc.Post(w.Env.WebhookURL("/validate-workloads"), "application/json", strings.NewReader(`{"request":{"uid":"x"}}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a caller without a client certificate got HTTP %d, want the handshake refused", resp.StatusCode)
	}
	// With it, the answer carries the request's uid.
	hc.Transport = &http.Transport{TLSClientConfig: w.Env.ClientTLS()}
	resp, err = hc.Post(w.Env.WebhookURL("/validate-workloads"), "application/json", strings.NewReader(`{"request":{"uid":"uid-1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"uid":"uid-1","allowed":true`) {
		t.Fatalf("answer %q, want the uid allowed", body)
	}

	if err := f.Uninstall(ctx, w); err != nil {
		t.Fatal(err)
	}
	// The stopped floor answers nothing: once the API server has dropped
	// its configurations, creates succeed again.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := DryRunCreate(ctx, w, Clean, 0)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a create a minute after Uninstall: %v (a webhook left behind that nobody answers?)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
