// Package certmanager is cert-manager in the test world: its CRDs and its
// own controllers and CA injector, from the module go.mod pins, run in the
// test process. The module holds no main package for them (cert-manager's
// cmd/* are modules of their own, which the module proxy does not serve), so
// its images cannot be built here; the controllers are the same code. A
// package of its own, so that only the suites that need cert-manager link it.
package certmanager

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	cmcontroller "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuers controller finds issuer types in a registry these fill.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// certManagerControllers are the cert-manager controllers the chart's
// certificates need: the Certificate lifecycle, the approver (without it no
// CertificateRequest is approved), the SelfSigned and CA signers, and the
// Issuer controller that marks Issuers ready.
var certManagerControllers = []string{
	trigger.ControllerName, issuing.ControllerName, keymanager.ControllerName,
	requestmanager.ControllerName, readiness.ControllerName,
	crapprover.ControllerName, crselfsigned.CRControllerName, crca.CRControllerName,
	issuers.ControllerName,
}

// CRDs is the directory of cert-manager's CRDs in the module the
// controllers come from, so CRDs and controllers are the same version.
func CRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return "", fmt.Errorf("locating the cert-manager module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds"), nil
}

// Start runs cert-manager's own controllers and CA injector
// in-process until ctx ends. kubeconfig is an admin kubeconfig file:
// cert-manager's controller context is built from one, not a rest.Config.
func Start(ctx context.Context, cfg *rest.Config, kubeconfig, clusterResourceNamespace string) error {
	factory, err := cmcontroller.NewContextFactory(ctx, cmcontroller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   200,
		KubernetesAPIBurst: 400,
		IssuerOptions:      cmcontroller.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		CertificateOptions: cmcontroller.CertificateOptions{
			// cert-manager's defaults; in-process nothing sets them.
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("cert-manager controller context: %w", err)
	}
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	for _, name := range certManagerControllers {
		construct, ok := cmcontroller.Known()[name]
		if !ok {
			return fmt.Errorf("cert-manager controller %q is not registered", name)
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("cert-manager controller %s: %w", name, err)
		}
		go func() { _ = c.Run(2, ctx) }()
	}
	// The informers start once every controller has registered its own.
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	injectorCfg := rest.CopyConfig(cfg)
	injectorCfg.UserAgent = "cert-manager-cainjector"
	mgr, err := ctrl.NewManager(injectorCfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{ReaderFailOnMissingInformer: true},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	}); err != nil {
		return fmt.Errorf("cert-manager CA injector: %w", err)
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}
