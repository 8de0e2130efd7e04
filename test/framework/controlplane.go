package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Faults of the control plane itself. envtest starts kube-apiserver and etcd
// as child processes of the test and can only stop them for good (a stop
// deletes their certificates and data), so a restart here stops the running
// process with a signal and starts the same binary again with its exact
// command line: same port, same certificates, same etcd data. The restarted
// process is a Component the Env stops before envtest tears down the rest.

// controlPlaneChild is a kube-apiserver or etcd started by envtest: a
// child of this process.
type controlPlaneChild struct {
	pid  int
	args []string // argv, with the binary first
}

// findControlPlaneChild finds the running child process named name whose
// command line holds every argument of with.
func findControlPlaneChild(name string, with ...string) (controlPlaneChild, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return controlPlaneChild{}, err
	}
	self := strconv.Itoa(os.Getpid())
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if ppid, running := ParentOf(pid); !running || strconv.Itoa(ppid) != self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != name {
			continue
		}
		all := true
		for _, w := range with {
			all = all && slices.Contains(args, w)
		}
		if all {
			return controlPlaneChild{pid: pid, args: args}, nil
		}
	}
	return controlPlaneChild{}, fmt.Errorf("no running %s started by this test (pid %s) with %q", name, self, with)
}

// stop signals the process and waits until it is gone, killing it once
// grace has passed, as the kubelet does at the end of a pod's termination
// grace period. It says whether it had to.
func (c controlPlaneChild) stop(sig syscall.Signal, grace time.Duration) (killed bool, err error) {
	if err := syscall.Kill(c.pid, sig); err != nil {
		return false, err
	}
	if c.wait(grace) {
		return false, nil
	}
	if err := syscall.Kill(c.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, err
	}
	if c.wait(time.Minute) {
		return true, nil
	}
	return true, fmt.Errorf("%s (pid %d) still running a minute after SIGKILL", filepath.Base(c.args[0]), c.pid)
}

// wait says whether the process exits within d. envtest waits for its
// children, so an exited one disappears from /proc.
func (c controlPlaneChild) wait(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(c.pid))); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apiServerPort is the port of the Env's kube-apiserver.
func (e *Env) apiServerPort() string {
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return ""
	}
	return u.Port()
}

// StopAPIServer stops the kube-apiserver the Env's clients, configward's
// processes and the cluster's components talk to, as an upgrade or a
// control-plane node's restart does: SIGTERM, then SIGKILL after grace
// (its graceful shutdown waits for requests in flight; every watch ends
// either way). It returns how to start it again as it was, and whether it
// had to be killed. Requests to it fail until then.
func (e *Env) StopAPIServer(grace time.Duration) (restart func() error, killed bool, err error) {
	return e.stopControlPlaneChild("kube-apiserver", syscall.SIGTERM, grace, "--secure-port="+e.apiServerPort())
}

// StopEtcd stops etcd with sig (SIGKILL for a crash), killing it after
// grace, and returns how to start it again on the same data.
func (e *Env) StopEtcd(sig syscall.Signal, grace time.Duration) (restart func() error, killed bool, err error) {
	return e.stopControlPlaneChild("etcd", sig, grace)
}

func (e *Env) stopControlPlaneChild(name string, sig syscall.Signal, grace time.Duration, with ...string) (func() error, bool, error) {
	c, err := findControlPlaneChild(name, with...)
	if err != nil {
		return nil, false, err
	}
	killed, err := c.stop(sig, grace)
	if err != nil {
		return nil, killed, err
	}
	restarts := 0
	return func() error {
		restarts++
		_, err := e.startProcess(fmt.Sprintf("%s-restart-%d", name, restarts), c.args[0], nil, c.args[1:]...)
		if err != nil {
			return err
		}
		// After an etcd restart too: the API server is ready once its
		// storage is.
		if err := waitReady(e.Config, name+" restarted"); err != nil || name != "etcd" {
			return err
		}
		// Its readiness check reaches etcd over a client of its own; the
		// clients that store objects reconnect on their own backoff, which
		// on a loaded machine can lag it. Storage is back once a write
		// through the API server is stored.
		return waitWritable(e.Config)
	}, killed, nil
}

// waitWritable waits until the API server cfg points at stores a write: a
// Lease of its own in kube-system, which no configward webhook judges.
func waitWritable(cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	leases := cs.CoordinationV1().Leases(metav1.NamespaceSystem)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "configward-test-storage-probe"}, Spec: coordinationv1.LeaseSpec{RenewTime: &now}}
		_, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var got *coordinationv1.Lease
			if got, err = leases.Get(ctx, lease.Name, metav1.GetOptions{}); err == nil {
				got.Spec.RenewTime = &now
				_, err = leases.Update(ctx, got, metav1.UpdateOptions{})
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd restarted: the API server stores no write after two minutes: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReady waits until the API server cfg points at answers /readyz.
func waitReady(cfg *rest.Config, what string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the API server is not ready after two minutes: %w", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// StartSecondAPIServer runs another kube-apiserver on the same etcd, with
// the same certificates, flags and admission configuration, as the other
// API servers of a highly available control plane behind their load
// balancer. It returns a client configuration for it. Its audit log is its
// own, so AuditEvents reads only the first one's.
func (e *Env) StartSecondAPIServer() (*rest.Config, error) {
	c, err := findControlPlaneChild("kube-apiserver", "--secure-port="+e.apiServerPort())
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	args := make([]string, 0, len(c.args))
	for _, a := range c.args[1:] {
		switch {
		case strings.HasPrefix(a, "--secure-port="):
			a = "--secure-port=" + port
		case strings.HasPrefix(a, "--audit-log-path="):
			a = "--audit-log-path=" + filepath.Join(e.Dir, "kube-apiserver-2", "audit.log")
		}
		args = append(args, a)
	}
	if _, err := e.startProcess("kube-apiserver-2", c.args[0], nil, args...); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Host = "https://" + net.JoinHostPort("127.0.0.1", port)
	return cfg, waitReady(cfg, "the second API server")
}

// APIServerPID is the process id of the Env's kube-apiserver, whose CPU the
// benchmarks measure.
func (e *Env) APIServerPID() (int, error) {
	c, err := findControlPlaneChild("kube-apiserver", "--secure-port="+e.apiServerPort())
	return c.pid, err
}
