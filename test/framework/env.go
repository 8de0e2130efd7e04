// Package framework starts the real control plane configward's behaviour is
// tested against: kube-apiserver and etcd through envtest, configward's
// webhook server running in-process with a test CA, webhook configurations
// that point the API server at it, and a kubeconfig for the real kubectl.
package framework

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/scheme"
)

// Namespace is configward's own namespace in the test world (the chart's
// release namespace), where the config-hash key lives.
const Namespace = "configward-system"

// HashKeySecret is the Secret of the config-hash key.
const HashKeySecret = "configward-hash-key"

// AgentImage is the reload agent's image the in-process webhook injects
// (kwok runs no container; the node suite installs the chart's).
const AgentImage = "ghcr.io/configward/configward:e2e"

// Options configure Start.
type Options struct {
	// Register adds webhook handlers to the in-process webhook server before
	// it starts.
	Register func(p *manager.WebhookProcess) error
	// CertPollInterval of the webhook server; default 2s so tests wait less
	// when a file-system event is missed.
	CertPollInterval time.Duration
	// Webhook, when set, adjusts the webhook's settings (its flags) before
	// it is built.
	Webhook func(*manager.Webhook)
	// WithoutWebhook leaves the webhook process to the test (e.g. one that
	// serves a certificate cert-manager issues).
	WithoutWebhook bool
	// UnauthenticatedCallers runs the webhook without --client-ca-file, so
	// anyone who reaches its port may call, as in an install that cannot
	// configure the API server's admission kubeconfig. By default the
	// webhook requires the client certificate the API server presents.
	UnauthenticatedCallers bool
	// ExtraCRDPaths are installed with configward's CRDs.
	ExtraCRDPaths []string
	// WithoutReports leaves out the OpenReports Report CRD, which the world
	// serves by default (as the chart installs it where none is): without
	// it, drift shows only in gauges and `configward status` cannot show a
	// config change not yet stamped. The chart suite leaves it out so that
	// the chart can install it.
	WithoutReports bool
	// WithoutConfigwardCRDs leaves configward's own CRDs out, for a suite
	// that installs them with the chart.
	WithoutConfigwardCRDs bool
	// InClusterClients makes the API server reachable from pods on a real
	// node through the `kubernetes` Service, and able to call webhook
	// Services at their pods (see serveInClusterClients).
	InClusterClients bool
}

// ReportsCRDPath is the OpenReports Report CRD as the chart ships it.
func ReportsCRDPath() string {
	return filepath.Join(RepoRoot(), "charts", "configward", "files", "openreports")
}

// Env is a running control plane plus configward's webhook.
type Env struct {
	Config  *rest.Config
	Client  client.Client
	Webhook *manager.WebhookProcess
	// Dir holds the kubeconfig and the serving certificate directory.
	Dir        string
	Kubeconfig string
	CertDir    string
	CA         *CA
	// ProbeAddr serves /healthz and /readyz of the webhook process.
	ProbeAddr string
	// ReadyWithin is how long StartWebhookBinary and StartControllerBinary
	// wait for the process to be ready (a minute when zero): a benchmark of
	// a big cluster measures a start-up that may take longer.
	ReadyWithin time.Duration
	// ControllerManagerLog, SchedulerLog and KwokLog are the logs of the
	// cluster components, once started (see StartCluster).
	ControllerManagerLog, SchedulerLog, KwokLog string
	// AuditLog is the API server's audit log (JSON lines), at level
	// Metadata, of requests on ConfigMaps and Secrets (it shows the audit
	// annotations admission webhooks add) and of writes to workloads (it
	// shows who patched what); see AuditEvents.
	AuditLog string
	// BinaryEnv is added to the environment of configward processes
	// started from here on (see StartWebhookBinary), e.g. GODEBUG settings.
	BinaryEnv []string

	testEnv        *envtest.Environment
	webhookOptions func(*manager.Webhook)
	authenticate   bool
	// webhookAddr, when set, is where a webhook binary listens (see
	// StartWebhookBinary); WebhookURL points there.
	webhookAddr string
	// apiServerClient is the client certificate the API server presents to
	// webhooks; ClientTLS hands it to tests that call the webhook as the
	// API server would.
	apiServerClient tls.Certificate
	cancel          context.CancelFunc
	done            chan error
	stops           []func() error
}

// RepoRoot is the directory holding configward's go.mod: found from this
// source file, or, when the build trimmed file paths (-trimpath, as make
// test builds), from the working directory up, so tests work from any
// package directory.
func RepoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(mod), "module github.com/configward/configward\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("framework: no configward go.mod above the working directory")
		}
		dir = parent
	}
}

// Start brings up kube-apiserver and etcd (from $KUBEBUILDER_ASSETS, which
// `make test` sets to binaries it builds), installs configward's CRDs, and
// starts configward's webhook server with a certificate from a fresh CA.
func Start(opts Options) (env *Env, err error) {
	if ControlPlane() == "" {
		return nil, errors.New("no control plane is built: run `make controlplane` (or the suites with `make test`), which builds kube-apiserver, etcd and kubectl from source")
	}
	// What a killed test left would share the machine with this one.
	swept, err := SweepOrphans()
	if err != nil {
		return nil, err
	}
	for _, o := range swept {
		fmt.Fprintf(os.Stderr, "configward test framework: ended %s, left by a test that was killed\n", o)
	}
	dir, err := os.MkdirTemp("", "configward-e2e-")
	if err != nil {
		return nil, err
	}
	if err := writeOwner(dir); err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, CertDir: filepath.Join(dir, "tls"), webhookOptions: opts.Webhook, authenticate: !opts.UnauthenticatedCallers}
	defer func() {
		// A failed start must not leave kube-apiserver and etcd running.
		if err != nil {
			_ = e.Stop()
		}
	}()
	var crds []string
	if !opts.WithoutConfigwardCRDs {
		crds = append(crds, filepath.Join(RepoRoot(), "config", "crd", "bases"))
	}
	crds = append(crds, opts.ExtraCRDPaths...)
	if !opts.WithoutReports {
		crds = append(crds, ReportsCRDPath())
	}
	e.testEnv = &envtest.Environment{
		CRDDirectoryPaths:        crds,
		ErrorIfCRDPathMissing:    false,
		ControlPlaneStartTimeout: 2 * time.Minute,
		// A cluster that ran a thousand workloads takes more than envtest's
		// default 20 s to drain its watches and audit log on shutdown.
		ControlPlaneStopTimeout: 2 * time.Minute,
	}
	if err := e.configureAudit(); err != nil {
		return nil, err
	}
	if e.CA, err = NewCA(); err != nil {
		return nil, err
	}
	if err := e.configureWebhookClientCertificate(); err != nil {
		return nil, err
	}
	if opts.InClusterClients {
		if err := e.serveInClusterClients(); err != nil {
			return nil, err
		}
	}
	if e.Config, err = e.testEnv.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	e.Config.QPS, e.Config.Burst = 500, 1000
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme.Scheme()}); err != nil {
		return nil, err
	}
	if err := e.writeKubeconfig(); err != nil {
		return nil, err
	}
	// configward's own namespace, where its processes keep the config-hash
	// key, as the chart's release namespace.
	if err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return nil, err
	}
	if err := e.RotateServingCertificate(); err != nil {
		return nil, err
	}
	if opts.WithoutWebhook {
		return e, nil
	}
	if err := e.startWebhook(opts); err != nil {
		return nil, err
	}
	return e, nil
}

// configureWebhookClientCertificate gives the API server the client
// certificate it presents to every webhook, through the admission-control
// configuration a cluster administrator writes (kube-apiserver
// --admission-control-config-file): the kubeconfig user "*" applies to every
// webhook host.
func (e *Env) configureWebhookClientCertificate() error {
	certPEM, keyPEM, err := e.CA.IssueClient("kube-apiserver-webhook-client")
	if err != nil {
		return err
	}
	if e.apiServerClient, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return err
	}
	kubeconfig := filepath.Join(e.Dir, "admission-kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n",
		base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM))
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		return err
	}
	var admissionConfig strings.Builder
	admissionConfig.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n")
	for _, plugin := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"} {
		fmt.Fprintf(&admissionConfig, "- name: %s\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: %s\n", plugin, kubeconfig)
	}
	path := filepath.Join(e.Dir, "admission-config.yaml")
	if err := os.WriteFile(path, []byte(admissionConfig.String()), 0o600); err != nil {
		return err
	}
	e.testEnv.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", path)
	return os.WriteFile(filepath.Join(e.Dir, "client-ca.crt"), e.CA.CertPEM, 0o600)
}

// ClientTLS is a TLS configuration that trusts the webhook's serving CA and
// presents the API server's client certificate: a test calling the webhook
// with it is indistinguishable from the API server.
func (e *Env) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(e.CA.Cert)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{e.apiServerClient}}
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [configmaps, secrets]}]
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - {group: apps, resources: [deployments, replicasets, statefulsets, daemonsets]}
  - {group: batch, resources: [jobs, cronjobs]}
  - {group: configward.dev, resources: [configschemas, configdeliveries, configdeliveries/status]}
  - {group: events.k8s.io, resources: [events]}
  - {group: openreports.io, resources: [reports]}
  - {group: "", resources: [pods, pods/status]}
- level: None
`

func (e *Env) configureAudit() error {
	policy := filepath.Join(e.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	e.AuditLog = filepath.Join(e.Dir, "audit.log")
	e.testEnv.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", e.AuditLog)
	return nil
}

func (e *Env) writeKubeconfig() error {
	admin, err := e.testEnv.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	return os.WriteFile(e.Kubeconfig, kc, 0o600)
}

// RotateServingCertificate issues a new leaf from the test CA and swaps it
// into the certificate directory atomically, as the kubelet does when
// cert-manager renews the Secret. It returns nothing about the old one: the
// webhook must pick up the new files by itself.
func (e *Env) RotateServingCertificate() error {
	certPEM, keyPEM, err := e.CA.Issue()
	if err != nil {
		return err
	}
	return WriteAtomic(e.CertDir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
}

// CertificateOnDisk returns the fingerprint of the certificate in CertDir.
func (e *Env) CertificateOnDisk() (string, error) {
	c, err := os.ReadFile(filepath.Join(e.CertDir, "tls.crt"))
	if err != nil {
		return "", err
	}
	k, err := os.ReadFile(filepath.Join(e.CertDir, "tls.key"))
	if err != nil {
		return "", err
	}
	return Fingerprint(c, k)
}

// NewWebhookProcess builds, without starting it, another `configward
// webhook` process against the test API server, serving the test
// certificate on a free port, with its probes on the returned address.
func (e *Env) NewWebhookProcess(shutdownDelay, certPoll time.Duration) (*manager.WebhookProcess, string, error) {
	probe, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	if certPoll == 0 {
		certPoll = 2 * time.Second
	}
	o := manager.Webhook{
		Common: manager.Common{
			MetricsAddr:   "0",
			ProbeAddr:     probe,
			LogFormat:     "console",
			ShutdownDelay: shutdownDelay,
		},
		BindAddress:      "127.0.0.1:0",
		CertDir:          e.CertDir,
		CertName:         "tls.crt",
		KeyName:          "tls.key",
		CertPollInterval: certPoll,
		MaxRequestBytes:  8 << 20,
		StaleViewWait:    4 * time.Second,
	}
	o.HashKeyNamespace, o.HashKeySecret, o.HashKeyPoll = Namespace, HashKeySecret, time.Second
	// As the chart does: configward's own controller is never blocked by
	// its webhook (snapshots, delivery records). A test that changes the
	// change-control flags sets it again, or leaves it out on purpose.
	o.ChangeControl.ConfigwardServiceAccounts = []string{ControllerServiceAccount}
	// The reload agent, as the chart sets it up: injected where pods ask,
	// reporting to its own port with the test CA.
	agentPorts, err := FreePorts(1)
	if err != nil {
		return nil, "", err
	}
	o.ReloadAgent = manager.ReloadAgent{Image: AgentImage, BindAddress: fmt.Sprintf("127.0.0.1:%d", agentPorts[0]),
		ReportURL: fmt.Sprintf("https://127.0.0.1:%d%s", agentPorts[0], reload.ReportPath), CAFile: filepath.Join(e.Dir, "client-ca.crt")}
	if e.authenticate {
		o.ClientCAFile = filepath.Join(e.Dir, "client-ca.crt")
	}
	if e.webhookOptions != nil {
		e.webhookOptions(&o)
	}
	if err := o.Validate(); err != nil {
		return nil, "", err
	}
	p, err := manager.NewWebhook(e.Config, o)
	return p, probe, err
}

func (e *Env) startWebhook(opts Options) error {
	// Tests stop the process by cancelling; nothing to drain for.
	p, probe, err := e.NewWebhookProcess(0, opts.CertPollInterval)
	if err != nil {
		return err
	}
	e.ProbeAddr = probe
	if opts.Register != nil {
		if err := opts.Register(p); err != nil {
			return err
		}
	}
	e.Webhook = p
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- p.Run(ctx) }()

	deadline := time.Now().Add(30 * time.Second)
	for p.Server.Addr() == nil {
		select {
		case err := <-e.done:
			return fmt.Errorf("webhook process exited during start: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("webhook server did not start listening within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// ServeWebhooksAt makes WebhookURL, and the webhook configurations
// installed afterwards, point at addr (e.g. a Balancer in front of several
// webhook binaries).
func (e *Env) ServeWebhooksAt(addr string) { e.webhookAddr = addr }

// WebhookURL is the URL of path on the webhook: the in-process server, or
// the address given to StartWebhookBinary or ServeWebhooksAt.
func (e *Env) WebhookURL(path string) string {
	if e.webhookAddr != "" {
		return "https://" + e.webhookAddr + path
	}
	return "https://" + e.Webhook.Server.Addr().String() + path
}

// PointAtLocalWebhook rewrites every webhook in the configurations to call
// the in-process server at its own path and to trust the test CA. Everything
// else stays as the configuration says (rules, selectors, match conditions,
// failure policy), so tests exercise the configuration users install.
func (e *Env) PointAtLocalWebhook(objs ...client.Object) {
	for _, o := range objs {
		switch c := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range c.Webhooks {
				c.Webhooks[i].ClientConfig = e.clientConfig(c.Webhooks[i].ClientConfig)
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range c.Webhooks {
				c.Webhooks[i].ClientConfig = e.clientConfig(c.Webhooks[i].ClientConfig)
			}
		}
	}
}

func (e *Env) clientConfig(in admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	path := "/"
	if in.Service != nil && in.Service.Path != nil {
		path = *in.Service.Path
	}
	url := e.WebhookURL(path)
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: e.CA.CertPEM}
}

// Stop stops the webhook, then the control plane.
func (e *Env) Stop() error {
	var errs []error
	for _, stop := range e.stops {
		if err := stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.cancel != nil {
		e.cancel()
		select {
		case err := <-e.done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-time.After(time.Minute):
			errs = append(errs, errors.New("webhook process did not stop within a minute"))
		}
	}
	if e.testEnv != nil && e.testEnv.Config != nil {
		if err := e.testEnv.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.RemoveAll(e.Dir)
	return errors.Join(errs...)
}

// KubectlResult is what a user sees from one kubectl invocation.
type KubectlResult struct {
	Stdout, Stderr string
	ExitCode       int
}

// Kubectl runs the real kubectl against the test API server. stdin may be
// empty. The binary is $KUBECTL, else kubectl in $KUBEBUILDER_ASSETS (built
// at the server's version by `make test`), else kubectl on $PATH.
func (e *Env) Kubectl(stdin string, args ...string) KubectlResult {
	return e.KubectlEnv(nil, stdin, args...)
}

// KubectlEnv is Kubectl with extra environment variables ("KEY=value"),
// e.g. KUBE_EDITOR for `kubectl edit`.
func (e *Env) KubectlEnv(extra []string, stdin string, args ...string) KubectlResult {
	// TMPDIR: a refused `kubectl edit` keeps a copy of the edit in a
	// temporary file; the environment's directory goes with the environment.
	return runTool(KubectlPath(), append([]string{"KUBECONFIG=" + e.Kubeconfig, "TMPDIR=" + e.Dir}, extra...), stdin, args...)
}

// KubectlPath picks the kubectl binary as Kubectl describes.
func KubectlPath() string {
	if p := os.Getenv("KUBECTL"); p != "" {
		return p
	}
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		p := filepath.Join(assets, "kubectl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "kubectl"
}

func freeAddr() (string, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(ports[0]), nil
}

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago (all n are held until every one is chosen, so they differ), for
// processes the tests start. No port is handed out twice within
// portsHeldFor: the kernel may give a port just closed to the next
// listener, and a process started with the webhook's address from one
// call and its probe's from the next once got the same port for both
// (bind: address already in use).
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	handedOut.Lock()
	defer handedOut.Unlock()
	now := time.Now()
	for len(ports) < n {
		if len(ls) > n+1000 {
			return nil, fmt.Errorf("no free port on 127.0.0.1 that was not handed out in the last %s", portsHeldFor)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Held open either way, so the kernel offers another next.
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if at, given := handedOut.at[port]; given && now.Sub(at) < portsHeldFor {
			continue
		}
		handedOut.at[port] = now
		ports = append(ports, port)
	}
	return ports, nil
}

// handedOut are the ports FreePorts handed out, and when.
var handedOut = struct {
	sync.Mutex
	at map[int]time.Time
}{at: map[int]time.Time{}}

// portsHeldFor is how long a port handed out is not handed out again.
const portsHeldFor = 10 * time.Minute

func fingerprintDER(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
