package faults

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/test/framework"
)

// restartsInARow is how many rolling restarts of both replicas each spec
// makes under its load.
const restartsInARow = 20

// replacements counts the replicas started in place of others, so that
// each has a name (and a folder) of its own.
var replacements int

// terminationGrace is the chart's webhook.terminationGracePeriodSeconds:
// after it the kubelet kills a replica that has not stopped.
const terminationGrace = 190 * time.Second

// The webhook's replicas are replaced one at a time, as `kubectl rollout
// restart` or a chart upgrade does, while the API server sends them
// admission requests: a steady 200 a second, which keeps every connection
// busy, and a sparse load whose connections sit idle for 80 to 95 s
// between requests, next to the API server's own 90 s idle timeout.
var _ = Describe("rolling restarts of the webhook's two replicas under load", func() {
	It("fail no request at 200 requests a second, 20 in a row", func() {
		ctx := context.Background()
		ns := namespace(ctx, "rolling-")
		before := webhookFailures(ctx, env.Config)

		stop := make(chan struct{})
		load, done := startLoad(ctx, env.Config, ns, 200, 10*time.Minute, stop)
		time.Sleep(3 * time.Second) // the load is flowing
		stopped := rollingRestarts(restartsInARow, 0)
		// The load goes on until the replaced replicas have stopped: their
		// connections, busy, each end after their next answer.
		drains := stopped()
		enough(load)
		close(stop)
		took := <-done

		AddReportEntry("rolling restarts at 200/s", fmt.Sprintf("%d rolling restarts: %s\n%s", restartsInARow, load.Summary(took), drains))
		Expect(load.Failed.Load()).To(BeZero(), "requests failed during the rolling restarts")
		Expect(webhookFailures(ctx, env.Config)).To(Equal(before), "the API server failed to call a webhook (fail-open webhooks hide it from clients)")
	})

	It("fail no request when the API server's connections sit idle near its 90 s idle timeout, 20 in a row", func() {
		ctx := context.Background()
		ns := namespace(ctx, "sparse-")
		before := webhookFailures(ctx, env.Config)

		stop := make(chan struct{})
		load, done, err := framework.StartSparseLoad(ctx, env.Config, ns, 16, 15*time.Minute, stop)
		Expect(err).NotTo(HaveOccurred())
		// The first burst has opened the connections; the restarts are
		// spread over about three of the load's 80-95 s periods, so that
		// replicas stop while the API server holds connections at every
		// age, each idle since its last request.
		time.Sleep(10 * time.Second)
		stopped := rollingRestarts(restartsInARow, 8*time.Second)
		// The load goes on while the replaced replicas wait for the API
		// server to let go of their connections, which it does after the
		// next burst or idle at 90 s.
		drains := stopped()
		close(stop)
		took := <-done

		AddReportEntry("rolling restarts under sparse load", fmt.Sprintf("%d rolling restarts: %s\n%s", restartsInARow, load.Summary(took), drains))
		Expect(load.Sent.Load()).To(BeNumerically(">=", 3*16), "fewer than three bursts of the sparse load were sent")
		Expect(load.Failed.Load()).To(BeZero(), "requests failed during the rolling restarts")
		Expect(webhookFailures(ctx, env.Config)).To(Equal(before), "the API server failed to call a webhook (fail-open webhooks hide it from clients)")
	})
})

func namespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// rollingRestarts replaces each replica in turn, rounds times, as a
// Deployment's rolling update does (the chart's maxSurge 1,
// maxUnavailable 0): the new replica is ready and in the Service, then the
// old one gets SIGTERM and leaves the endpoints a second later (the
// endpoints controller and kube-proxy). Like a Deployment it does not wait
// for the old one to stop; pause is the time between replacements.
// stopped waits for every replaced replica to end and checks that each
// stopped by itself within the chart's grace period, saying how long each
// took.
func rollingRestarts(rounds int, pause time.Duration) (stopped func() string) {
	type ended struct {
		name   string
		log    string
		took   time.Duration
		killed bool
		exit   error
	}
	var (
		mu   sync.Mutex
		ends []ended
		wg   sync.WaitGroup
	)
	for round := 1; round <= rounds; round++ {
		for i := range webhooks {
			By(fmt.Sprintf("round %d: replacing replica %d", round, i))
			old := webhooks[i]
			replacements++
			next, err := env.StartWebhookBinary(fmt.Sprintf("webhook-%c-%d", 'a'+i, replacements), webhookFlags...)
			Expect(err).NotTo(HaveOccurred())
			env.ServeWebhooksAt(service.Addr())
			webhooks[i] = next
			service.SetEndpoints(append(endpoints(), old.Addr)...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				killed, exit := old.Terminate(terminationGrace)
				mu.Lock()
				ends = append(ends, ended{old.Name, old.Log, time.Since(start), killed, exit})
				mu.Unlock()
			}()
			time.Sleep(time.Second)
			service.SetEndpoints(endpoints()...)
			time.Sleep(pause)
		}
	}
	return func() string {
		wg.Wait()
		var longest time.Duration
		for _, e := range ends {
			longest = max(longest, e.took)
			if e.killed || e.exit != nil {
				log, _ := os.ReadFile(e.log)
				Fail(fmt.Sprintf("%s did not stop by itself within %v (killed: %v, exit: %v); its log ends:\n%s", e.name, terminationGrace, e.killed, e.exit, tail(string(log), 2000)))
			}
		}
		return fmt.Sprintf("%d replicas replaced, each stopped by itself after SIGTERM; the longest took %v", len(ends), longest.Round(100*time.Millisecond))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
