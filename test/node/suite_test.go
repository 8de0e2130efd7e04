// Package node runs pods on a real node: a kubelet with containerd and runc
// beside the API server, kube-controller-manager and kube-scheduler, with
// configward's webhook and controller. Where every other suite's pods run
// on kwok, which makes them Running without running anything, this one
// proves configward's premises about the kubelet: what a running
// container sees of a ConfigMap it mounts or reads through env, and what
// the pods of a rolled workload see.
package node

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

var (
	env  *framework.Env
	node *framework.Node
)

func TestNode(t *testing.T) {
	defer framework.RemoveBuilds()
	framework.RequireControlPlane(t)
	framework.RequireNode(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward with pods on a real node")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.Start(framework.Options{Webhook: func(o *manager.Webhook) {
		// The controller writes config snapshots as itself, as the chart
		// names it to the webhook.
		o.ChangeControl.ConfigwardServiceAccounts = []string{framework.ControllerServiceAccount}
	}})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.StartControllerManager()).To(Succeed())
	Expect(env.StartScheduler()).To(Succeed())
	node, err = env.StartNode("real-node-0")
	Expect(err).NotTo(HaveOccurred())
	_, err = env.InstallWebhookConfigurations(context.Background(), framework.SkipNamespacesLabelled(unmanagedLabel))
	Expect(err).NotTo(HaveOccurred())
	_, err = env.StartController(manager.Controller{})
	Expect(err).NotTo(HaveOccurred())
})

// unmanagedLabel marks the namespaces configward's webhooks skip, where a
// spec shows what the kubelet does without configward.
const unmanagedLabel = "configward-test/unmanaged"

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
