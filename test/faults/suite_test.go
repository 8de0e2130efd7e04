// Package faults runs configward through faults on a whole cluster: its
// processes killed and restarted while work is in flight. configward runs
// as processes of its own (the webhook in-process, the controllers as
// binaries), so a test can kill one the way a node failure or an OOM kill
// would.
package faults

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/test/framework"
)

var env *framework.Env

func TestFaults(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward under faults")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.Start(framework.Options{})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.StartCluster(2)).To(Succeed())
	_, err = env.InstallWebhookConfigurations(context.Background())
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
