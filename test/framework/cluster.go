package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The rest of a cluster beside the API server: kube-controller-manager with
// every controller that runs by default (the workload controllers, the
// garbage collector, namespace deletion, the node lifecycle controller that
// clears the not-ready taint of new nodes, ...), kube-scheduler, and kwok,
// which stands in for the kubelets of a few fake nodes: it marks the pods
// scheduled onto them Running and Ready, and finishes their deletion. No
// container runs anywhere; what configward needs of a pod is its spec, its
// annotations and its lifecycle.

// KwokNodeAnnotation marks the nodes kwok manages.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// ControllerManagerControllers is kube-controller-manager's --controllers:
// every controller that is on by default, as in a kubeadm cluster. Those
// that need a cloud provider or signing keys do nothing without them.
var ControllerManagerControllers = []string{"*"}

// StartCluster starts kube-controller-manager, kube-scheduler and kwok with
// the given number of fake nodes, and waits until every node is Ready and
// schedulable.
func (e *Env) StartCluster(nodes int) error {
	if err := e.StartControllerManager(); err != nil {
		return err
	}
	if err := e.StartScheduler(); err != nil {
		return err
	}
	return e.StartKwok(nodes)
}

// StartControllerManager runs kube-controller-manager (built with the
// API server by `make controlplane`) against the test API server the way
// kubeadm runs it: authenticated as system:kube-controller-manager, each
// controller with its own service account. It stops with the Env.
func (e *Env) StartControllerManager() error {
	kubeconfig, err := e.componentKubeconfig("kube-controller-manager", envtest.User{Name: "system:kube-controller-manager"})
	if err != nil {
		return err
	}
	rootCA := filepath.Join(e.Dir, "kube-controller-manager", "ca.crt")
	if err := os.WriteFile(rootCA, e.Config.CAData, 0o600); err != nil {
		return err
	}
	p, err := e.startComponent("kube-controller-manager",
		"--kubeconfig="+kubeconfig,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(e.testEnv.ControlPlane.APIServer.CertDir, "sa-signer.key"),
		"--root-ca-file="+rootCA,
		"--controllers="+strings.Join(ControllerManagerControllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-namespace-syncs=5",
		// The suites and benchmarks create workloads faster than a quiet
		// cluster; kube-controller-manager's default of 20 requests/s would
		// make them measure its client-side throttling.
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--v=2",
	)
	if err != nil {
		return err
	}
	e.ControllerManagerLog = p.Log
	return nil
}

// StartScheduler runs kube-scheduler as system:kube-scheduler, whose
// permissions come from the API server's bootstrap RBAC policy.
func (e *Env) StartScheduler() error {
	kubeconfig, err := e.componentKubeconfig("kube-scheduler", envtest.User{Name: "system:kube-scheduler"})
	if err != nil {
		return err
	}
	p, err := e.startComponent("kube-scheduler",
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--v=1",
	)
	if err != nil {
		return err
	}
	e.SchedulerLog = p.Log
	return nil
}

// StartKwok runs kwok for nodes fake nodes (kwok-node-0, ...), created here,
// and waits until the scheduler may place pods on them: kwok reports them
// Ready, and the node lifecycle controller then removes the not-ready taint
// the API server put on them. kwok plays the kubelet with the stages `make
// controlplane` copies from its module (node-initialize, heartbeat with
// leases, pod ready/complete/delete).
func (e *Env) StartKwok(nodes int) error { return e.startKwok(nodes, e.schedulableNodes) }

// StartKwokNodes runs kwok for nodes fake nodes and waits only until kwok
// reports them Ready, for a cluster without kube-controller-manager whose
// pods are created already bound to a node (spec.nodeName): nothing then
// schedules onto them, so the not-ready taint nobody removes does not
// matter, and kwok still plays each pod's kubelet.
func (e *Env) StartKwokNodes(nodes int) error {
	return e.startKwok(nodes, func(ctx context.Context) (int, error) { return e.kwokNodes(ctx, true) })
}

func (e *Env) startKwok(nodes int, count func(context.Context) (int, error)) error {
	stages := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kwok-stages.yaml")
	if _, err := os.Stat(stages); err != nil {
		return fmt.Errorf("kwok's stages not found in KUBEBUILDER_ASSETS (run `make controlplane`): %w", err)
	}
	p, err := e.startComponent("kwok",
		"--kubeconfig="+e.Kubeconfig,
		"--config="+stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--node-lease-duration-seconds=40",
		// Addresses written into node and pod status only; nothing connects
		// to them.
		"--node-ip=127.0.0.1",
		"--cidr=10.244.0.0/16",
	)
	if err != nil {
		return err
	}
	e.KwokLog = p.Log
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range nodes {
		if err := e.Client.Create(ctx, kwokNode(fmt.Sprintf("kwok-node-%d", i))); err != nil {
			return fmt.Errorf("creating a kwok node: %w", err)
		}
	}
	for {
		ready, err := count(ctx)
		if err == nil && ready >= nodes {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d kwok nodes ready after 2 minutes (last error: %v); see %s and %s", ready, nodes, err, e.KwokLog, e.ControllerManagerLog)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func kwokNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
				"kubernetes.io/hostname": name, "type": "kwok",
			},
		},
	}
}

func (e *Env) schedulableNodes(ctx context.Context) (int, error) { return e.kwokNodes(ctx, false) }

// kwokNodes counts the kwok nodes that are Ready and, unless tainted is
// true, carry no taint.
func (e *Env) kwokNodes(ctx context.Context, tainted bool) (int, error) {
	var list corev1.NodeList
	if err := e.Client.List(ctx, &list, client.HasLabels{"type"}); err != nil {
		return 0, err
	}
	n := 0
	for _, node := range list.Items {
		if node.Annotations[KwokNodeAnnotation] == "" || (!tainted && len(node.Spec.Taints) > 0) {
			continue
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// UserKubeconfig writes a kubeconfig for a client authenticated (by a client
// certificate) as the given user and groups, for a component a test runs
// as its real identity: cert-manager as its service account, say.
func (e *Env) UserKubeconfig(name string, groups ...string) (string, error) {
	return e.componentKubeconfig(strings.NewReplacer(":", "-", "/", "-").Replace(name), envtest.User{Name: name, Groups: groups})
}

// componentKubeconfig writes a kubeconfig for a control-plane component
// authenticated as user, into its own directory under the Env's.
func (e *Env) componentKubeconfig(component string, user envtest.User) (string, error) {
	u, err := e.testEnv.AddUser(user, nil)
	if err != nil {
		return "", err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(e.Dir, component)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// Component is a control-plane binary the Env runs as a child process.
type Component struct {
	Name string
	// Log holds its stdout and stderr.
	Log    string
	cmd    *exec.Cmd
	exited chan error
}

// startComponent runs a binary from $KUBEBUILDER_ASSETS, logging to
// <Dir>/<name>/log, and registers its stop with the Env. It fails when the
// process exits within its first second (a bad flag, a missing file).
func (e *Env) startComponent(name string, args ...string) (*Component, error) {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), name)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s not found in KUBEBUILDER_ASSETS (run `make controlplane`): %w", name, err)
	}
	return e.startProcess(name, bin, nil, args...)
}

// StartProcess runs bin as a child process named name (its log and files
// under <Dir>/<name>), with environ added to this process's environment,
// registers its stop with the Env, and fails when it exits within its first
// second. The peer engines of the performance comparison run this way.
func (e *Env) StartProcess(name, bin string, environ []string, args ...string) (*Component, error) {
	return e.startProcess(name, bin, environ, args...)
}

// startProcess runs bin as a child process named name (its log and files
// under <Dir>/<name>), registers its stop with the Env, and fails when it
// exits within its first second.
func (e *Env) startProcess(name, bin string, environ []string, args ...string) (*Component, error) {
	dir := filepath.Join(e.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	c := &Component{Name: name, Log: log.Name(), cmd: exec.Command(bin, args...), exited: make(chan error, 1)}
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if environ != nil {
		c.cmd.Env = append(os.Environ(), environ...)
	}
	// The process dies with this one, even when this one is killed (see
	// orphans.go). The kernel sends the signal when the thread that started
	// it ends, not the process: started from a locked thread, which the Go
	// runtime keeps once it is unlocked, it is this process's life.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	err = c.cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		log.Close()
		return nil, err
	}
	go func() { c.exited <- c.cmd.Wait(); log.Close() }()
	e.stops = append(e.stops, c.Stop)
	select {
	case err := <-c.exited:
		c.exited <- err
		out, _ := os.ReadFile(c.Log)
		return nil, errors.Join(fmt.Errorf("%s exited at start: %v", name, err), errors.New(tail(string(out), 2000)))
	case <-time.After(time.Second):
	}
	return c, nil
}

// PID is the process id.
func (c *Component) PID() int { return c.cmd.Process.Pid }

// Kill ends the process at once, as a crash or an OOM kill would.
func (c *Component) Kill() {
	_ = c.cmd.Process.Kill()
	_ = c.Stop()
}

// Terminate sends SIGTERM, as the kubelet does to a pod's container, and
// waits up to grace for the process to exit by itself; then it kills it,
// as the kubelet does at the end of the grace period. It says whether the
// process had to be killed and how it ended (nil: exit status 0).
func (c *Component) Terminate(grace time.Duration) (killed bool, exit error) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.exited:
		c.exited <- err
		return false, err
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		err := <-c.exited
		c.exited <- err
		return true, err
	}
}

// Stop interrupts the component and waits for it, killing it after ten
// seconds. Stopping a stopped component does nothing.
func (c *Component) Stop() error {
	select {
	case err := <-c.exited:
		c.exited <- err
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-c.exited:
		c.exited <- err
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		c.exited <- <-c.exited
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ControllerConfig is a client configuration that authenticates as
// kube-controller-manager's controller name does with
// --use-service-account-credentials: the service account
// kube-system/<name>'s token (an hour), with the RBAC the API server
// bootstraps for it. What a controller writes (a ReplicaSet's pods) is sent
// this way where a test must be judged as the controller would be, not as
// a person naming an owner.
func (e *Env) ControllerConfig(ctx context.Context, name string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name}}
	if err := e.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("the service account of controller %s: %w", name, err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := e.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return nil, fmt.Errorf("a token of controller %s: %w", name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = req.Status.Token
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	return cfg, nil
}
