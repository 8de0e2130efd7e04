package manager

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/configward/configward/internal/analysis"
	"github.com/configward/configward/internal/webhookscope"
)

// Controller are the settings of `configward controller`.
type Controller struct {
	Common
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	RolloutBatchWindow      time.Duration
	RolloutRate             float64
	// Reports is "auto" (or empty): write OpenReports Reports when their
	// CRD is served at start; or "off".
	Reports string
	// SnapshotGrace is how long a config snapshot nothing names is kept
	// before it is deleted (zero: the default).
	SnapshotGrace time.Duration
	// WebhookScope names the webhook configurations whose workload webhooks
	// the controller scopes to the writes configward acts on (see
	// internal/webhookscope); none named: it leaves them as installed.
	WebhookScope webhookscope.Configurations
	// ChangeRecords names the ConfigMap, in HashKeyNamespace, where the
	// leader keeps the recent content changes of every ConfigMap and
	// Secret (flapping detection).
	ChangeRecords string
	// FlappingPass is how often the leader announces flapping and stores the
	// records (zero: 2 s; no flag, tests shorten it).
	FlappingPass time.Duration
	// AnalysisPrometheus is the Prometheus-compatible API the delivery
	// checks of policies that name none ask; AnalysisPrometheusSecret the
	// Secret, in configward's namespace, with its credentials.
	AnalysisPrometheus, AnalysisPrometheusSecret string
	// AnalysisAllowedAddresses, when set, is the only places delivery
	// checks may connect to: CIDRs, IPs or host[:port].
	AnalysisAllowedAddresses []string
	// CertExpiryWarning is how long before the presented certificate's end
	// the certificate-served result warns; StaleCertGrace how long a pod
	// may present a stale certificate before the result fails and, where
	// the template asks, the pod is evicted; StaleCertEvictionsPerMinute
	// bounds those evictions across the cluster.
	CertExpiryWarning           time.Duration
	StaleCertGrace              time.Duration
	StaleCertEvictionsPerMinute float64
	// Restartable lets a second controller process be built in the same Go
	// process once the first has stopped (controller-runtime refuses two
	// controllers of one name in a process otherwise). Tests that stop and
	// restart the controller set it; it has no flag.
	Restartable bool
}

// DefaultLeaderElectionID is the name of the controller replicas' Lease
// unless --leader-election-id names another.
const DefaultLeaderElectionID = "configward-controller.configward.dev"

// AddFlags registers the controller's flags.
func (c *Controller) AddFlags(fs *pflag.FlagSet) {
	c.Common.AddFlags(fs)
	fs.BoolVar(&c.LeaderElect, "leader-elect", true,
		"Elect a leader so only one replica rolls workloads. Turn off only when running a single replica outside a cluster.")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader-election Lease. Empty means the pod's own namespace; required when running outside a cluster.")
	fs.StringVar(&c.LeaderElectionID, "leader-election-id", DefaultLeaderElectionID,
		"Name of the leader-election Lease.")
	fs.DurationVar(&c.RolloutBatchWindow, "rollout-batch-window", 2*time.Second,
		"How long to wait after a ConfigMap or Secret changes before rolling its consumers, so several objects changed together give one rollout. Longer windows batch more and react later.")
	fs.Float64Var(&c.RolloutRate, "rollout-rate", DefaultRolloutRate,
		"Most workloads rolled per second, across every namespace and kind, so that a ConfigMap shared by many workloads does not restart them all in the same second or flood the API server. Each workload is still rolled exactly once. 0 means unpaced.")
	fs.DurationVar(&c.SnapshotGrace, "snapshot-grace", DefaultSnapshotGrace,
		"How long a config snapshot (revisions) that no template, ReplicaSet, ControllerRevision, Job or pod names is kept before it is deleted.")
	fs.StringVar(&c.WebhookScope.Mutating, "mutating-webhook-configuration", "",
		"Name of the MutatingWebhookConfiguration holding configward's config-hash webhook. With --validating-webhook-configuration, the controller keeps matchConditions on both workload webhooks so the API server does not call configward for workload writes it ignores: objects a workload kind controls (judged at their owner), and, while no ConfigPolicy has custom rules, writes that reference no ConfigMap or Secret and carry no configward.dev/ metadata. Empty: the webhooks are left as installed.")
	fs.StringVar(&c.WebhookScope.Validating, "validating-webhook-configuration", "",
		"Name of the ValidatingWebhookConfiguration holding configward's workload-rules webhook (see --mutating-webhook-configuration).")
	fs.StringVar(&c.ChangeRecords, "change-records-configmap", DefaultChangeRecords,
		"Name of the ConfigMap, in configward's namespace (--hash-key-namespace), where the leader keeps the recent content changes of every ConfigMap and Secret, so that counting a flapping object (spec.rollouts.flapping) survives restarts and failover. It holds times, resource versions and field manager names, never content.")
	fs.StringVar(&c.AnalysisPrometheus, "analysis-prometheus-address", "",
		"Base URL (http or https) of the Prometheus-compatible API that delivery checks query where a ConfigPolicy's spec.delivery.analysis names none.")
	fs.StringVar(&c.AnalysisPrometheusSecret, "analysis-prometheus-secret", "",
		"Name of a Secret in configward's namespace (--hash-key-namespace) with the credentials of --analysis-prometheus-address: key token (bearer), or username and password, and optionally ca.crt, labelled configward.dev/analysis-credentials=true. Read when a check runs, never kept or logged.")
	fs.StringSliceVar(&c.AnalysisAllowedAddresses, "analysis-allowed-addresses", nil,
		"Where delivery checks (Prometheus queries and webhooks) may connect: CIDRs, IPs or host[:port], comma-separated. Held on the address a name resolves to when the controller connects, so a policy's author cannot reach past it; with a list set, checks use no HTTP proxy. Empty: anywhere.")
	fs.DurationVar(&c.CertExpiryWarning, "cert-expiry-warning", DefaultCertExpiryWarning,
		"How long before the certificate a pod presents ends (configward.dev/serving-cert) its workload's certificate-served result warns. Judged on the presented certificate, not the Secret's.")
	fs.DurationVar(&c.StaleCertGrace, "stale-cert-grace", DefaultStaleCertGrace,
		"How long a pod may present an older certificate than the one it mounts before its workload's certificate-served result fails and, where its template carries configward.dev/on-stale-cert: Restart, the pod is evicted.")
	fs.Float64Var(&c.StaleCertEvictionsPerMinute, "stale-cert-evictions-per-minute", DefaultStaleCertEvictionsPerMinute,
		"Most pods evicted per minute, across the cluster, for presenting a stale certificate (configward.dev/on-stale-cert: Restart). 0 evicts none.")
	fs.StringVar(&c.Reports, "reports", ReportsAuto,
		"Write one OpenReports Report (openreports.io/v1alpha1) per stamped workload saying whether its pods run its current config: auto writes them when the Report CRD is served when the controller starts (install it later and restart), off never does.")
}

// Defaults of the served-certificate settings.
const (
	DefaultCertExpiryWarning           = 14 * 24 * time.Hour
	DefaultStaleCertGrace              = 5 * time.Minute
	DefaultStaleCertEvictionsPerMinute = 6
)

// DefaultChangeRecords is the ConfigMap of change records unless
// --change-records-configmap names another.
const DefaultChangeRecords = "configward-config-changes"

// The values of --reports.
const (
	ReportsAuto = "auto"
	ReportsOff  = "off"
)

// DefaultSnapshotGrace keeps an unnamed snapshot long enough for the
// template that names a snapshot just written to reach the cache.
const DefaultSnapshotGrace = time.Minute

// DefaultRolloutRate paces rollouts: a thousand workloads sharing one
// ConfigMap start rolling over about 100 s (see the measurements in
// docs/evaluate/performance-and-reliability.md).
const DefaultRolloutRate = 10

// Validate reports flag values that cannot work.
func (c *Controller) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if c.RolloutRate < 0 {
		return fmt.Errorf("--rollout-rate must not be negative (0 means unpaced)")
	}
	if c.RolloutBatchWindow < 0 {
		return fmt.Errorf("--rollout-batch-window must not be negative")
	}
	if c.SnapshotGrace < 0 {
		return fmt.Errorf("--snapshot-grace must not be negative")
	}
	if c.CertExpiryWarning < 0 || c.StaleCertGrace < 0 || c.StaleCertEvictionsPerMinute < 0 {
		return fmt.Errorf("--cert-expiry-warning, --stale-cert-grace and --stale-cert-evictions-per-minute must not be negative")
	}
	if c.Reports != "" && c.Reports != ReportsAuto && c.Reports != ReportsOff {
		return fmt.Errorf("--reports must be %s or %s, not %q", ReportsAuto, ReportsOff, c.Reports)
	}
	if _, err := c.allowedAddresses(); err != nil {
		return err
	}
	return nil
}

// allowedAddresses is --analysis-allowed-addresses read, nil when unset.
func (c *Controller) allowedAddresses() (*analysis.Addresses, error) {
	if len(c.AnalysisAllowedAddresses) == 0 {
		return nil, nil
	}
	a, err := analysis.ParseAddresses("--analysis-allowed-addresses (the chart's analysis.allowedAddresses)", strings.Join(c.AnalysisAllowedAddresses, ","))
	return &a, err
}
