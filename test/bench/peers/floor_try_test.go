package peers

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestFloorStack installs the floor on a fresh control plane and checks
// what the comparison relies on: the API server calls it exactly twice per
// Deployment create (the registrations are configward's), it lets the
// denied variant through without a word (it judges nothing), it refuses a
// caller without the API server's client certificate (the TLS it pays for
// is configward's), and Uninstall takes it out of the admission chain.
//
// The stamping floor is checked the same way on the same control plane,
// and for what makes it a fair floor for a mutating webhook: the API
// server applies its patch, the config-hash annotation on a Deployment's
// pod template and on a pod.
func TestFloorStack(t *testing.T) {
	ctx := context.Background()
	w, err := StartWorld(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Env.Stop() })
	t.Run("floor", func(t *testing.T) { checkFloor(ctx, t, w) })
	t.Run("stamping floor", func(t *testing.T) { checkStampingFloor(ctx, t, w) })
}

func checkFloor(ctx context.Context, t *testing.T, w *World) {
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

func checkStampingFloor(ctx context.Context, t *testing.T, w *World) {
	f := &Floor{Stamp: true}
	if err := f.Install(ctx, w, 0); err != nil {
		t.Fatal(err)
	}
	before, err := f.Reviews()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []Variant{Clean, Denied} {
		d := Deployment(w.Namespace, "stamped", v, 0)
		o, err := DryRunCreateObject(ctx, w, d)
		if err != nil {
			t.Fatal(err)
		}
		if o.Denied || !Stamped(d.Spec.Template.Annotations) {
			t.Fatalf("variant %v: denied=%v, template annotations %v: want allowed and stamped", v, o.Denied, d.Spec.Template.Annotations)
		}
	}
	after, err := f.Reviews()
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got != 4 {
		t.Fatalf("the stamping floor answered %d reviews for 2 Deployment creates, want 4", got)
	}
	// As podLoad sends pods: as a ReplicaSet's controller creates them.
	cfg, err := w.Env.ControllerConfig(ctx, "replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := RevisionPod(w.Namespace, "stamped")
	if err := rs.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if !Stamped(pod.Annotations) {
		t.Fatalf("pod annotations %v: want the stamp", pod.Annotations)
	}
	if err := f.Uninstall(ctx, w); err != nil {
		t.Fatal(err)
	}
}
