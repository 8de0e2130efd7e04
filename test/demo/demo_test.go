package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/configward/configward/test/framework"
)

// TestDemoRunsToTheWait builds the demo (what `make demo` runs), runs it up
// to the point where it waits for Ctrl-C, checks that its walkthrough shows
// every expected outcome, then interrupts it and checks that it cleans up.
func TestDemoRunsToTheWait(t *testing.T) {
	framework.RequireControlPlane(t)
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.Command(goTool(), "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}

	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	// Its own process group, so a timeout can kill everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		// Drain anything after the scanner gave up, so the demo never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if stopped {
			return
		}
		// A failed test still stops the demo the way a user would, so it
		// stops kube-apiserver and etcd (which run in process groups of
		// their own); SIGKILL only if that does not work.
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()

	var out strings.Builder
	timeout := time.After(6 * time.Minute)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before it waited for Ctrl-C; its output:\n%s", out.String())
			}
			out.WriteString(line + "\n")
			if strings.Contains(line, "export KUBECONFIG=") {
				break wait
			}
		case <-timeout:
			t.Fatalf("the demo did not reach the wait within 6 minutes; its output so far:\n%s", out.String())
		}
	}
	t.Logf("the demo reached the wait after %s", time.Since(start).Round(100*time.Millisecond))
	walk := out.String()
	for _, want := range []string{
		"✓ 01 as expected",
		"✓ 02 as expected",
		"configward.dev/config-hash=hmac-sha256:",
		"✓ 03 as expected",
		`denied the request: [subpath-config] Deployment demo/checkout-subpath`,
		"✓ 04 as expected",
		`denied the request: [hot-config-in-env] Deployment demo/checkout-flags-env`,
		"✓ 05 as expected",
		`Warning: [secret-in-env] Deployment demo/checkout-worker`,
		"✓ 06 as expected",
		`denied the request: [config-schema] ConfigMap demo/checkout-config breaks ConfigSchema "checkout"`,
		`key "app.yaml" line 3 column 9 at /server/port: expected integer`,
		"✓ 07 as expected",
		`ConfigSchema "payments" in configward.dev/schema, which does not exist`,
		"✓ 08 as expected",
		"generation=2 configward.dev/config-hash=hmac-sha256:",
		"$ kubectl configward status -n demo",
		"✓ 09 as expected",
		`denied the request: [secret-in-env] Deployment demo/checkout-worker`,
		"✓ 10 as expected",
		`denied the request: [out-of-pipeline-edit] e2e-admin changes data["app.yaml"] of ConfigMap demo/checkout-config outside the pipeline`,
		`Warning: [out-of-pipeline-edit] break-glass by e2e-admin: changed data["app.yaml"] of ConfigMap demo/checkout-config`,
		"✓ 11 as expected",
		"✓ 12 as expected",
		"✓ 13 as expected",
		`[config-revision] Deployment demo-waves/web: rolled back to the revision with config hash`,
		"message.txt=hello, world",
		"✓ 14 as expected",
		"configward-agent",
		"Hot config (reloaded in place",
		"the program of pod storefront-",
		"rejected ConfigMap/storefront-flags",
		"✓ 15 as expected",
		"banner-text-ch-canary",
		"WaitingForApproval",
		"✓ 16 as expected",
		"✓ 17 as expected",
		"✓ 18 as expected",
		"[config-set] Deployment demo-hot/banner mounts hot ConfigMap/banner-text, ConfigMap/banner-style",
		"holds=false waitingFor=[ConfigMap/banner-style-ch-canary]",
		"holds=true sets=map[ConfigMap/banner-style-ch-canary:configmap-banner-style-",
		"✓ 19 as expected",
		"Served certificates (pods by their worst port",
		"port 8443: stale",
		"ServedCertificateStale",
		"evicted pod web-",
		"✓ 20 as expected",
		`denied the request: [subpath-config] Pod demo/checkout-forged`,
		"✓ all 20 steps went as expected",
	} {
		if !strings.Contains(strings.ToLower(walk), strings.ToLower(want)) {
			t.Errorf("the walkthrough does not show %q", want)
		}
	}
	// configward status during step 08's rollout (pods still on the old
	// config) and after it: the drift a newcomer should see.
	for _, row := range []string{
		`(?m)^\s+Deployment/checkout\s+[0-9]/[0-9]\s+[1-9]\s+progressing\s+ConfigMap/checkout-config\s`,
		`(?m)^\s+Deployment/checkout\s+2/2\s+0\s+done\s+ConfigMap/checkout-config\s`,
	} {
		if !regexp.MustCompile(row).MatchString(walk) {
			t.Errorf("the walkthrough shows no configward status row matching %s", row)
		}
	}
	if strings.Contains(walk, "✗") {
		t.Errorf("the walkthrough reports a failed expectation")
	}
	if t.Failed() {
		t.Logf("the walkthrough:\n%s", walk)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	deadline := time.After(60 * time.Second)
	for lines != nil {
		select {
		case line, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			rest.WriteString(line + "\n")
		case <-deadline:
			t.Fatalf("the demo did not stop within 60 s of SIGINT; it printed:\n%s", rest.String())
		}
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("the demo exited with %v after SIGINT; it printed:\n%s", err, rest.String())
		}
	case <-deadline:
		t.Fatalf("the demo did not exit within 60 s of SIGINT")
	}
	if !strings.Contains(rest.String(), "stopped; cleaned up ") {
		t.Errorf("the demo did not say it cleaned up; it printed:\n%s", rest.String())
	}
	t.Logf("the demo stopped after %s in all", time.Since(start).Round(100*time.Millisecond))
}

// goTool is the go command building this test, else go on $PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}
