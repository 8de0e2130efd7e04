// Package faults runs configward through faults on a whole cluster: its
// processes killed and restarted while work is in flight. configward runs
// as processes of its own, so a test can stop one the way a rollout, a node
// failure or an OOM kill would: two webhook replicas behind a stand-in for
// their Service (framework.Balancer), and controllers started by the specs.
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

var (
	env *framework.Env
	// service is the webhook Service the API server calls; webhooks are
	// its endpoints.
	service  *framework.Balancer
	webhooks []*framework.Process
)

// webhookFlags are the webhook replicas': the chart's shutdown delay, so a
// stopping replica keeps serving while it leaves the Service, and
// configward's own identity as the chart names it, which alone may write
// config snapshots and ConfigDeliveries.
var webhookFlags = []string{"--shutdown-delay=5s", "--configward-service-accounts=" + framework.ControllerServiceAccount}

func TestFaults(t *testing.T) {
	defer framework.RemoveBuilds()
	framework.RequireControlPlane(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward under faults")
}

// The suite's failures, again at the end of `make test`'s output.
var _ = ReportAfterSuite("failure digest", framework.WriteFailureDigest)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.Start(framework.Options{WithoutWebhook: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.StartCluster(2)).To(Succeed())
	service, err = framework.NewBalancer()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(service.Close)
	for _, name := range []string{"webhook-a", "webhook-b"} {
		p, err := env.StartWebhookBinary(name, webhookFlags...)
		Expect(err).NotTo(HaveOccurred())
		webhooks = append(webhooks, p)
	}
	service.SetEndpoints(endpoints()...)
	env.ServeWebhooksAt(service.Addr())
	_, err = env.InstallWebhookConfigurations(context.Background())
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// endpoints are the webhook replicas' addresses.
func endpoints() []string {
	var out []string
	for _, p := range webhooks {
		out = append(out, p.Addr)
	}
	return out
}
