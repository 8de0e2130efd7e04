package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The webhook's replicas are replaced one at a time, as `kubectl rollout
// restart` or a chart upgrade does, while the API server sends them a
// steady stream of admission requests.
var _ = Describe("a rolling restart of the webhook's two replicas under load", func() {
	It("fails no request", func() {
		ctx := context.Background()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rolling-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		before := webhookFailures(ctx, env.Config)

		stop := make(chan struct{})
		load, done := startLoad(ctx, env.Config, ns.Name, 200, 2*time.Minute, stop)

		time.Sleep(3 * time.Second) // the load is flowing
		for i := range webhooks {
			By(fmt.Sprintf("replacing replica %d", i))
			old := webhooks[i]
			stopped := make(chan struct{})
			stoppedAt := time.Now()
			go func() { defer close(stopped); _ = old.Stop() }()
			// The endpoints controller drops a terminating pod at once;
			// kube-proxy applies it about a second later. Meanwhile the
			// replica keeps serving (its shutdown delay).
			time.Sleep(time.Second)
			others := []string{}
			for j, p := range webhooks {
				if j != i {
					others = append(others, p.Addr)
				}
			}
			service.SetEndpoints(others...)
			<-stopped
			if log, err := os.ReadFile(old.Log); err == nil {
				fmt.Fprintf(GinkgoWriter, "%s stopped after %v; its log ends:\n%s\n", old.Name, time.Since(stoppedAt), tail(string(log), 1500))
			}
			next, err := env.StartWebhookBinary(fmt.Sprintf("%s-%d", old.Name, i+2), webhookFlags...)
			Expect(err).NotTo(HaveOccurred())
			env.ServeWebhooksAt(service.Addr())
			webhooks[i] = next
			service.SetEndpoints(endpoints()...)
			time.Sleep(2 * time.Second)
		}
		load.enough()
		close(stop)
		took := <-done

		AddReportEntry("rolling restart", load.summary(took))
		Expect(load.failed.Load()).To(BeZero(), "requests failed during the rolling restart")
		Expect(webhookFailures(ctx, env.Config)).To(Equal(before), "the API server failed to call a webhook (fail-open webhooks hide it from clients)")
	})
})

// webhookFailures is what the API server counts of calls to webhooks that
// failed (rejected for an error calling the webhook, or let through by a
// fail-open webhook), from the /metrics of the API server cfg points at.
func webhookFailures(ctx context.Context, cfg *rest.Config) map[string]float64 {
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !(strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{") ||
			strings.HasPrefix(line, "apiserver_admission_webhook_rejection_count{") && strings.Contains(line, `error_type="calling_webhook_error"`)) {
			continue
		}
		i := strings.LastIndex(line, " ")
		v, err := strconv.ParseFloat(line[i+1:], 64)
		Expect(err).NotTo(HaveOccurred())
		out[line[:i]] = v
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
