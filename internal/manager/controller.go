package manager

import (
	"cmp"
	"context"
	"fmt"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/configward/configward/internal/controller/certrestarts"
	"github.com/configward/configward/internal/controller/changerecords"
	"github.com/configward/configward/internal/controller/channels"
	"github.com/configward/configward/internal/controller/deliveries"
	"github.com/configward/configward/internal/controller/policies"
	"github.com/configward/configward/internal/controller/reports"
	"github.com/configward/configward/internal/controller/revisions"
	"github.com/configward/configward/internal/controller/rollouts"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/workload"
)

// NewController builds the leader-elected controller process.
func NewController(cfg *rest.Config, o Controller) (*Process, error) {
	// The cache's transforms read the workload kinds: a ReplicaSet that a
	// workload controls is cached without its spec.
	kinds, err := o.Kinds()
	if err != nil {
		return nil, err
	}
	cacheOpts := inventory.ControllerCacheOptions(kinds)
	writeReports, err := reportsServed(cfg, o.Reports)
	if err != nil {
		return nil, err
	}
	if writeReports {
		// Only configward's own Reports: other tools write many more.
		inventory.SetByObject(&cacheOpts, &openreports.Report{}, cache.ByObject{
			Label: labels.SelectorFromSet(labels.Set{report.ManagedByLabel: report.Source}),
		})
	}
	opts := managerOptions(o.Common, cacheOpts)
	opts.LeaderElection = o.LeaderElect
	opts.LeaderElectionID = o.LeaderElectionID
	opts.LeaderElectionNamespace = o.LeaderElectionNamespace
	// Hand the lease over at once on a clean shutdown instead of making the
	// next leader wait for it to expire.
	opts.LeaderElectionReleaseOnCancel = true
	// Declared custom kinds are read as unstructured objects; like the
	// typed ones they come from the cache (inventory.Start registers their
	// informers), not from a GET per reconcile.
	opts.Client = client.Options{Cache: &client.CacheOptions{Unstructured: true}}
	opts.Controller = config.Controller{SkipNameValidation: &o.Restartable}
	mgr, err := ctrl.NewManager(wipingWatchFrames(cfg), opts)
	if err != nil {
		return nil, fmt.Errorf("creating controller manager: %w", err)
	}
	if err := setupControllers(mgr, o, kinds, writeReports); err != nil {
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

// setupControllers registers the rollout and drift controllers and the
// reconcilers of namespaces, ConfigPolicies and ConfigSchemas, with the
// informers they read.
func setupControllers(mgr ctrlmanager.Manager, o Controller, kinds *workload.Registry, writeReports bool) error {
	inv, err := inventory.Start(context.Background(), mgr.GetCache(), kinds, kinds.RolledKinds())
	if err != nil {
		return err
	}
	// Pods (slimmed as the webhook's are) tell which config each one
	// started with; Reports are compared before any is written.
	driftObjs := []client.Object{&corev1.Pod{}}
	if writeReports {
		driftObjs = append(driftObjs, &openreports.Report{})
	}
	for _, obj := range driftObjs {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("starting informer for %T: %w", obj, err)
		}
	}
	inForce, policiesSynced, err := watchPolicies(mgr)
	if err != nil {
		return err
	}
	keys, err := hashKeys(mgr, o.Common)
	if err != nil {
		return err
	}
	tracker := flapping.NewTracker()
	records := o.ChangeRecords
	if records == "" {
		records = DefaultChangeRecords
	}
	if err := changerecords.Setup(mgr, changerecords.Options{
		Tracker: tracker, Policies: inForce, Pass: o.FlappingPass,
		Record: types.NamespacedName{Namespace: o.HashKeyNamespace, Name: records},
	}); err != nil {
		return err
	}
	deliveryRecords, _, err := watchDeliveries(mgr)
	if err != nil {
		return err
	}
	if err := inventory.WatchHistory(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	// The delivery and channels controllers find the pods of a config
	// through it.
	if err := inventory.IndexPods(context.Background(), mgr.GetCache()); err != nil {
		return fmt.Errorf("indexing Pods by the config they read: %w", err)
	}
	snapshots := revisions.NewSnapshotter(mgr, inv, keys)
	causes := drift.NewCauses()
	if err := rollouts.Setup(mgr, inv, rollouts.Options{
		Keys:        keys,
		BatchWindow: o.RolloutBatchWindow,
		Rate:        o.RolloutRate,
		Policies:    inForce,
		Snapshots:   snapshots,
		Causes:      causes,
		Records:     deliveryRecords,
		Flapping:    tracker,
	}); err != nil {
		return err
	}
	changeControl, err := o.ChangeControl.Settings()
	if err != nil {
		return err
	}
	governed := func(ctx context.Context, name string) (bool, error) {
		var ns corev1.Namespace
		if err := mgr.GetClient().Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
			return false, err
		}
		return inForce.Current().ChangeControl(changeControl, &ns).Governed, nil
	}
	allowed, err := o.allowedAddresses()
	if err != nil {
		return err
	}
	if err := deliveries.Setup(mgr, inv, deliveries.Options{
		Policies: inForce, Snapshots: snapshots, Keys: keys, Records: deliveryRecords, BatchWindow: o.RolloutBatchWindow, Flapping: tracker,
		Prometheus:       deliveries.PrometheusDefault{Address: o.AnalysisPrometheus, Secret: o.AnalysisPrometheusSecret},
		AllowedAddresses: allowed, Namespace: o.HashKeyNamespace, Secrets: mgr.GetAPIReader(), Governed: governed,
	}); err != nil {
		return err
	}
	if err := channels.Setup(mgr, inv, channels.Options{Policies: inForce, Snapshots: snapshots, Keys: keys, Records: deliveryRecords}); err != nil {
		return err
	}
	if err := reports.Setup(mgr, inv, reports.Options{
		Keys: keys, Causes: causes, Reports: writeReports, Policies: inForce, Records: deliveryRecords, Flapping: tracker,
		Certs: report.CertSettings{Grace: cmp.Or(o.StaleCertGrace, DefaultStaleCertGrace), Warning: cmp.Or(o.CertExpiryWarning, DefaultCertExpiryWarning)},
	}); err != nil {
		return err
	}
	if err := certrestarts.Setup(mgr, certrestarts.Options{Grace: cmp.Or(o.StaleCertGrace, DefaultStaleCertGrace),
		PerMinute: o.StaleCertEvictionsPerMinute, Kinds: inv.Registry()}); err != nil {
		return err
	}
	grace := o.SnapshotGrace
	if grace == 0 {
		grace = DefaultSnapshotGrace
	}
	if err := revisions.Setup(mgr, inv, revisions.Options{Policies: inForce, Snapshots: snapshots, Grace: grace}); err != nil {
		return err
	}
	if err := policies.SetupNamespaceLabels(mgr, inForce, func(ns *corev1.Namespace) bool {
		return inForce.Current().ChangeControl(changeControl, ns).Governed
	}); err != nil {
		return err
	}
	trials := policies.WriteTrials{Snapshot: snapshots.TryWrite, Record: deliveries.TryRecord(mgr.GetClient())}
	if err := policies.SetupConfigPolicies(mgr, inForce, trials); err != nil {
		return err
	}
	if err := policies.SetupWebhookScope(mgr, inForce, policiesSynced, kinds, o.WebhookScope); err != nil {
		return err
	}
	return policies.SetupConfigSchemas(mgr)
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
