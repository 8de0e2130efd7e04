package framework

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The configward binary, built once per test process, for tests that need
// configward as a process of its own: to kill it, to read its memory, to
// measure what it uses.

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// Binary builds cmd/configward (once per test process) and returns its path.
// It is built under the repository's bin/test, not the machine's temporary
// directory, so that a test process killed before RemoveBuilds leaves it
// in the clone, not on the machine.
func Binary() (string, error) {
	binaryOnce.Do(func() {
		parent := filepath.Join(RepoRoot(), "bin", "test")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			binaryErr = err
			return
		}
		dir, err := os.MkdirTemp(parent, "configward-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "configward")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		cmd := exec.Command(gobin, "build", "-o", binaryPath, "./cmd/configward")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("building configward: %v\n%s", err, out)
		}
	})
	return binaryPath, binaryErr
}

// RemoveBuilds removes what Binary and KubectlPlugin made. Suites call it
// once every spec has run.
func RemoveBuilds() {
	if binaryPath != "" {
		_ = os.RemoveAll(filepath.Dir(binaryPath))
	}
	if pluginDir != "" {
		_ = os.RemoveAll(pluginDir)
	}
}

// Process is `configward webhook` or `configward controller` running as a
// child process.
type Process struct {
	*Component
	// MetricsURL and ProbeURL are its /metrics and probe endpoints; Addr
	// is where a webhook serves admission.
	MetricsURL, ProbeURL, Addr string
	// HeapDump is where SIGUSR1 makes it write a dump of its live heap.
	HeapDump string
}

// StartWebhookBinary runs `configward webhook` against the test API server
// with the test certificate and the flags a chart install would give it
// (client certificates required unless the Env was started with
// UnauthenticatedCallers), plus extra. WebhookURL and the webhook
// configurations installed afterwards point at it. It is ready when this
// returns.
func (e *Env) StartWebhookBinary(name string, extra ...string) (*Process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"webhook", "--bind-address=" + addr, "--cert-dir=" + e.CertDir}
	if e.authenticate {
		args = append(args, "--client-ca-file="+filepath.Join(e.Dir, "client-ca.crt"))
	}
	p, err := e.startBinary(name, e.Kubeconfig, append(args, extra...))
	if err != nil {
		return nil, err
	}
	p.Addr = addr
	e.webhookAddr = addr
	return p, nil
}

// StartControllerBinary runs `configward controller` as configward's
// controller service account, without leader election unless extra asks
// for it.
func (e *Env) StartControllerBinary(name string, extra ...string) (*Process, error) {
	kubeconfig, err := e.UserKubeconfig(ControllerUser, "system:masters")
	if err != nil {
		return nil, err
	}
	return e.startBinary(name, kubeconfig, append([]string{"controller", "--leader-elect=false", "--leader-election-namespace=" + Namespace}, extra...))
}

func (e *Env) startBinary(name, kubeconfig string, args []string) (*Process, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	probe, err := freeAddr()
	if err != nil {
		return nil, err
	}
	heap := filepath.Join(e.Dir, name, "heap.dump")
	// The defaults go right after the command, so that the caller's flags,
	// after them, win (the last value of a flag counts).
	defaults := []string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probe,
		"--shutdown-delay=0s", "--log-format=json", "--verbosity=1", "--heap-dump-file=" + heap,
		"--hash-key-namespace=" + Namespace, "--hash-key-secret=" + HashKeySecret}
	args = append(append(append([]string{}, args[0]), defaults...), args[1:]...)
	c, err := e.startProcess(name, bin, e.BinaryEnv, args...)
	if err != nil {
		return nil, err
	}
	p := &Process{Component: c, MetricsURL: "http://" + metrics + "/metrics", ProbeURL: "http://" + probe, HeapDump: heap}
	within := e.ReadyWithin
	if within == 0 {
		within = time.Minute
	}
	if err := waitProbe(p.ProbeURL+"/readyz", nil, within); err != nil {
		out, _ := os.ReadFile(c.Log)
		return nil, errors.Join(fmt.Errorf("%s: %w", name, err), errors.New(tail(string(out), 3000)))
	}
	return p, nil
}

// MetricSum is the sum of every series of the metric name that the process
// at metricsURL serves (0 when it serves none).
func MetricSum(metricsURL, name string) (int, error) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return SumSeries(string(body), name)
}

// SumSeries sums the series of the metric name in Prometheus text.
func SumSeries(text, name string) (int, error) {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		sum += f
	}
	return int(sum), nil
}
