package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/scheme"
)

// The webhook's replicas are replaced one at a time, as `kubectl rollout
// restart` or a chart upgrade does, while the API server sends them a
// steady stream of admission requests.
var _ = Describe("a rolling restart of the webhook's two replicas under load", func() {
	It("fails no request", func() {
		ctx := context.Background()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rolling-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		before := webhookFailures(ctx)

		stop := make(chan struct{})
		var sent, failed atomic.Int64
		var firstErrors sync.Map
		done := loadAt(ctx, ns.Name, 200, 2*time.Minute, stop, &sent, &failed, &firstErrors)

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
		close(stop)
		took := <-done

		rate := float64(sent.Load()) / took.Seconds()
		AddReportEntry("rolling restart", fmt.Sprintf("%d requests in %v (%.0f/s), %d failed", sent.Load(), took.Round(time.Millisecond), rate, failed.Load()))
		firstErrors.Range(func(k, _ any) bool { fmt.Fprintln(GinkgoWriter, "failed:", k); return true })
		Expect(sent.Load()).To(BeNumerically(">", 1000), "too little load to prove anything")
		Expect(failed.Load()).To(BeZero(), "requests failed during the rolling restart")
		Expect(webhookFailures(ctx)).To(Equal(before), "the API server failed to call a webhook (fail-open webhooks hide it from clients)")
	})
})

// loadAt sends server-side dry-run creates of Deployments, ConfigMaps and
// Secrets (each passes through configward's webhooks) at perSecond until
// stop is closed or limit passes, and reports on done how long it ran.
func loadAt(ctx context.Context, ns string, perSecond int, limit time.Duration, stop <-chan struct{}, sent, failed *atomic.Int64, errs *sync.Map) <-chan time.Duration {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = float32(perSecond*2), perSecond*2
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	objects := []func(i int64) client.Object{
		func(i int64) client.Object { return deployment(ns, "load-"+strconv.FormatInt(i, 10)) },
		func(i int64) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "load-" + strconv.FormatInt(i, 10)}, Data: map[string]string{"k": "v"}}
		},
		func(i int64) client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "load-" + strconv.FormatInt(i, 10)}, StringData: map[string]string{"k": "v"}}
		},
	}
	work := make(chan int64, perSecond)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := c.Create(rctx, objects[i%int64(len(objects))](i), client.DryRunAll)
				cancel()
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					errs.Store(err.Error(), true)
				}
			}
		}()
	}
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		deadline := time.After(limit)
		for i := int64(0); ; i++ {
			select {
			case <-stop:
			case <-deadline:
			case <-tick.C:
				select {
				case work <- i:
				default: // the workers are behind: the request is not sent, and not counted
				}
				continue
			}
			break
		}
		close(work)
		wg.Wait()
		done <- time.Since(start)
	}()
	return done
}

// webhookFailures is what the API server counts of calls to webhooks that
// failed (rejected for an error calling the webhook, or let through by a
// fail-open webhook), from its /metrics.
func webhookFailures(ctx context.Context) map[string]float64 {
	cs, err := kubernetes.NewForConfig(env.Config)
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
