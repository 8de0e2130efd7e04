package node

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// The chart's pods as a cluster runs them: configward's image on the real
// node, its serving certificate from cert-manager, its webhook reached by
// the API server through its Service, its controller's replicas sharing a
// lease.
// webhookGracePeriod is the chart's webhook.terminationGracePeriodSeconds.
const webhookGracePeriod = 190 * time.Second

var _ = Describe("configward installed by its chart, on the real node", Ordered, func() {
	ctx := context.Background()
	It("runs each replica from configward's image on the node, ready, at the chart's priority", func() {
		for component, replicas := range map[string]int{"webhook": 2, "controller": 2} {
			running := releasePods(component)
			Expect(running).To(HaveLen(replicas), component)
			for _, p := range running {
				Expect(p.Spec.NodeName).To(Equal(node.Name), p.Name)
				Expect(p.Spec.Containers[0].Image).To(HavePrefix("ghcr.io/configward/configward:"), p.Name)
				Expect(p.Status.ContainerStatuses).To(ConsistOf(HaveField("Ready", true)), p.Name)
				Expect(p.Spec.PriorityClassName).NotTo(BeEmpty(), p.Name)
				var pc schedulingv1.PriorityClass
				Expect(env.Client.Get(ctx, client.ObjectKey{Name: p.Spec.PriorityClassName}, &pc)).To(Succeed())
				Expect(p.Spec.Priority).To(HaveValue(Equal(pc.Value)), "the API server gave %s its class's priority", p.Name)
				Expect(pc.Value).To(BeEquivalentTo(1000000000))
			}
		}
	})

	It("serves the certificate cert-manager issued, at the pods behind the webhook Service", func() {
		var cert cmapi.Certificate
		// cert-manager marks it Ready a moment after it wrote the Secret
		// the pods mount.
		Eventually(func() []cmapi.CertificateCondition {
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release + "-webhook"}, &cert)).To(Succeed())
			return cert.Status.Conditions
		}, 30*time.Second, 250*time.Millisecond).Should(ContainElement(And(HaveField("Type", cmapi.CertificateConditionReady), HaveField("Status", cmmeta.ConditionTrue))))
		var secret corev1.Secret
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: cert.Spec.SecretName}, &secret)).To(Succeed())
		issued := secret.Data[corev1.TLSCertKey]
		Expect(issued).NotTo(BeEmpty())

		webhookPods := releasePods("webhook")
		var podIPs []string
		for _, p := range webhookPods {
			podIPs = append(podIPs, p.Status.PodIP)
		}
		// The EndpointSlice controller follows the pods' readiness a moment
		// after helm saw the Deployment ready.
		Eventually(func() []string {
			var slices discoveryv1.EndpointSliceList
			Expect(env.Client.List(ctx, &slices, client.InNamespace(releaseNamespace),
				client.MatchingLabels{discoveryv1.LabelServiceName: release + "-webhook"})).To(Succeed())
			var ready []string
			for _, s := range slices.Items {
				for _, ep := range s.Endpoints {
					if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
						ready = append(ready, ep.Addresses...)
					}
				}
			}
			return ready
		}, 30*time.Second, 250*time.Millisecond).Should(ConsistOf(podIPs), "the Service's ready endpoints are the webhook pods")
		for _, ip := range podIPs {
			// Only which certificate is served is read here; the API
			// server verifies it against the injected CA bundle on every
			// call (the refused kubectl apply of the kubelet spec).
			conn, err := tls.Dial("tcp", net.JoinHostPort(ip, "9443"), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
			Expect(err).NotTo(HaveOccurred())
			served := conn.ConnectionState().PeerCertificates[0].Raw
			conn.Close()
			Expect(served).To(Equal(firstDER(issued)), "the pod at %s serves the issued certificate", ip)
		}
	})

	It("keeps one webhook replica through voluntary disruptions: the PodDisruptionBudget counts the pods", func() {
		var pdb policyv1.PodDisruptionBudget
		Eventually(func() policyv1.PodDisruptionBudgetStatus {
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release + "-webhook"}, &pdb)).To(Succeed())
			return pdb.Status
		}, time.Minute, 250*time.Millisecond).Should(And(HaveField("ExpectedPods", BeEquivalentTo(2)), HaveField("CurrentHealthy", BeEquivalentTo(2)),
			HaveField("DesiredHealthy", BeEquivalentTo(1)), HaveField("DisruptionsAllowed", BeEquivalentTo(1))))
	})

	It("sets each process's Go memory limit from its container's memory limit", func() {
		for _, component := range []string{"webhook", "controller"} {
			for _, p := range releasePods(component) {
				limit := p.Spec.Containers[0].Resources.Limits.Memory().Value()
				Expect(limit).To(BeNumerically(">", 0), p.Name)
				// --memory-limit-ratio's default, 0.9, read by the process
				// from its cgroup as runc set it.
				want := int64(math.Floor(float64(limit) * 0.9))
				// The chart's metrics.port, served without TLS.
				got, err := framework.MetricSum("http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/metrics", "go_gc_gomemlimit_bytes")
				Expect(err).NotTo(HaveOccurred(), p.Name)
				Expect(int64(got)).To(Equal(want), "%s (container limit %d)", p.Name, limit)
			}
		}
	})

	It("moves the controller's lease to another process when the leader is killed", func() {
		// controller-runtime's identity: the pod's hostname (its name),
		// "_", a suffix random to each process.
		holder := func() string {
			var lease coordinationv1.Lease
			if env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: manager.DefaultLeaderElectionID}, &lease) != nil ||
				lease.Spec.HolderIdentity == nil {
				return ""
			}
			return *lease.Spec.HolderIdentity
		}
		podOf := func(identity string) string { return strings.SplitN(identity, "_", 2)[0] }
		replicas := releasePods("controller")
		names := []string{replicas[0].Name, replicas[1].Name}
		Eventually(func() string { return podOf(holder()) }, time.Minute, 250*time.Millisecond).Should(BeElementOf(names))
		old := holder()
		var killed corev1.Pod
		for _, p := range replicas {
			if p.Name == podOf(old) {
				killed = p
			}
		}
		By("SIGKILL of the leader's process: it cannot release the lease, which must expire")
		Expect(node.KillContainer(&killed, "controller")).To(Succeed())
		at := time.Now()
		Eventually(holder, 2*time.Minute, 250*time.Millisecond).Should(And(Not(Equal(old)), WithTransform(podOf, BeElementOf(names))))
		// Both the other replica and the killed one's container, which the
		// kubelet restarts at once, wait for the lease to expire; either
		// may win it. What matters is that a live process leads.
		took := "the other replica"
		if podOf(holder()) == killed.Name {
			took = "the killed replica's restarted container"
		}
		AddReportEntry("leader election", fmt.Sprintf("%s held the lease %s after the leader was killed", took, time.Since(at).Round(time.Second)))
		By("the kubelet restarted the killed container")
		Eventually(func() int32 {
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&killed), &killed)).To(Succeed())
			for _, s := range killed.Status.ContainerStatuses {
				if s.Ready {
					return s.RestartCount
				}
			}
			return 0
		}, 2*time.Minute, 250*time.Millisecond).Should(BeEquivalentTo(1))
		By("the new leader renews the lease")
		var lease coordinationv1.Lease
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: manager.DefaultLeaderElectionID}, &lease)).To(Succeed())
		renewed := lease.Spec.RenewTime.Time
		Eventually(func() time.Time {
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&lease), &lease)).To(Succeed())
			return lease.Spec.RenewTime.Time
		}, time.Minute, 250*time.Millisecond).Should(BeTemporally(">", renewed))
	})
	It("loses no admission request through a helm upgrade that restarts both processes", func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-load"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		// The ConfigMap the load's Deployments mount.
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shared"}})).To(Succeed())
		before, err := framework.WebhookCallFailures(ctx, env.Config)
		Expect(err).NotTo(HaveOccurred())
		replaced := map[string]bool{}
		for _, component := range []string{"webhook", "controller"} {
			for _, p := range releasePods(component) {
				replaced[p.Name] = true
			}
		}

		// Through the webhook Service, which the API server resolves to
		// the ready pods of its EndpointSlices at each new connection.
		stop := make(chan struct{})
		load, done, err := framework.StartLoad(ctx, env.Config, ns.Name, 50, 8*time.Minute, stop)
		Expect(err).NotTo(HaveOccurred())
		time.Sleep(3 * time.Second)
		started := time.Now()
		res := env.Helm("upgrade", release, filepath.Join(framework.RepoRoot(), "charts", "configward"), "-n", releaseNamespace,
			"--reuse-values", "--set", "logVerbosity=1", "--wait", "--timeout", "5m")
		Expect(res.ExitCode).To(Equal(0), func() string { return res.Stdout + res.Stderr + releaseLogs() })
		upgraded := time.Since(started)
		By("the old pods drain and end while the load goes on")
		Eventually(func() []string {
			var pods corev1.PodList
			Expect(env.Client.List(ctx, &pods, client.InNamespace(releaseNamespace))).To(Succeed())
			var left []string
			for _, p := range pods.Items {
				if replaced[p.Name] {
					left = append(left, p.Name)
				}
			}
			return left
		}, webhookGracePeriod, time.Second).Should(BeEmpty(), "old pods still there after the chart's grace period")
		gone := time.Since(started)
		for _, component := range []string{"webhook", "controller"} {
			for _, p := range releasePods(component) {
				Expect(replaced).NotTo(HaveKey(p.Name), "the upgrade replaced every %s pod", component)
			}
		}
		close(stop)
		took := <-done

		AddReportEntry("helm upgrade under load", fmt.Sprintf("helm upgrade done after %v, the old pods gone after %v; %s",
			upgraded.Round(time.Second), gone.Round(time.Second), load.Summary(took)))
		Expect(load.Sent.Load()).To(BeNumerically(">", 1000), "too little load to prove anything")
		Expect(load.Failed.Load()).To(BeZero(), "requests failed during the upgrade")
		after, err := framework.WebhookCallFailures(ctx, env.Config)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before), "the API server failed to call a webhook (fail-open webhooks hide it from clients)")
	})
})

// firstDER is the first certificate of a PEM bundle (the leaf).
func firstDER(bundle []byte) []byte {
	block, _ := pem.Decode(bundle)
	Expect(block).NotTo(BeNil(), "no PEM certificate")
	return block.Bytes
}
