package manager

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/framewipe"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/scheme"
)

// What both processes build the same way: their manager's base options,
// the config-hash key, the ConfigPolicies in force.

// managerOptions are the options both managers start from: configward's
// scheme, the digest-only cache, the guarded client, and the endpoints of
// o. Each process adds its own (the webhook server, leader election).
func managerOptions(o Common, cacheOpts cache.Options) ctrl.Options {
	return ctrl.Options{
		Scheme:                 scheme.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.ProbeAddr,
		PprofBindAddress:       o.PprofAddr,
		Cache:                  cacheOpts,
		NewClient:              guardedClient,
	}
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

// watchPolicies starts the ConfigPolicy store on the manager's cache, with
// the Namespace informer the policies' selectors need.
func watchPolicies(mgr ctrlmanager.Manager) (*configpolicy.Store, func() bool, error) {
	ctx := context.Background()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{}); err != nil {
		return nil, nil, err
	}
	policies, err := configpolicy.New(ctx, ctrl.Log.WithName("configpolicy"))
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

// watchDeliveries starts the ConfigDelivery informer, indexed by the
// config delivered, and returns the reader of the records, through which
// stamps pin consumers. Both
// processes stamp templates, so both must know every open delivery before
// they stamp anything: synced says when the informer has.
func watchDeliveries(mgr ctrlmanager.Manager) (*deliveryrecords.Reader, func() bool, error) {
	ctx := context.Background()
	if err := deliveryrecords.Index(ctx, mgr.GetCache()); err != nil {
		return nil, nil, fmt.Errorf("indexing ConfigDeliveries: %w", err)
	}
	informer, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.ConfigDelivery{})
	if err != nil {
		return nil, nil, err
	}
	return &deliveryrecords.Reader{Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}, informer.HasSynced, nil
}
