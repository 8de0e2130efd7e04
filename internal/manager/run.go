package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/controller"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/framewipe"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/schemastore"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/webhookserver"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// confirmedEffects returns the Effects of the webhook's decisions: recorded
// at once when it authenticates its callers, else confirmed from the
// informers of every kind it judges.
//
// Effects are keyed by Kind alone (as requests name them), so a declared
// kind sharing its Kind with a built-in one shares its key space; the
// content fingerprint still tells their objects apart.
func confirmedEffects(mgr ctrlmanager.Manager, trusted bool, inv *inventory.Inventory) (*admission.Effects, error) {
	effects := admission.NewEffects(trusted)
	type watched struct {
		kind string
		obj  client.Object
	}
	objs := []watched{{"ConfigMap", &corev1.ConfigMap{}}, {"Secret", &corev1.Secret{}}, {"Namespace", &corev1.Namespace{}}}
	for _, k := range inv.ConsumerKinds() {
		obj, _ := inv.Registry().New(k.GroupKind())
		objs = append(objs, watched{k.Kind, obj})
	}
	for _, w := range objs {
		informer, err := mgr.GetCache().GetInformer(context.Background(), w.obj)
		if err != nil {
			return nil, err
		}
		if err := effects.Watch(informer, w.kind); err != nil {
			return nil, err
		}
	}
	return effects, nil
}

// hashKeys loads the installation's config-hash key (creating it on first
// start) and keeps it current while the manager runs.
func hashKeys(mgr ctrlmanager.Manager, o Common) (*hashkey.Source, error) {
	poll := o.HashKeyPoll
	if poll == 0 {
		poll = 10 * time.Second
	}
	keys := hashkey.New(mgr.GetAPIReader(), mgr.GetClient(), o.HashKeyNamespace, o.HashKeySecret, poll, ctrl.Log.WithName("hashkey"))
	if err := keys.Load(context.Background()); err != nil {
		return nil, err
	}
	return keys, mgr.Add(keys)
}

// guardedClient is the managers' client: the default one, refusing reads
// of the digest-only ConfigMaps and Secrets its cache holds.
func guardedClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return inventory.GuardClient(c), nil
}

// wipingWatchFrames is cfg with watch events cleared from client-go's
// buffers once decoded (see framewipe): the processes watch Secrets.
func wipingWatchFrames(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	framewipe.Wrap(cfg)
	return cfg
}

// RESTConfig loads the connection to the API server: an explicit kubeconfig,
// else $KUBECONFIG, else the in-cluster service account.
func (c *Common) RESTConfig() (*rest.Config, error) {
	if c.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			return nil, err
		}
		// As ctrl.GetConfig does for $KUBECONFIG and in a pod: client-go's
		// default of 5 requests a second would queue the webhook's Events
		// (one goroutine each) and cap the controller below its rollout
		// rate; the API server's priority and fairness does the limiting.
		// Found by make soak.
		if cfg.QPS == 0 {
			cfg.QPS = -1
		}
		return cfg, nil
	}
	return ctrl.GetConfig()
}

// Process is a configured manager that drains before it stops.
type Process struct {
	Manager  ctrlmanager.Manager
	draining atomic.Bool
	delay    time.Duration
	// onDrain runs when draining starts.
	onDrain func()
}

// WebhookProcess is `configward webhook`: a manager with the hardened
// webhook server and no leader election, since every replica must answer
// the API server.
type WebhookProcess struct {
	Process
	Server *webhookserver.Server
}

// NewWebhook builds the webhook process. Handlers are registered on Server
// before Run.
func NewWebhook(cfg *rest.Config, o Webhook) (*WebhookProcess, error) {
	log := ctrl.Log.WithName("webhook")
	srv, err := webhookserver.New(webhookserver.Options{
		BindAddress:      o.BindAddress,
		CertDir:          o.CertDir,
		CertName:         o.CertName,
		KeyName:          o.KeyName,
		CertPollInterval: o.CertPollInterval,
		EnableHTTP2:      o.EnableHTTP2,
		MaxRequestBytes:  o.MaxRequestBytes,
		MaxInFlight:      o.MaxInFlight,
		MaxInFlightBytes: o.MaxInFlightBytes,
		IdleTimeout:      o.IdleTimeout,
		ClientCAFile:     o.ClientCAFile,
		Log:              log.WithName("server"),
	})
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(wipingWatchFrames(cfg), ctrl.Options{
		Scheme:                 scheme.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.ProbeAddr,
		PprofBindAddress:       o.PprofAddr,
		WebhookServer:          srv,
		LeaderElection:         false,
		Cache:                  inventory.CacheOptions(),
		NewClient:              guardedClient,
	})
	if err != nil {
		return nil, fmt.Errorf("creating webhook manager: %w", err)
	}
	// Every workload kind, Pods included, is cached (without managed
	// fields) so that a delete of config still in use is refused from
	// memory; Namespaces (watchPolicies) for their labels and whether they
	// are terminating.
	kinds, err := o.Kinds()
	if err != nil {
		return nil, err
	}
	inv, err := inventory.Start(context.Background(), mgr.GetCache(), kinds, kinds.Kinds())
	if err != nil {
		return nil, err
	}
	changeControl, err := o.ChangeControl.Settings()
	if err != nil {
		return nil, err
	}
	policies, policiesSynced, err := watchPolicies(mgr)
	if err != nil {
		return nil, err
	}
	decoder := admission.Decoder{Scheme: mgr.GetScheme()}
	effects, err := confirmedEffects(mgr, srv.AuthenticatesCallers(), inv)
	if err != nil {
		return nil, err
	}
	rec := admission.Recorder{Events: mgr.GetEventRecorder("configward-webhook"), Effects: effects}
	keys, err := hashKeys(mgr, o.Common)
	if err != nil {
		return nil, err
	}
	srv.Register(admission.ConfigHashPath, admission.Webhook("config-hash",
		&admission.ConfigHash{Inventory: inv, Keys: keys, Decoder: decoder, Namespaces: mgr.GetCache(), Policies: policies, Effects: effects, Kinds: kinds}))
	schemaInformer, err := mgr.GetCache().GetInformer(context.Background(), &v1alpha1.ConfigSchema{})
	if err != nil {
		return nil, err
	}
	schemas := schemastore.New(mgr.GetCache())
	schemasSynced, err := schemas.Watch(schemaInformer)
	if err != nil {
		return nil, err
	}
	srv.Register(admission.ValidateConfigMapsPath, admission.Webhook("validate-configmaps",
		&admission.ValidateConfigMaps{Schemas: schemas, Decoder: decoder, Policies: policies, Namespaces: mgr.GetCache(), Recorder: rec}))
	srv.Register(admission.ValidateConfigSchemasPath, admission.Webhook("validate-configschemas",
		&admission.ValidateConfigSchemas{Decoder: decoder}))
	srv.Register(admission.ValidateConfigPoliciesPath, admission.Webhook("validate-configpolicies",
		&admission.ValidateConfigPolicies{Decoder: decoder, Policies: policies}))
	srv.Register(admission.ValidateWorkloadsPath, admission.Webhook("validate-workloads", &admission.ValidateWorkloads{
		Inventory: inv, Policies: policies, Namespaces: mgr.GetCache(), Decoder: decoder, Recorder: rec, Kinds: kinds,
	}))
	srv.Register(admission.ValidateConfigChangesPath, admission.Webhook("validate-config-changes", &admission.ValidateConfigChanges{
		Inventory: inv, Cache: mgr.GetCache(), Live: mgr.GetAPIReader(), Decoder: decoder,
		Recorder: rec, ChangeControl: changeControl, Policies: policies, Schemas: schemas,
	}))
	srv.Register(admission.RecordNamespaceChangesPath, admission.Webhook("record-namespaces", &admission.RecordNamespaceChanges{
		Decoder: decoder, Recorder: rec, ChangeControl: changeControl, Policies: policies,
	}))
	// The manager only runs its webhook server once someone asks for it.
	mgr.GetWebhookServer()
	if err := addAPIServerProbe(mgr, cfg); err != nil {
		return nil, err
	}
	p := &WebhookProcess{Process: Process{Manager: mgr, delay: o.ShutdownDelay, onDrain: srv.Drain}, Server: srv}
	if err := p.addProbes(
		namedCheck{"webhook-server", srv.StartedChecker()},
		namedCheck{"serving-certificate", srv.CertificateChecker()},
		namedCheck{"policies-loaded", func(*http.Request) error {
			if !policiesSynced() {
				return errors.New("ConfigPolicies not loaded yet")
			}
			return nil
		}},
		namedCheck{"schemas-loaded", func(*http.Request) error {
			if !schemasSynced() {
				return errors.New("ConfigSchemas not compiled yet")
			}
			return nil
		}},
	); err != nil {
		return nil, err
	}
	return p, nil
}

// watchPolicies starts the ConfigPolicy store on the manager's cache, with
// the Namespace informer the policies' selectors need.
func watchPolicies(mgr ctrlmanager.Manager) (*policystore.Store, func() bool, error) {
	ctx := context.Background()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{}); err != nil {
		return nil, nil, err
	}
	policies, err := policystore.New(ctx, ctrl.Log.WithName("configpolicy"))
	if err != nil {
		return nil, nil, fmt.Errorf("compiling the built-in rules: %w", err)
	}
	informer, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.ConfigPolicy{})
	if err != nil {
		return nil, nil, err
	}
	synced, err := policies.Watch(informer)
	return policies, synced, err
}

// NewController builds the leader-elected controller process.
func NewController(cfg *rest.Config, o Controller) (*Process, error) {
	cacheOpts := inventory.CacheOptions()
	reports, err := reportsServed(cfg, o.Reports)
	if err != nil {
		return nil, err
	}
	if reports {
		// Only configward's own Reports: other tools write many more.
		cacheOpts.ByObject[&openreports.Report{}] = cache.ByObject{
			Label: labels.SelectorFromSet(labels.Set{report.ManagedByLabel: report.Source}),
		}
	}
	mgr, err := ctrl.NewManager(wipingWatchFrames(cfg), ctrl.Options{
		Scheme:                  scheme.Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Declared custom kinds are read as unstructured objects; like the
		// typed ones they come from the cache (inventory.Start registers
		// their informers), not from a GET per reconcile.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		// Hand the lease over at once on a clean shutdown instead of making the
		// next leader wait for it to expire.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		NewClient:                     guardedClient,
		Controller:                    config.Controller{SkipNameValidation: &o.Restartable},
	})
	if err != nil {
		return nil, fmt.Errorf("creating controller manager: %w", err)
	}
	kinds, err := o.Kinds()
	if err != nil {
		return nil, err
	}
	inv, err := inventory.Start(context.Background(), mgr.GetCache(), kinds, inventory.RolloutKindsOf(kinds))
	if err != nil {
		return nil, err
	}
	// Pods (slimmed as the webhook's are) tell which config each one
	// started with; Reports are compared before any is written.
	driftObjs := []client.Object{&corev1.Pod{}}
	if reports {
		driftObjs = append(driftObjs, &openreports.Report{})
	}
	for _, obj := range driftObjs {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return nil, fmt.Errorf("starting informer for %T: %w", obj, err)
		}
	}
	policies, _, err := watchPolicies(mgr)
	if err != nil {
		return nil, err
	}
	keys, err := hashKeys(mgr, o.Common)
	if err != nil {
		return nil, err
	}
	settings := func(ctx context.Context, namespace string) (bool, bool, error) {
		ns, err := policystore.LookupNamespace(ctx, mgr.GetCache(), namespace)
		if err != nil {
			return false, false, err
		}
		enabled, includeSecrets := policies.Current().Rollouts(ns)
		return enabled, includeSecrets, nil
	}
	changes := drift.NewChanges()
	if err := controller.SetupRollouts(mgr, inv, controller.RolloutOptions{
		Keys:        keys,
		BatchWindow: o.RolloutBatchWindow,
		Rate:        o.RolloutRate,
		Settings:    settings,
		Changes:     changes,
	}); err != nil {
		return nil, err
	}
	if err := controller.SetupDrift(mgr, inv, controller.DriftOptions{
		Keys: keys, Settings: settings, Changes: changes, Reports: reports, Policies: policies,
	}); err != nil {
		return nil, err
	}
	changeControl, err := o.ChangeControl.Settings()
	if err != nil {
		return nil, err
	}
	if err := controller.SetupNamespaceLabels(mgr, policies, func(ns *corev1.Namespace) bool {
		return policies.Current().ChangeControl(changeControl, ns).Governed
	}); err != nil {
		return nil, err
	}
	if err := controller.SetupConfigPolicies(mgr, policies); err != nil {
		return nil, err
	}
	if err := controller.SetupConfigSchemas(mgr); err != nil {
		return nil, err
	}
	if err := addAPIServerProbe(mgr, cfg); err != nil {
		return nil, err
	}
	p := &Process{Manager: mgr, delay: o.ShutdownDelay}
	if err := p.addProbes(); err != nil {
		return nil, err
	}
	return p, nil
}

type namedCheck struct {
	name  string
	check healthz.Checker
}

// addProbes installs liveness, which only says the process is alive (a
// dependency failing must not get the pod killed), and readiness, which says
// the process can decide correctly right now.
func (p *Process) addProbes(extra ...namedCheck) error {
	if err := p.Manager.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	checks := append([]namedCheck{
		{"not-draining", func(*http.Request) error {
			if p.draining.Load() {
				return errors.New("shutting down")
			}
			return nil
		}},
		{"informers-synced", p.cachesSynced},
	}, extra...)
	for _, c := range checks {
		if err := p.Manager.AddReadyzCheck(c.name, c.check); err != nil {
			return err
		}
	}
	return nil
}

func (p *Process) cachesSynced(req *http.Request) error {
	ctx, cancel := context.WithTimeout(req.Context(), time.Second)
	defer cancel()
	if !p.Manager.GetCache().WaitForCacheSync(ctx) {
		return errors.New("informer caches have not synced")
	}
	return nil
}

// Run serves until ctx is cancelled (SIGTERM), then reports not ready, keeps
// serving for the shutdown delay so endpoints drain, and only then stops the
// manager, which lets in-flight requests finish.
func (p *Process) Run(ctx context.Context) error {
	mgrCtx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Manager.Start(mgrCtx) }()

	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log := ctrl.Log.WithName("shutdown")
	p.draining.Store(true)
	if p.onDrain != nil {
		p.onDrain()
	}
	log.Info("not ready any more; draining before stopping", "delay", p.delay)
	select {
	case err := <-done:
		return err
	case <-time.After(p.delay):
	}
	stop()
	return <-done
}

// reportsServed says whether the controller writes OpenReports Reports:
// mode allows it and the API server serves their CRD now.
func reportsServed(cfg *rest.Config, mode string) (bool, error) {
	if mode == ReportsOff {
		return false, nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("creating a discovery client: %w", err)
	}
	resources, err := dc.ServerResourcesForGroupVersion(openreports.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		ctrl.Log.Info("not writing OpenReports Reports: the API server does not serve " + openreports.SchemeGroupVersion.String() +
			" (install its CRD, for example with the chart's reports.installCRD, and restart the controller)")
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves %s: %w", openreports.SchemeGroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "reports" {
			return true, nil
		}
	}
	return false, nil
}
