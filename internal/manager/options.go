// Package manager builds the two configward processes, the webhook and the
// controller, as controller-runtime managers with the shared plumbing: logs,
// metrics, health and readiness, and a shutdown that stops being ready before
// it stops serving.
package manager

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

// Common are the settings both processes share.
type Common struct {
	Kubeconfig  string
	MetricsAddr string
	ProbeAddr   string
	// PprofAddr serves Go's profiling endpoints (/debug/pprof) when set.
	PprofAddr     string
	LogFormat     string
	LogLevel      int
	ShutdownDelay time.Duration
	// ChangeControl is read by the webhook, which judges, and by the
	// controller, which labels the namespaces under change control so the
	// fail-closed webhook copy is scoped to them.
	ChangeControl ChangeControl
	// HashKeyNamespace and HashKeySecret name the Secret holding the
	// installation's config-hash key (internal/hashkey).
	HashKeyNamespace string
	HashKeySecret    string
	// HashKeyPoll is how soon a rotated key is taken up (default 10 s; no
	// flag, tests shorten it).
	HashKeyPoll time.Duration
	// HeapDumpFile, when set, is where SIGUSR1 writes a dump of the live
	// heap (after a collection): how to check that no Secret value lives in
	// the process.
	HeapDumpFile string
	// MemoryLimitRatio is the share of the container's memory limit the Go
	// runtime's soft memory limit is set to at start (SetupLogging), unless
	// GOMEMLIMIT is set; 0 leaves the runtime's default.
	MemoryLimitRatio float64
	// GCPercent is the garbage collector's target (GOGC) set at start
	// unless GOGC is set; 0 leaves Go's default.
	GCPercent int
	// WorkloadKindsFile declares custom workload kinds (--workload-kinds);
	// WorkloadKinds, when set, is used instead (tests build it in place).
	WorkloadKindsFile string
	WorkloadKinds     *workload.Registry
}

// Kinds returns the workload kinds the process handles: the built-in ones
// plus those declared in WorkloadKindsFile.
func (c *Common) Kinds() (*workload.Registry, error) {
	if c.WorkloadKinds != nil {
		return c.WorkloadKinds, nil
	}
	reg, err := workload.LoadDeclarations(c.WorkloadKindsFile)
	if err != nil {
		return nil, fmt.Errorf("--workload-kinds: %w", err)
	}
	return reg, nil
}

// AddFlags registers the shared flags.
func (c *Common) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "",
		"Path to a kubeconfig. Leave empty inside a cluster to use the pod's service account; outside, $KUBECONFIG is used.")
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", ":8080",
		"Address of the Prometheus metrics endpoint (/metrics). Set to 0 to turn it off.")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", ":8081",
		"Address of the liveness (/healthz) and readiness (/readyz) endpoints the kubelet probes.")
	fs.StringVar(&c.PprofAddr, "pprof-bind-address", "",
		"Diagnostics: address of Go's profiling endpoints (/debug/pprof), e.g. 127.0.0.1:6060 to take a CPU profile under load. Empty or 0: off. Keep it off the network: profiles show code paths, not data, but anyone who reaches it can make the process spend CPU.")
	fs.StringVar(&c.LogFormat, "log-format", "json",
		"Log format: json (for log pipelines) or console (for people reading a terminal).")
	fs.IntVarP(&c.LogLevel, "verbosity", "v", 0,
		"Log verbosity: 0 logs decisions that refuse or warn and lifecycle events; 1 adds every admission decision; 2+ is for debugging.")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", 5*time.Second,
		"On SIGTERM, report not ready and keep serving this long before stopping, so the endpoint is removed from the Service before the listener closes. Set it above the time your cluster takes to propagate endpoint changes. The webhook then also waits until the API server has closed every connection it holds (up to --idle-timeout plus 30s); 0 stops at once.")
	fs.StringVar(&c.HeapDumpFile, "heap-dump-file", "",
		"Diagnostics: on SIGUSR1, collect garbage and write a dump of the live heap (runtime/debug.WriteHeapDump) to this file, e.g. to check that no Secret value lives in the process. Empty: off.")
	fs.StringVar(&c.HashKeyNamespace, "hash-key-namespace", defaultNamespace(),
		"Namespace of the Secret holding the installation's config-hash key: configward's own (the chart sets it). Defaults to $POD_NAMESPACE, else configward.")
	fs.StringVar(&c.HashKeySecret, "hash-key-secret", "configward-hash-key",
		"Name of the Secret holding the config-hash key. configward creates it when missing; deleting it rotates the key, which re-stamps (and so rolls) every workload once, paced.")
	fs.StringVar(&c.WorkloadKindsFile, "workload-kinds", "",
		"A file declaring custom workload kinds (a YAML list of {group, version, kind, resource, podTemplatePath, templateRefPath, notRolledWhen, controllers}; the chart's workloadKinds), stamped, rolled and judged like the built-in ones. A declared kind whose CRD is not served at start is logged and ignored until a restart.")
	fs.IntVar(&c.GCPercent, "gc-percent", DefaultGCPercent,
		"The Go garbage collector's target (as GOGC): collect when the heap has grown this many percent over what the last collection kept. Higher spends less CPU on collection and more memory. Ignored when GOGC is set; 0 leaves Go's default (100).")
	fs.Float64Var(&c.MemoryLimitRatio, "memory-limit-ratio", DefaultMemoryLimitRatio,
		"Set the Go runtime's soft memory limit to this share of the container's memory limit (read from the cgroup at start), so garbage collection tightens before the kernel's OOM killer acts. Ignored when GOMEMLIMIT is set; 0 turns it off.")
	c.ChangeControl.AddFlags(fs)
}

// defaultNamespace is the pod's own namespace when the Deployment passes it.
func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "configward"
}

// Validate reports flag values that cannot work.
func (c *Common) Validate() error {
	if c.LogFormat != "json" && c.LogFormat != "console" {
		return fmt.Errorf("--log-format must be json or console, not %q", c.LogFormat)
	}
	if c.ShutdownDelay < 0 {
		return fmt.Errorf("--shutdown-delay must not be negative")
	}
	if c.GCPercent < 0 {
		return fmt.Errorf("--gc-percent must be 0 (Go's default) or more, not %d", c.GCPercent)
	}
	if c.MemoryLimitRatio < 0 || c.MemoryLimitRatio > 1 {
		return fmt.Errorf("--memory-limit-ratio must be between 0 (off) and 1, not %g", c.MemoryLimitRatio)
	}
	if c.HashKeyNamespace == "" || c.HashKeySecret == "" {
		return fmt.Errorf("--hash-key-namespace and --hash-key-secret must name the Secret of the config-hash key")
	}
	if _, err := c.Kinds(); err != nil {
		return err
	}
	_, err := c.ChangeControl.Settings()
	return err
}

// SetupLogging installs the process-wide logger for controller-runtime and
// client-go. Log lines carry identities (user, object name, request UID) and
// never object bodies: Secret values must not reach a log pipeline.
//
// It is the binary's first step once the flags are parsed (tests running
// the processes in-process set their own logger and skip it), so it also
// applies the rest of the process-wide set-up, logged: the Go runtime's soft
// memory limit (ApplyMemoryLimit).
func (c *Common) SetupLogging() {
	opts := zap.Options{
		Level: zapcore.Level(-c.LogLevel),
	}
	if c.LogFormat == "console" {
		opts.Development = true
		opts.Encoder = zapcore.NewConsoleEncoder(zapcore.EncoderConfig{
			TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg",
			EncodeTime: zapcore.ISO8601TimeEncoder, EncodeLevel: zapcore.CapitalColorLevelEncoder,
			EncodeDuration: zapcore.StringDurationEncoder, EncodeName: zapcore.FullNameEncoder,
			ConsoleSeparator: "  ",
		})
	} else {
		opts.Encoder = zapcore.NewJSONEncoder(zapcore.EncoderConfig{
			TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg",
			StacktraceKey: "stacktrace", EncodeTime: zapcore.RFC3339NanoTimeEncoder,
			EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeDuration: zapcore.SecondsDurationEncoder,
			EncodeName: zapcore.FullNameEncoder,
		})
	}
	logger := zap.New(zap.UseFlagOptions(&opts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("client-go"))
	c.ApplyMemoryLimit(logger.WithName("memory"))
}

// Webhook are the settings of `configward webhook`.
type Webhook struct {
	Common
	BindAddress      string
	CertDir          string
	CertName         string
	KeyName          string
	CertPollInterval time.Duration
	EnableHTTP2      bool
	MaxRequestBytes  int64
	MaxInFlight      int
	MaxInFlightBytes int64
	ClientCAFile     string
	IdleTimeout      time.Duration
	// StaleViewWait is how long a review waits for a view that is not
	// current while the API server answers (freshness.Gate).
	StaleViewWait time.Duration
	// ReloadAgent are the settings of the reload agent the webhook injects.
	ReloadAgent ReloadAgent
}

// ReloadAgent are the settings of configward's reload agent: what the
// webhook injects into pods that ask for it, and where agents report.
type ReloadAgent struct {
	// Image holds the agent (configward's own image); empty: no pod gets
	// the agent.
	Image string
	// ReportURL is the report endpoint's URL as pods reach it (the
	// webhook Service's agent port); CAFile the PEM of the authority its
	// certificate chains to, handed to every agent.
	ReportURL string
	CAFile    string
	// ServerName is the name agents check the endpoint's certificate
	// against, where ReportURL names it by address.
	ServerName string
	// BindAddress is where the report endpoint listens, apart from
	// admission: agents authenticate with their token, not the API
	// server's client certificate.
	BindAddress string
}

// ChangeControl are the flags of rule out-of-pipeline-edit. They name a
// pipeline for the namespaces the selector picks; ConfigPolicies name more,
// per namespace, and the two are combined. Change control is on in a
// namespace once any pipeline identity applies to it.
type ChangeControl struct {
	PipelineUsers              []string
	PipelineGroups             []string
	PipelineServiceAccounts    []string
	NamespaceSelector          string
	ConfigwardServiceAccounts  []string
	CertManagerServiceAccounts []string
	IgnoreLabel                string
}

// AddFlags registers the change-control flags.
func (c *ChangeControl) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.PipelineUsers, "pipeline-users", nil,
		"Users that may change and delete governed ConfigMaps and Secrets (rule out-of-pipeline-edit), combined with the pipeline of the ConfigPolicies selecting a namespace. Change control is off where neither names a pipeline.")
	fs.StringSliceVar(&c.PipelineGroups, "pipeline-groups", nil, "Groups whose members may change governed ConfigMaps and Secrets.")
	fs.StringSliceVar(&c.PipelineServiceAccounts, "pipeline-service-accounts", nil,
		"Service accounts (namespace/name) that may change governed ConfigMaps and Secrets, e.g. argocd/argocd-application-controller.")
	fs.StringVar(&c.NamespaceSelector, "change-control-namespace-selector", "",
		"Label selector of the namespaces whose ConfigMaps and Secrets change control governs; empty selects every namespace the webhook sees.")
	fs.StringSliceVar(&c.ConfigwardServiceAccounts, "configward-service-accounts", nil,
		"configward's own service accounts (namespace/name); never blocked. The Helm chart sets them.")
	fs.StringSliceVar(&c.CertManagerServiceAccounts, "cert-manager-service-accounts", []string{"cert-manager/cert-manager"},
		"cert-manager controller service accounts (namespace/name); they may renew the Secrets cert-manager manages.")
	fs.StringVar(&c.IgnoreLabel, "ignore-namespace-label", "",
		"A namespace label that keeps configward's webhooks away from a namespace, when the installation honours one (the Helm chart's webhooks.ignoreLabel). Nothing in such a namespace is under change control; a namespace getting or losing the label is recorded. Empty: no such label.")
}

// Settings turns the flags into the settings of each namespace.
func (c *ChangeControl) Settings() (func(*corev1.Namespace) changecontrol.Settings, error) {
	sel, err := labels.Parse(c.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("--change-control-namespace-selector: %w", err)
	}
	pipeline := changecontrol.Identities{Users: c.PipelineUsers, Groups: c.PipelineGroups}
	if pipeline.ServiceAccounts, err = serviceAccounts("--pipeline-service-accounts", c.PipelineServiceAccounts); err != nil {
		return nil, err
	}
	own, err := serviceAccounts("--configward-service-accounts", c.ConfigwardServiceAccounts)
	if err != nil {
		return nil, err
	}
	certManager, err := serviceAccounts("--cert-manager-service-accounts", c.CertManagerServiceAccounts)
	if err != nil {
		return nil, err
	}
	return func(ns *corev1.Namespace) changecontrol.Settings {
		var l labels.Set
		if ns != nil {
			l = ns.Labels
		}
		ignored := c.IgnoreLabel != "" && l.Has(c.IgnoreLabel)
		return changecontrol.Settings{
			Ignored:     ignored,
			Governed:    !ignored && !pipeline.Empty() && sel.Matches(l),
			Pipeline:    pipeline,
			Configward:  changecontrol.Identities{ServiceAccounts: own},
			CertManager: changecontrol.Identities{ServiceAccounts: certManager},
		}
	}, nil
}

func serviceAccounts(flag string, in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, s := range in {
		u, err := changecontrol.ParseServiceAccount(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// AddFlags registers the webhook's flags.
func (w *Webhook) AddFlags(fs *pflag.FlagSet) {
	w.Common.AddFlags(fs)
	fs.StringVar(&w.BindAddress, "bind-address", ":9443",
		"Address the HTTPS admission endpoint listens on; the Service's targetPort must match.")
	fs.StringVar(&w.CertDir, "cert-dir", "/etc/configward/tls",
		"Directory with the serving certificate and key, usually the mounted cert-manager Secret. Replaced files are picked up without a restart.")
	fs.StringVar(&w.CertName, "cert-name", "tls.crt", "File name of the serving certificate (PEM, leaf first) in --cert-dir.")
	fs.StringVar(&w.KeyName, "key-name", "tls.key", "File name of the serving key (PEM) in --cert-dir.")
	fs.DurationVar(&w.CertPollInterval, "cert-poll-interval", 10*time.Second,
		"How often the certificate files are re-read in case a file-system event was missed.")
	fs.BoolVar(&w.EnableHTTP2, "enable-http2", false,
		"Serve HTTP/2 as well as HTTP/1.1. Off by default because of the HTTP/2 rapid-reset CVEs; the API server does not need it.")
	fs.Int64Var(&w.MaxRequestBytes, "max-request-bytes", webhookserver.DefaultMaxRequestBytes,
		"Largest AdmissionReview accepted. Larger requests are refused with an explanation instead of being decoded.")
	fs.IntVar(&w.MaxInFlight, "max-in-flight", webhookserver.DefaultMaxInFlight,
		"Most admission requests handled at once. More wait up to a second, then get 503, which the API server treats by the webhook's failure policy.")
	fs.Int64Var(&w.MaxInFlightBytes, "max-in-flight-bytes", webhookserver.DefaultMaxInFlightBytes,
		"Most request-body bytes held at once (a request without a length counts as --max-request-bytes); size it with the memory limit: each byte of a large review costs several while decoded.")
	fs.DurationVar(&w.IdleTimeout, "idle-timeout", webhookserver.DefaultIdleTimeout,
		"How long a connection from the API server may sit idle before it is closed. Until then Go's connection buffers hold the last review it carried. Keep it above the API server's own 90s idle timeout: a connection configward closes idle can take a review the API server writes onto it at that instant, which then fails.")
	fs.DurationVar(&w.StaleViewWait, "stale-view-wait", 4*time.Second,
		"How long a review waits for this replica's view of ConfigPolicies, ConfigSchemas, ConfigMaps and Secrets to be current again after a watch broke, while the API server serves that kind; keep it under the webhooks' timeout (the chart's is 5s). After it the replica answers 503 (the failure policy decides) and reports not ready until the view is back. While the API server serves no watch of the kind (it or etcd is down), reviews are judged from the view as it was.")
	fs.StringVar(&w.ReloadAgent.Image, "reload-agent-image", "",
		"Image of the reload agent injected into pods whose template carries configward.dev/reload-agent (configward's own; the chart sets it). Empty: no pod gets the agent.")
	fs.StringVar(&w.ReloadAgent.ReportURL, "reload-agent-report-url", "",
		"URL agents report to, as pods reach it: https://<webhook Service>.<namespace>.svc:<agent port> (the chart sets it); without a path, "+reload.ReportPath+" is added.")
	fs.StringVar(&w.ReloadAgent.CAFile, "reload-agent-ca-file", "",
		"PEM file of the CA the report endpoint's certificate chains to, handed to every agent (the chart points it at the serving Secret's ca.crt).")
	fs.StringVar(&w.ReloadAgent.ServerName, "reload-agent-server-name", "",
		"Name agents check the report endpoint's certificate against, where --reload-agent-report-url names it by address (a cluster without DNS for Services). Empty: the URL's host.")
	fs.StringVar(&w.ReloadAgent.BindAddress, "reload-agent-bind-address", "",
		"Address the agents' HTTPS report endpoint listens on (the chart: :9444), with the serving certificate; agents authenticate with a token of their own audience, checked with a TokenReview. Empty: no endpoint (agents added by hand report nowhere either).")
	fs.StringVar(&w.ClientCAFile, "client-ca-file", "",
		"PEM file of the CA(s) that sign the API server's client certificate for webhooks (its admission-control kubeconfig). When set, only clients presenting such a certificate can call. When empty, anyone who can reach the port can ask; configward then leaks no Secret value and records Events and metrics only for requests whose effect the cache confirms.")
}

// Validate reports flag values that cannot work.
func (w *Webhook) Validate() error {
	if err := w.Common.Validate(); err != nil {
		return err
	}
	if w.CertDir == "" {
		return fmt.Errorf("--cert-dir is required: the API server only calls webhooks over HTTPS")
	}
	if w.MaxRequestBytes < 1<<20 {
		return fmt.Errorf("--max-request-bytes must be at least 1 MiB; the API server sends objects of up to 3 MiB")
	}
	if w.StaleViewWait < 0 || w.StaleViewWait > 10*time.Second {
		return fmt.Errorf("--stale-view-wait must be between 0 and 10s: a review waiting longer would outlast the API server's webhook timeout")
	}
	if w.ReloadAgent.Image != "" && w.ReloadAgent.ReportURL == "" {
		return fmt.Errorf("--reload-agent-image needs --reload-agent-report-url: an injected agent must know where to report")
	}
	if w.ReloadAgent.ReportURL != "" {
		u, err := url.Parse(w.ReloadAgent.ReportURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--reload-agent-report-url must be an https:// URL with a host, not %q: agents send their tokens", w.ReloadAgent.ReportURL)
		}
	}
	return nil
}
