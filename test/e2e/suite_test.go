// Package e2e holds configward's behaviour tests: Ginkgo suites against a
// whole cluster (kube-apiserver, etcd, kube-controller-manager with every
// default controller, kube-scheduler and kwok nodes on which pods run) with
// configward's webhook configurations installed, driven through kubectl
// where users drive it.
package e2e

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

var (
	env *framework.Env
	// stopController stops the suite's configward controller, which
	// restartController starts again.
	stopController func() error
)

// suiteController are the settings of the suite's configward controller:
// a short batch window so specs wait less, and no pacing, which one spec
// turns on for itself.
var suiteController = manager.Controller{Common: manager.Common{ChangeControl: suiteChangeControl, WorkloadKindsFile: workloadKindsFile},
	RolloutBatchWindow: rolloutBatchWindow, SnapshotGrace: snapshotGrace}

// kwokNodes is how many fake nodes run the suite's pods.
const kwokNodes = 3

func TestE2E(t *testing.T) {
	defer framework.RemoveBuilds()
	framework.RequireControlPlane(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward e2e")
}

// The suite's failures, again at the end of `make test`'s output.
var _ = ReportAfterSuite("failure digest", framework.WriteFailureDigest)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	argoCRDs, err := framework.ArgoRolloutCRDs()
	Expect(err).NotTo(HaveOccurred())
	csiCRDs, err := framework.CSIDriverCRDs()
	Expect(err).NotTo(HaveOccurred())
	env, err = framework.Start(framework.Options{
		Register: func(p *manager.WebhookProcess) error {
			registerHarnessWebhook(p)
			registerSubPathInjector(p)
			registerSnapshotRefuser(p)
			return nil
		},
		Webhook: func(o *manager.Webhook) {
			configureChangeControl(o)
			o.WorkloadKindsFile = workloadKindsFile
		},
		// Argo Rollouts' real CRD, declared as a custom workload kind to
		// both processes (argo_rollout_test.go), and OpenReports' Report CRD,
		// whose Reports the controller writes where it is served (the chart
		// installs this copy on request).
		// The Secrets Store CSI driver's CRDs: CSI-mounted secrets
		// (csi_secrets_test.go).
		ExtraCRDPaths: []string{argoCRDs, csiCRDs},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.StartCluster(kwokNodes)).To(Succeed())
	grantTestIdentities()
	installHarnessWebhook()
	installed, err := env.InstallWebhookConfigurations(context.Background(), framework.SkipNamespacesLabelled(unmanagedLabel), declareRolloutRules)
	Expect(err).NotTo(HaveOccurred())
	// The controller scopes the workload webhooks to writes that involve
	// config, as the chart has it do: every spec runs with that in force.
	suiteController.WebhookScope = framework.WebhookScope(installed)
	stopController, err = env.StartController(suiteController)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

func decodeYAML(y string) ([]client.Object, error) {
	f, err := os.CreateTemp(GinkgoT().TempDir(), "*.yaml")
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(y); err != nil {
		return nil, err
	}
	f.Close()
	return framework.DecodeManifests(f.Name())
}
