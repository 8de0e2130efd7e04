// Command external-secrets runs External Secrets Operator's own reconcilers
// (ExternalSecret, SecretStore and ClusterSecretStore, from ESO's pinned
// module) in one controller-runtime manager, for the tests: no leader
// election, no webhook, metrics off unless --metrics-addr names an address.
//
// Why not ESO's own main: its command also sets up the webhook, the cert
// controller, PushSecrets and ClusterExternalSecrets, and the tests need
// none of them. The tests use only the fake provider; see the Makefile for
// how the build is kept to it. The fields are wired as ESO v0.16.2's
// cmd/controller/root.go wires them, with its defaults.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	esv1 "github.com/external-secrets/external-secrets/apis/externalsecrets/v1"
	esv1alpha1 "github.com/external-secrets/external-secrets/apis/externalsecrets/v1alpha1"
	genv1alpha1 "github.com/external-secrets/external-secrets/apis/generators/v1alpha1"
	ctrlcommon "github.com/external-secrets/external-secrets/pkg/controllers/common"
	"github.com/external-secrets/external-secrets/pkg/controllers/externalsecret"
	"github.com/external-secrets/external-secrets/pkg/controllers/externalsecret/esmetrics"
	ctrlmetrics "github.com/external-secrets/external-secrets/pkg/controllers/metrics"
	"github.com/external-secrets/external-secrets/pkg/controllers/secretstore"
	"github.com/external-secrets/external-secrets/pkg/controllers/secretstore/cssmetrics"
	"github.com/external-secrets/external-secrets/pkg/controllers/secretstore/ssmetrics"
	"github.com/external-secrets/external-secrets/pkg/feature"
	_ "github.com/external-secrets/external-secrets/pkg/provider/fake" // registers spec.provider.fake
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	// --kubeconfig is controller-runtime's flag (KUBECONFIG and
	// ~/.kube/config are its fallbacks); ESO's features add theirs (the
	// template delimiters, the generators' gc grace period).
	metricsAddr := pflag.String("metrics-addr", "0", `Address the metrics endpoint binds to, such as 127.0.0.1:8080; "0" turns it off.`)
	controllerClass := pflag.String("controller-class", "default", "Reconcile only stores and ExternalSecrets of this controller class.")
	namespace := pflag.String("namespace", "", "Watch only this namespace (all when empty).")
	concurrent := pflag.Int("concurrent", 1, "Concurrent reconciles per controller.")
	clusterStores := pflag.Bool("enable-cluster-store-reconciler", true, "Reconcile ClusterSecretStores.")
	floodGate := pflag.Bool("enable-flood-gate", true, "Sync an ExternalSecret only while its store is ready (or its state unknown).")
	storeRequeue := pflag.Duration("store-requeue-interval", 5*time.Minute, "How often (Cluster)SecretStores are revalidated.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	for _, f := range feature.Features() {
		pflag.CommandLine.AddFlagSet(f.Flags)
	}
	pflag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail("no Kubernetes API server to talk to (pass --kubeconfig or set KUBECONFIG)", err)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(esv1.AddToScheme(scheme))
	utilruntime.Must(esv1alpha1.AddToScheme(scheme))
	utilruntime.Must(genv1alpha1.AddToScheme(scheme))

	// As ESO by default: Secrets and ConfigMaps are read uncached, except
	// the Secrets ExternalSecrets manage (labelled), which get a cache of
	// their own.
	opts := ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: *metricsAddr},
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
		}},
	}
	if *namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{*namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		fail("creating the manager", err)
	}
	secretClient, err := ctrlcommon.BuildManagedSecretClient(mgr, *namespace)
	if err != nil {
		fail("creating the managed-Secret client", err)
	}

	// The reconcilers record metrics into vectors these create.
	ctrlmetrics.SetUpLabelNames(false)
	esmetrics.SetUpMetrics()
	ssmetrics.SetUpMetrics()
	options := func() controller.Options {
		return controller.Options{MaxConcurrentReconciles: *concurrent, RateLimiter: ctrlcommon.BuildRateLimiter()}
	}
	log := ctrl.Log.WithName("controllers")
	if err := (&secretstore.StoreReconciler{
		Client: mgr.GetClient(), Log: log.WithName("SecretStore"), Scheme: mgr.GetScheme(),
		ControllerClass: *controllerClass, RequeueInterval: *storeRequeue,
	}).SetupWithManager(mgr, options()); err != nil {
		fail("setting up the SecretStore controller", err)
	}
	if *clusterStores {
		cssmetrics.SetUpMetrics()
		if err := (&secretstore.ClusterStoreReconciler{
			Client: mgr.GetClient(), Log: log.WithName("ClusterSecretStore"), Scheme: mgr.GetScheme(),
			ControllerClass: *controllerClass, RequeueInterval: *storeRequeue,
		}).SetupWithManager(mgr, options()); err != nil {
			fail("setting up the ClusterSecretStore controller", err)
		}
	}
	if err := (&externalsecret.Reconciler{
		Client: mgr.GetClient(), SecretClient: secretClient, Log: log.WithName("ExternalSecret"),
		Scheme: mgr.GetScheme(), RestConfig: mgr.GetConfig(), ControllerClass: *controllerClass,
		// Used only when an ExternalSecret has no refreshInterval, which
		// the CRD defaults to 1h: ESO's value.
		RequeueInterval:           time.Hour,
		ClusterSecretStoreEnabled: *clusterStores,
		EnableFloodGate:           *floodGate,
	}).SetupWithManager(mgr, options()); err != nil {
		fail("setting up the ExternalSecret controller", err)
	}

	for _, f := range feature.Features() {
		if f.Initialize != nil {
			f.Initialize()
		}
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail("running the manager", err)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "external-secrets: %s: %v\n", what, err)
	os.Exit(1)
}
