// Package controllers runs each of configward's reconcilers against
// kube-apiserver and etcd alone: no kube-controller-manager, no scheduler,
// no kwok, no webhook. What another controller would do (a ReplicaSet, its
// pods) the specs write themselves, so a reconciler bug fails here in
// seconds, before the whole-cluster suite (test/e2e) runs the same
// behaviour with every controller in place.
package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/webhookscope"
	"github.com/configward/configward/test/framework"
)

var (
	env *framework.Env
	// stopController stops the suite's controller, for a spec that runs
	// one of its own (startSuiteController starts it again).
	stopController func() error
)

// batchWindow is the controller's: short, so specs wait less.
const batchWindow = 500 * time.Millisecond

func TestControllers(t *testing.T) {
	defer framework.RemoveBuilds()
	framework.RequireControlPlane(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward reconcilers against kube-apiserver and etcd")
}

// The suite's failures, again at the end of `make test`'s output.
var _ = ReportAfterSuite("failure digest", framework.WriteFailureDigest)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.Start(framework.Options{WithoutWebhook: true})
	Expect(err).NotTo(HaveOccurred())
	create(scopeProbeConfigurations()...)
	startSuiteController()
})

func startSuiteController() {
	var err error
	stopController, err = env.StartController(manager.Controller{RolloutBatchWindow: batchWindow,
		WebhookScope: webhookscope.Configurations{Mutating: scopeProbe, Validating: scopeProbe}})
	Expect(err).NotTo(HaveOccurred())
}

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// namespace creates a namespace for one spec, with labels.
func namespace(labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctrl-", Labels: labels}}
	Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
