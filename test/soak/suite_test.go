// Package soak runs configward for a long stretch under steady mixed
// traffic and reports whether its processes grow: heap, goroutines and
// open file descriptors of the webhook and the controller, sampled each
// minute, with the slope after warm-up. `make soak` runs it (30 minutes by
// default); it is not part of `make test`, and `go test ./...` skips it
// unless CONFIGWARD_SOAK_DURATION is set.
//
// configward runs as processes of its own (one webhook, one controller), so
// what is measured is theirs alone, on a whole cluster: the deployment
// controller, the scheduler and kwok's nodes roll real pods when config
// changes.
package soak

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/test/framework"
)

// DurationEnv names the variable that turns the soak on and says how long
// the traffic runs (a Go duration, e.g. 30m).
const DurationEnv = "CONFIGWARD_SOAK_DURATION"

var (
	env        *framework.Env
	webhook    *framework.Process
	controller *framework.Process
	// duration is how long the traffic runs.
	duration time.Duration
)

func TestSoak(t *testing.T) {
	defer framework.RemoveBuilds()
	raw := os.Getenv(DurationEnv)
	if raw == "" {
		t.Skip("the soak runs only when " + DurationEnv + " is set (e.g. 30m); `make soak` sets it")
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration such as 30m", DurationEnv, raw)
	}
	duration = d
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	// Ginkgo's own default (1 h) would cut a longer soak short; setup and
	// the checks after the traffic take a few minutes.
	if limit := d + 15*time.Minute; suiteConfig.Timeout < limit {
		suiteConfig.Timeout = limit
	}
	RunSpecs(t, "configward soak", suiteConfig, reporterConfig)
}

// The suite's failures, again at the end of `make test`'s output.
var _ = ReportAfterSuite("failure digest", framework.WriteFailureDigest)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.Start(framework.Options{WithoutWebhook: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.StartCluster(2)).To(Succeed())
	webhook, err = env.StartWebhookBinary("webhook")
	Expect(err).NotTo(HaveOccurred())
	env.ServeWebhooksAt(webhook.Addr)
	_, err = env.InstallWebhookConfigurations(context.Background())
	Expect(err).NotTo(HaveOccurred())
	controller, err = env.StartControllerBinary("controller")
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
