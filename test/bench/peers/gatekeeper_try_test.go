package peers

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestGatekeeperStack installs the Gatekeeper stack with three extra rules
// on a fresh control plane, checks its whole policy is in force (including
// the referential missing-config-ref, a warning), runs a short load, and
// checks Uninstall leaves admission as it was. It needs the binaries of
// `make peers` in $CONFIGWARD_PEERS_DIR.
func TestGatekeeperStack(t *testing.T) {
	dir := os.Getenv("CONFIGWARD_PEERS_DIR")
	if dir == "" {
		t.Skip("needs the peer binaries, heavy builds kept out of `make test`: run `make test-peers`, which builds them and sets CONFIGWARD_PEERS_DIR")
	}
	ctx := context.Background()
	w, err := StartWorld(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Env.Stop() })

	const extra = 3
	g := &Gatekeeper{}
	start := time.Now()
	if err := g.Install(ctx, w, extra); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed in %v; webhook pid %d", time.Since(start).Round(time.Millisecond), g.PID())
	if err := WaitInForce(ctx, w, extra, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// missing-config-ref: container 0 reads a ConfigMap that does not
	// exist. The rule warns (enforcementAction: warn), it does not deny.
	d := Deployment(w.Namespace, "missing-ref", Clean, 0)
	d.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Name = "does-not-exist"
	denied, message, warned := gkDryRun(t, w, d)
	if denied {
		t.Fatalf("Deployment with a missing ConfigMap denied, want a warning: %s", message)
	}
	found := false
	for _, s := range warned {
		if strings.HasPrefix(s, "[missing-config-ref]") && strings.Contains(s, "does-not-exist") {
			found = true
			t.Logf("warning: %s", s)
		}
	}
	if !found {
		t.Fatalf("no missing-config-ref warning for ConfigMap does-not-exist; warnings: %q", warned)
	}
	// A key the ConfigMap lacks is reported too.
	d = Deployment(w.Namespace, "missing-key", Clean, 0)
	d.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Key = "no-such-key"
	if _, _, warned := gkDryRun(t, w, d); !gkContainsAll(warned, "[missing-config-ref]", "no-such-key") {
		t.Fatalf("no missing-config-ref warning for key no-such-key; warnings: %q", warned)
	}
	// Every form of reference, and an optional one that is never reported.
	d = Deployment(w.Namespace, "missing-forms", Clean, 0)
	spec := &d.Spec.Template.Spec
	optional := true
	spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/app:1.0",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing-envfrom"}}}},
		Env: []corev1.EnvVar{{Name: "OPT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "missing-optional"}, Key: "k", Optional: &optional}}}}}}
	spec.Volumes = append(spec.Volumes,
		corev1.Volume{Name: "sv", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SecretName(0),
			Items: []corev1.KeyToPath{{Key: "no-such-secret-key", Path: "p"}}}}},
		corev1.Volume{Name: "pv", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "missing-projected"}}}}}}})
	_, _, warned = gkDryRun(t, w, d)
	for _, want := range []string{"missing-envfrom", "no-such-secret-key", "missing-projected"} {
		if !gkContainsAll(warned, "[missing-config-ref]", want) {
			t.Errorf("no missing-config-ref warning about %s; warnings: %q", want, warned)
		}
	}
	if gkContainsAll(warned, "missing-optional") {
		t.Errorf("an optional reference reported: %q", warned)
	}

	// The messages as a user sees them.
	for _, v := range []Variant{Warned, Denied} {
		o, err := DryRunCreate(ctx, w, v, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("variant %d: denied=%v message=%q first warning=%q (%d warnings)", v, o.Denied, o.Message, gkFirst(o.Warnings), len(o.Warnings))
	}
	o, err := DryRunCreate(ctx, w, Clean, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("extra rule 2: %q", o.Message)

	// A short load, half clean and half with findings, for a first look
	// at the process's CPU and memory.
	logSize := func() int64 {
		fi, err := os.Stat(g.webhook.Log)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	log0 := logSize()
	cpu0, _ := CPUTime(g.PID())
	var loadErrs sync.Map
	res := ClosedLoop(ctx, 10, 10*time.Second, 1<<30, func(ctx context.Context, _, seq int) error {
		v := Clean
		if seq%2 == 1 {
			v = Warned
		}
		_, err := DryRunCreate(ctx, w, v, 0)
		if err != nil {
			loadErrs.Store(err.Error(), true)
		}
		return err
	})
	loadErrs.Range(func(k, _ any) bool {
		t.Logf("load error: %v", k)
		return true
	})
	cpu1, _ := CPUTime(g.PID())
	rss, peak, err := Memory(g.PID())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Latencies); n > 0 {
		t.Logf("10 clients, 10 s: %d requests (%.0f/s), %d errors, p50 %v p99 %v; gatekeeper CPU %v (%v per request); RSS %d MiB, peak %d MiB",
			n, res.Rate(), res.Errors, res.Percentile(50), res.Percentile(99), cpu1-cpu0, (cpu1-cpu0)/time.Duration(n), rss>>20, peak>>20)
	}
	t.Logf("gatekeeper logged %d bytes during the load", logSize()-log0)
	if res.Errors > len(res.Latencies)/100 {
		t.Errorf("%d requests failed under load", res.Errors)
	}

	if err := g.Uninstall(ctx, w); err != nil {
		t.Fatal(err)
	}
	if g.PID() != 0 {
		t.Error("PID after Uninstall is not 0")
	}
	err = w.Env.Client.Get(ctx, client.ObjectKey{Name: gatekeeperWebhookConfig}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("webhook configuration after Uninstall: %v", err)
	}
	o, err = DryRunCreate(ctx, w, Denied, 1)
	if err != nil {
		t.Fatal(err)
	}
	if o.Denied || len(o.Warnings) > 0 {
		t.Fatalf("after Uninstall the denied variant got denied=%v %q warnings %q, want allowed silently", o.Denied, o.Message, o.Warnings)
	}
}

// gkDryRun sends a server-side dry-run create of d.
func gkDryRun(t *testing.T, w *World, d client.Object) (denied bool, message string, warned []string) {
	t.Helper()
	o, err := DryRunCreateObject(context.Background(), w, d)
	if err != nil {
		t.Fatal(err)
	}
	return o.Denied, o.Message, o.Warnings
}

func gkContainsAll(warned []string, parts ...string) bool {
	for _, s := range warned {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(s, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func gkFirst(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
