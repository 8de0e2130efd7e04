package peers

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestKyvernoStack installs the Kyverno stack on a fresh control plane,
// checks its policy answers as the benchmark expects, and that Uninstall
// leaves no webhook behind. It needs the peers built (`make peers`) and
// runs only when CONFIGWARD_PEERS_DIR points at them.
func TestKyvernoStack(t *testing.T) {
	peersDir := os.Getenv("CONFIGWARD_PEERS_DIR")
	if peersDir == "" {
		t.Skip("needs the peer binaries, heavy builds kept out of `make test`: run `make test-peers`, which builds them and sets CONFIGWARD_PEERS_DIR")
	}
	ctx := context.Background()
	w, err := StartWorld(ctx, peersDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Env.Stop() })

	// The ClusterPolicy first, then the ValidatingPolicies on the same API
	// server: the second install also shows the first left nothing behind.
	for _, k := range []*Kyverno{{}, {CEL: true}} {
		t.Run(k.Name(), func(t *testing.T) { tryKyverno(t, w, k) })
	}
}

func tryKyverno(t *testing.T, w *World, k *Kyverno) {
	ctx := context.Background()
	env := w.Env
	const extra = 3
	start := time.Now()
	if err := k.Install(ctx, w, extra); err != nil {
		t.Fatal(err)
	}
	t.Logf("kyverno in force after %v (pid %d, log %s)", time.Since(start).Round(time.Millisecond), k.PID(), k.Process().Log)
	if k.PID() == 0 {
		t.Error("PID() = 0 while installed")
	}
	if err := WaitInForce(ctx, w, extra, time.Minute); err != nil {
		t.Fatal(err)
	}

	// The warnings are the rules' own findings, not errors of rules that
	// failed to run (which Kyverno also reports as warnings).
	o, err := DryRunCreate(ctx, w, Warned, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warned Deployment: denied=%v warnings=%q", o.Denied, o.Warnings)
	if o.Denied || len(o.Warnings) != 1 || !strings.Contains(o.Warnings[0], "secret-in-env") ||
		!strings.Contains(o.Warnings[0], "as environment variables") {
		t.Errorf("warned Deployment: want one secret-in-env warning, got denied=%v warnings=%q", o.Denied, o.Warnings)
	}
	o, err = DryRunCreate(ctx, w, Denied, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("denied Deployment: message=%q", o.Message)

	// missing-config-ref: a required reference to a ConfigMap that does not
	// exist, and one to a key a Secret does not have, each get a warning;
	// the Deployment is allowed (the rule is Audit, as configward's is Warn).
	d := Deployment(w.Namespace, "missing", Clean, 0)
	d.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Name = "does-not-exist"
	d.Spec.Template.Spec.Containers[1].Env = append(d.Spec.Template.Spec.Containers[1].Env, corev1.EnvVar{Name: "OPTIONAL",
		ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "optional-missing"}, Key: "k", Optional: ptrTo(true)}}})
	o, err = DryRunCreateObject(ctx, w, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("missing ConfigMap: denied=%v warnings=%q", o.Denied, o.Warnings)
	if o.Denied || len(o.Warnings) != 1 || !strings.Contains(o.Warnings[0], "missing-config-ref") ||
		!strings.Contains(o.Warnings[0], "ConfigMap does-not-exist") {
		t.Errorf("missing ConfigMap: want one missing-config-ref warning naming it, got denied=%v message=%q warnings=%q", o.Denied, o.Message, o.Warnings)
	}
	d = Deployment(w.Namespace, "missing-key", Warned, 0)
	d.Spec.Template.Spec.Containers[2].Env[1].ValueFrom.SecretKeyRef.Key = "no-such-key"
	o, err = DryRunCreateObject(ctx, w, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("missing Secret key: denied=%v warnings=%q", o.Denied, o.Warnings)
	found := false
	for _, s := range o.Warnings {
		found = found || strings.Contains(s, "missing-config-ref") && strings.Contains(s, "Secret app-secret-2 (key no-such-key)")
	}
	if o.Denied || !found {
		t.Errorf("missing Secret key: want a missing-config-ref warning, got denied=%v message=%q warnings=%q", o.Denied, o.Message, o.Warnings)
	}

	if rss, peak, err := Memory(k.PID()); err == nil {
		cpu, _ := CPUTime(k.PID())
		t.Logf("kyverno: RSS %d MiB, peak %d MiB, CPU %v", rss>>20, peak>>20, cpu)
	}
	if err := k.Uninstall(ctx, w); err != nil {
		t.Fatal(err)
	}
	if k.PID() != 0 {
		t.Errorf("PID() = %d after Uninstall", k.PID())
	}
	var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
	var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
	if err := env.Client.List(ctx, &vwcs); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &mwcs); err != nil {
		t.Fatal(err)
	}
	for _, c := range vwcs.Items {
		t.Errorf("validating webhook configuration %s left behind", c.Name)
	}
	for _, c := range mwcs.Items {
		t.Errorf("mutating webhook configuration %s left behind", c.Name)
	}
	o, err = DryRunCreate(ctx, w, Denied, 1)
	if err != nil {
		t.Fatal(err)
	}
	if o.Denied || len(o.Warnings) > 0 {
		t.Errorf("after Uninstall: want the denied variant allowed silently, got denied=%v message=%q warnings=%q", o.Denied, o.Message, o.Warnings)
	}

	// A second Install on the same API server works as the first (the
	// benchmark installs each stack once per rule count).
	if err := k.Install(ctx, w, 1); err != nil {
		t.Fatal(err)
	}
	if err := k.Uninstall(ctx, w); err != nil {
		t.Fatal(err)
	}
}
