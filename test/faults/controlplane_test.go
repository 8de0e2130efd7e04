package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/test/framework"
)

// The control plane fails under configward: an API server restarts (an
// upgrade, a crash-looping control-plane node), or etcd does. configward's
// processes watch through one API server; the cluster's other API servers
// keep calling its webhooks meanwhile.
var _ = Describe("the control plane restarted under load", func() {
	It("kube-apiserver: the webhooks keep answering the API server that stays up, stay ready, and judge every review after theirs is back with the config and ConfigPolicy changed during the outage", func() {
		ctx := context.Background()
		By("a second API server on the same etcd, as in a highly available control plane; configward's processes watch through the first")
		second, err := env.StartSecondAPIServer()
		Expect(err).NotTo(HaveOccurred())
		c2, err := client.New(second, client.Options{Scheme: scheme.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apiserver-restart-"}}
		Expect(c2.Create(ctx, ns)).To(Succeed())
		// A reference to a ConfigMap the webhook has not seen is hashed as
		// missing: the hash to start from is the one it gives once it has.
		var missing string
		Eventually(func() string { missing = stampedVia(ctx, c2, ns.Name); return missing }, 30*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
		Expect(c2.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shared"},
			Data: map[string]string{"level": "info"}})).To(Succeed())
		var before string
		Eventually(func() string { before = stampedVia(ctx, c2, ns.Name); return before }, 30*time.Second, 200*time.Millisecond).
			ShouldNot(Or(BeEmpty(), Equal(missing)))
		// A second namespace, which a ConfigPolicy created during the
		// outage will govern: it turns stamping off there.
		governed := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apiserver-restart-governed-",
			Labels: map[string]string{"configward-test/stale-view": ns.Name}}}
		Expect(c2.Create(ctx, governed)).To(Succeed())
		Expect(c2.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: governed.Name, Name: "shared"}})).To(Succeed())
		Eventually(func() string { h, _ := stamp(ctx, c2, governed.Name); return h }, 30*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
		failuresBefore := webhookFailures(ctx, second)

		stop := make(chan struct{})
		load, done := startLoad(ctx, second, ns.Name, 200, 3*time.Minute, stop)
		time.Sleep(3 * time.Second)

		By("stopping the first API server: every watch of configward's processes ends")
		down := time.Now()
		restart, killed, err := env.StopAPIServer(20 * time.Second)
		Expect(err).NotTo(HaveOccurred())
		stoppedIn := time.Since(down)
		restarted := false
		DeferCleanup(func() {
			if !restarted { // the spec failed: the next ones need it
				Expect(restart()).To(Succeed())
			}
		})
		cm := &corev1.ConfigMap{}
		Expect(c2.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "shared"}, cm)).To(Succeed())
		cm.Data["level"] = "debug"
		Expect(c2.Update(ctx, cm)).To(Succeed(), "the change made during the outage, through the API server that is up")
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "stale-view-"}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: governed.Labels},
			Rollouts:          v1alpha1.RolloutSettings{Disabled: true}}}
		Expect(c2.Create(ctx, policy)).To(Succeed(), "the ConfigPolicy created during the outage")
		DeferCleanup(func() { Expect(client.IgnoreNotFound(c2.Delete(ctx, policy))).To(Succeed()) })
		By("meanwhile each replica stays ready, answers from what it last saw, and says its API server does not answer")
		for _, p := range webhooks {
			Eventually(func() string { return metric(p.MetricsURL, "configward_api_server_reachable") }, 20*time.Second, 250*time.Millisecond).
				Should(Equal("0"), "%s does not say its API server is gone", p.Name)
		}
		for range 3 {
			for _, p := range webhooks {
				Expect(readyz(p.ProbeURL)).To(Equal(http.StatusOK), "%s is not ready while its API server is down", p.Name)
			}
			Expect(stampedVia(ctx, c2, ns.Name)).To(Equal(before), "the webhook cannot have seen the change yet")
			time.Sleep(5 * time.Second)
		}
		outage := time.Since(down)
		restarted = true
		Expect(restart()).To(Succeed())
		ready := time.Now()
		// The outage of ConfigPolicies ends when the API server serves
		// their watch again: a few seconds after it is ready, once its
		// watch cache of the custom resource is.
		watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			w, err := watcher.Watch(wctx, &v1alpha1.ConfigPolicyList{})
			if err == nil {
				w.Stop()
			}
			return err
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
		back := time.Now()

		By("from the moment it serves them again, every review is judged with the config and the ConfigPolicy changed during the outage")
		// A replica whose watches have not caught up yet makes the review
		// wait for them (freshness.Gate); none answers from its old view.
		// The replicas ask whether their API server serves the watches
		// about every 100 ms.
		time.Sleep(200 * time.Millisecond)
		checked := 0
		for time.Since(back) < 10*time.Second {
			h, err := stamp(ctx, c2, ns.Name)
			Expect(err).NotTo(HaveOccurred(), "review %d, %v after the API server was back", checked, time.Since(back))
			Expect(h).NotTo(Or(Equal(before), BeEmpty()), "review %d, %v after the API server was back, was judged with the config as it was before the outage", checked, time.Since(back))
			h, err = stamp(ctx, c2, governed.Name)
			Expect(err).NotTo(HaveOccurred(), "review %d, %v after the API server was back", checked, time.Since(back))
			Expect(h).To(BeEmpty(), "review %d, %v after the API server was back, was judged without the ConfigPolicy created during the outage", checked, time.Since(back))
			checked++
		}
		resynced := time.Since(back)
		for _, p := range webhooks {
			Eventually(func() string { return metric(p.MetricsURL, "configward_api_server_reachable") }, 20*time.Second, 250*time.Millisecond).
				Should(Equal("1"), "%s does not say its API server is back", p.Name)
		}
		time.Sleep(3 * time.Second)
		enough(load)
		close(stop)
		took := <-done

		how := "stopped by SIGTERM"
		if killed {
			how = "SIGTERM, then SIGKILL after 20 s"
		}
		AddReportEntry("kube-apiserver restart", fmt.Sprintf("first API server %s in %v, down %v in all, serving ConfigPolicy watches %v after it was ready; %d pairs of reviews in the %v after it was back, each judged with the config and the ConfigPolicy changed meanwhile; views stale meanwhile: %s\n%s",
			how, stoppedIn.Round(100*time.Millisecond), outage.Round(100*time.Millisecond), back.Sub(ready).Round(100*time.Millisecond), checked, resynced.Round(100*time.Millisecond), staleViewMetrics(), load.Summary(took)))
		Expect(load.Failed.Load()).To(BeZero(), "requests through the API server that stayed up failed")
		Expect(webhookFailures(ctx, second)).To(Equal(failuresBefore), "the API server that stayed up failed to call a webhook")
	})

	It("etcd: the webhooks stay up and ready, no call to them fails, and they see changes once the API server's storage is back", func() {
		ctx := context.Background()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "etcd-restart-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shared"},
			Data: map[string]string{"level": "info"}})).To(Succeed())
		var before string
		Eventually(func() string { before = stampedVia(ctx, env.Client, ns.Name); return before }, 30*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
		failuresBefore := webhookFailures(ctx, env.Config)

		stop := make(chan struct{})
		load, done := startLoad(ctx, env.Config, ns.Name, 200, 3*time.Minute, stop)
		time.Sleep(3 * time.Second)

		By("killing etcd, as a crash would, for ten seconds")
		restart, _, err := env.StopEtcd(syscall.SIGKILL, 0)
		Expect(err).NotTo(HaveOccurred())
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				Expect(restart()).To(Succeed())
			}
		})
		down := time.Now()
		for range 2 {
			time.Sleep(5 * time.Second)
			for _, p := range webhooks {
				Expect(readyz(p.ProbeURL)).To(Equal(http.StatusOK), "%s is not ready while etcd is down", p.Name)
			}
		}
		restarted = true
		Expect(restart()).To(Succeed())
		outage := time.Since(down)
		By("each replica's view is current again within seconds, not client-go's backoff")
		for _, p := range webhooks {
			Eventually(func() (int, error) { return framework.MetricSum(p.MetricsURL, "configward_view_stale_seconds") }, 5*time.Second, 100*time.Millisecond).
				Should(BeZero(), "%s still has a stale view", p.Name)
		}
		current := time.Since(down) - outage

		By("a change once the API server's storage is back is seen")
		cm := &corev1.ConfigMap{}
		Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "shared"}, cm); err != nil {
				return err
			}
			cm.Data["level"] = "debug"
			return env.Client.Update(ctx, cm)
		}, time.Minute, 250*time.Millisecond).Should(Succeed())
		changed := time.Now()
		Eventually(func() string { return stampedVia(ctx, env.Client, ns.Name) }, 2*time.Minute, 250*time.Millisecond).
			ShouldNot(Or(Equal(before), BeEmpty()))
		seen := time.Since(changed)
		time.Sleep(3 * time.Second)
		enough(load)
		close(stop)
		took := <-done

		AddReportEntry("etcd restart", fmt.Sprintf("etcd down (SIGKILL) until the API server stored writes again: %v; every replica's view current %v later; a change after it seen in %v\n%s",
			outage.Round(100*time.Millisecond), current.Round(100*time.Millisecond), seen.Round(100*time.Millisecond), load.Summary(took)))
		Expect(load.Failures(framework.CallingWebhook)).To(BeZero(), "the API server failed to call a webhook while etcd was down")
		Expect(webhookFailures(ctx, env.Config)).To(Equal(failuresBefore), "the API server failed to call a webhook")
	})
})

// stampedVia creates, as a dry run through c, a Deployment that mounts
// ConfigMap "shared" and returns the hash the webhook stamped on it ("" when
// the create failed).
func stampedVia(ctx context.Context, c client.Client, ns string) string {
	h, _ := stamp(ctx, c, ns)
	return h
}

// stamp is stampedVia with the create's error.
func stamp(ctx context.Context, c client.Client, ns string) (string, error) {
	d := framework.LoadDeployment(ns, "probe")
	if err := c.Create(ctx, d, client.DryRunAll); err != nil {
		return "", err
	}
	return d.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation], nil
}

// staleViewMetrics is what the replicas counted of reviews judged from a
// stale view (during the outage) and of reviews refused for one.
func staleViewMetrics() string {
	var b strings.Builder
	for _, p := range webhooks {
		judged, err := framework.MetricSum(p.MetricsURL, "configward_view_stale_reviews_total")
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintf(&b, "%s judged %d reviews from its view while its API server was gone; ", p.Name, judged)
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// readyz is the status of a process's readiness probe, 0 when unreachable.
func readyz(probeURL string) int {
	resp, err := http.Get(probeURL + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// metric is the value of an unlabelled metric a process serves, "" when
// it serves none by that name.
func metric(metricsURL, name string) string {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
