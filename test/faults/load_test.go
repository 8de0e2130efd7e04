package faults

import (
	"context"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/configward/configward/test/framework"
)

// startLoad is framework.StartLoad for a spec.
func startLoad(ctx context.Context, cfg *rest.Config, ns string, perSecond int, limit time.Duration, stop <-chan struct{}) (*framework.Load, <-chan time.Duration) {
	l, done, err := framework.StartLoad(ctx, cfg, ns, perSecond, limit, stop)
	Expect(err).NotTo(HaveOccurred())
	return l, done
}

// minimumLoad is how many requests a fault spec's load sends at least:
// fewer prove nothing about the webhooks under the fault.
const minimumLoad = 1000

// enough keeps the load going, for at most a minute more, until it has
// sent more than minimumLoad requests. Its rate is not the machine's to
// promise: under make test the other suites share the two cores, and while
// etcd or an API server is down the workers wait on their requests, so the
// fault's window alone may hold too few.
func enough(l *framework.Load) {
	Eventually(l.Sent.Load, time.Minute, 100*time.Millisecond).Should(BeNumerically(">", minimumLoad), "too little load to prove anything")
}

// webhookFailures is framework.WebhookCallFailures for a spec.
func webhookFailures(ctx context.Context, cfg *rest.Config) map[string]float64 {
	failures, err := framework.WebhookCallFailures(ctx, cfg)
	Expect(err).NotTo(HaveOccurred())
	return failures
}
