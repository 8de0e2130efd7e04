package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/freshness"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/reloadreports"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

// WebhookProcess is `configward webhook`: a manager with the hardened
// webhook server and no leader election, since every replica must answer
// the API server.
type WebhookProcess struct {
	Process
	Server *webhookserver.Server
	// Agents is the reload agents' report endpoint (nil when its bind
	// address is empty).
	Agents interface{ Addr() net.Addr }
}

// NewWebhook builds the webhook process. Handlers are registered on Server
// before Run.
func NewWebhook(cfg *rest.Config, o Webhook) (*WebhookProcess, error) {
	log := ctrl.Log.WithName("webhook")
	views := freshness.New().WithLog(ctrl.Log.WithName("freshness"))
	freshness.Publish(views)
	readyz, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for the API server's /readyz: %w", err)
	}
	gate := &freshness.Gate{Views: views, Wait: o.StaleViewWait,
		Kinds: []string{"ConfigPolicy", "ConfigSchema", "ConfigMap", "Secret"},
		APIServerReady: func(ctx context.Context) bool {
			// Allowed to everyone (system:public-info-viewer).
			return readyz.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil
		}}
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
		Gate:             gate.Check,
		Log:              log.WithName("server"),
	})
	if err != nil {
		return nil, err
	}
	// The cache's transforms read the workload kinds: what a workload
	// controls is cached without its spec.
	kinds, err := o.Kinds()
	if err != nil {
		return nil, err
	}
	opts := managerOptions(o.Common, inventory.WebhookCacheOptions(kinds))
	opts.Cache.NewInformer = views.NewInformer(kindOf(opts.Scheme))
	opts.WebhookServer = srv
	mgr, err := ctrl.NewManager(wipingWatchFrames(cfg), opts)
	if err != nil {
		return nil, fmt.Errorf("creating webhook manager: %w", err)
	}
	ready, agents, err := registerWebhooks(mgr, srv, o, kinds)
	if err != nil {
		return nil, err
	}
	// The manager only runs its webhook server once someone asks for it.
	mgr.GetWebhookServer()
	if err := addAPIServerProbe(mgr, cfg); err != nil {
		return nil, err
	}
	p := &WebhookProcess{Process: Process{Manager: mgr, delay: o.ShutdownDelay, server: srv}, Server: srv}
	if agents != nil {
		p.Agents = agents
	}
	checks := append([]namedCheck{
		{"webhook-server", srv.StartedChecker()},
		{"serving-certificate", srv.CertificateChecker()},
		{"current-view", func(r *http.Request) error { return gate.Ready(r.Context()) }},
	}, ready...)
	if err := p.addProbes(checks...); err != nil {
		return nil, err
	}
	return p, nil
}

// registerWebhooks builds the facts the handlers read (inventory, policies,
// schemas, the hash key) on the manager's cache and registers every
// handler. It returns the readiness checks of what must load first.
func registerWebhooks(mgr ctrlmanager.Manager, srv *webhookserver.Server, o Webhook, kinds *workload.Registry) ([]namedCheck, *reloadreports.Server, error) {
	// Every workload kind, Pods included, is cached (without managed
	// fields) so that a delete of config still in use is refused from
	// memory; Namespaces (watchPolicies) for their labels and whether they
	// are terminating.
	inv, err := inventory.Start(context.Background(), mgr.GetCache(), kinds, kinds.Kinds())
	if err != nil {
		return nil, nil, err
	}
	// Rollbacks are told from other writes by the workload's history.
	if err := inventory.WatchHistory(context.Background(), mgr.GetCache()); err != nil {
		return nil, nil, err
	}
	changeControl, err := o.ChangeControl.Settings()
	if err != nil {
		return nil, nil, err
	}
	policies, policiesSynced, err := watchPolicies(mgr)
	if err != nil {
		return nil, nil, err
	}
	ledger, err := confirmedEffects(mgr, srv.AuthenticatesCallers(), inv)
	if err != nil {
		return nil, nil, err
	}
	rec := admission.Recorder{Events: mgr.GetEventRecorder("configward-webhook"), Effects: ledger}
	keys, err := hashKeys(mgr, o.Common)
	if err != nil {
		return nil, nil, err
	}
	schemaInformer, err := mgr.GetCache().GetInformer(context.Background(), &v1alpha1.ConfigSchema{})
	if err != nil {
		return nil, nil, err
	}
	schemas := configschema.New(mgr.GetCache())
	schemasSynced, err := schemas.Watch(schemaInformer)
	if err != nil {
		return nil, nil, err
	}
	deliveries, deliveriesSynced, err := watchDeliveries(mgr)
	if err != nil {
		return nil, nil, err
	}
	admission.Register(srv, admission.Facts{
		Scheme: mgr.GetScheme(), Inventory: inv, Kinds: kinds, Cache: mgr.GetCache(), Live: mgr.GetAPIReader(),
		Keys: keys, Policies: policies, Schemas: schemas, ChangeControl: changeControl, Recorder: rec, Records: deliveries,
		Agent: reloadAgent(o.ReloadAgent),
	})
	var agents *reloadreports.Server
	if o.ReloadAgent.BindAddress != "" {
		agents = &reloadreports.Server{
			BindAddress: o.ReloadAgent.BindAddress,
			CertPath:    filepath.Join(o.CertDir, o.CertName), KeyPath: filepath.Join(o.CertDir, o.KeyName),
			IdleTimeout: o.IdleTimeout,
			Log:         ctrl.Log.WithName("reload-agents"),
			Handler: &reloadreports.Handler{Reviews: mgr.GetClient(), Pods: mgr.GetCache(), Inventory: inv, Writer: mgr.GetClient(),
				Events: mgr.GetEventRecorder("configward-webhook"), Kinds: kinds, Keys: keys, Live: mgr.GetAPIReader()},
		}
		if err := mgr.Add(agents); err != nil {
			return nil, nil, err
		}
	}
	return []namedCheck{
		{"policies-loaded", func(*http.Request) error {
			if !policiesSynced() {
				return errors.New("ConfigPolicies not loaded yet")
			}
			return nil
		}},
		{"deliveries-loaded", func(*http.Request) error {
			if !deliveriesSynced() {
				return errors.New("ConfigDeliveries not loaded yet")
			}
			return nil
		}},
		{"schemas-loaded", func(*http.Request) error {
			if !schemasSynced() {
				return errors.New("ConfigSchemas not compiled yet")
			}
			return nil
		}},
	}, agents, nil
}

// confirmedEffects returns the ledger of the webhook's decisions: recorded
// at once when it authenticates its callers, else confirmed from the
// informers of every kind it judges.
//
// Effects are keyed by Kind alone (as requests name them), so a declared
// kind sharing its Kind with a built-in one shares its key space; the
// content fingerprint still tells their objects apart.
func confirmedEffects(mgr ctrlmanager.Manager, trusted bool, inv *inventory.Inventory) (*effects.Ledger, error) {
	ledger := effects.New(trusted, inv.Registry())
	type watched struct {
		kind string
		obj  client.Object
	}
	objs := []watched{{"ConfigMap", &corev1.ConfigMap{}}, {"Secret", &corev1.Secret{}}, {"Namespace", &corev1.Namespace{}}}
	for _, k := range inv.WatchedKinds() {
		t, _ := inv.Registry().Type(k.GroupKind())
		objs = append(objs, watched{k.Kind, t.New()})
	}
	for _, w := range objs {
		informer, err := mgr.GetCache().GetInformer(context.Background(), w.obj)
		if err != nil {
			return nil, err
		}
		if err := ledger.Watch(informer, w.kind); err != nil {
			return nil, err
		}
	}
	return ledger, nil
}

// reloadAgent is the injection of the reload agent, nil when no image is
// set. The CA handed to agents is read at each injection: cert-manager
// renews it in place.
func reloadAgent(o ReloadAgent) *admission.ReloadAgent {
	if o.Image == "" {
		return nil
	}
	a := &admission.ReloadAgent{Image: o.Image, ReportURL: o.ReportURL, ServerName: o.ServerName}
	if u, err := url.Parse(o.ReportURL); err == nil && strings.Trim(u.Path, "/") == "" {
		u.Path = reload.ReportPath
		a.ReportURL = u.String()
	}
	if o.CAFile != "" {
		a.CA = func() string {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				ctrl.Log.WithName("reload-agent").Error(err, "reading the CA handed to agents; they trust the system's roots")
				return ""
			}
			return string(pem)
		}
	}
	return a
}

// kindOf names the kind of an informer's example object, for
// freshness.Views.
func kindOf(scheme *runtime.Scheme) func(runtime.Object) string {
	return func(obj runtime.Object) string {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return fmt.Sprintf("%T", obj)
		}
		return gvk.Kind
	}
}
