package faults

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// A config delivery in waves is cut short by killing the controller that
// leads, in the middle of its second wave; the standby carries it on from
// the ConfigDelivery record: it never starts the finished canary wave
// again, re-stamps no workload twice, and gates the rest as before.
var _ = Describe("the leading controller killed during a config delivery", func() {
	const workloads = 30

	It("leaves the standby to finish the delivery from its record, each workload re-stamped once", func() {
		ctx := context.Background()
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "delivery-failover"}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"faults": "delivery"}},
			Revisions:         v1alpha1.RevisionSettings{Enabled: true},
			Delivery: &v1alpha1.DeliverySettings{ProgressDeadlineSeconds: 120, SoakSeconds: new(int32(1)), Waves: []v1alpha1.Wave{
				{Name: "canary", Percent: new(int32(10))}, {Name: "rest"}}},
		}}
		Expect(env.Client.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, policy)).To(Succeed()) })
		flags := []string{"--leader-elect=true", "--rollout-rate=5", "--rollout-batch-window=1s"}
		first, err := env.StartControllerBinary("delivery-a", flags...)
		Expect(err).NotTo(HaveOccurred())
		second, err := env.StartControllerBinary("delivery-b", flags...)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { first.Kill(); second.Kill() })

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "delivery-failover-", Labels: map[string]string{"faults": "delivery"}}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shared"},
			Data: map[string]string{"level": "info"}})).To(Succeed())
		// A spec before this one may have restarted etcd or the API server:
		// a webhook replica's watches then take a while to come back.
		Eventually(func() []string { return unknownTo(framework.LoadDeployment(ns.Name, "probe")) }, 60*time.Second, 100*time.Millisecond).Should(BeEmpty())
		// The ConfigPolicy above too: after such a restart a replica's
		// ConfigPolicy watch may come back later than its ConfigMap one.
		Eventually(func() []string { return withoutRevisions(framework.LoadDeployment(ns.Name, "probe")) }, 60*time.Second, 100*time.Millisecond).Should(BeEmpty())
		for i := range workloads {
			Expect(env.Client.Create(ctx, framework.LoadDeployment(ns.Name, fmt.Sprintf("web-%03d", i)))).To(Succeed())
		}
		before := hashes(ctx, ns.Name)
		Expect(distinct(before)).To(HaveLen(1), "every workload starts with the same hash")
		old := before["web-000"]

		var leader *framework.Process
		Eventually(func() *framework.Process { leader = leaderOf(first, second); return leader }, 60*time.Second, 250*time.Millisecond).ShouldNot(BeNil())
		standby := first
		if leader == first {
			standby = second
		}

		By("the shared ConfigMap changes; once the second wave is under way, the leader is killed")
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "shared"}, cm)).To(Succeed())
		cm.Data["level"] = "debug"
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		record := func() v1alpha1.ConfigDelivery {
			var list v1alpha1.ConfigDeliveryList
			Expect(env.Client.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
			if len(list.Items) != 1 {
				return v1alpha1.ConfigDelivery{}
			}
			return list.Items[0]
		}
		Eventually(func() string { return record().Status.CurrentWave }, 120*time.Second, 100*time.Millisecond).Should(Equal("rest"),
			func() string { return fmt.Sprintf("%+v", record().Status) })
		canary := record().Status.Waves[0]
		Expect(canary.Workloads).To(HaveLen(3), "10 %% of 30")
		Eventually(func() int { return workloads - count(hashes(ctx, ns.Name), old) }, 60*time.Second, 100*time.Millisecond).
			Should(BeNumerically(">=", len(canary.Workloads)+3))
		leader.Kill()
		rolledByLeader := workloads - count(hashes(ctx, ns.Name), old)
		Expect(rolledByLeader).To(BeNumerically("<", workloads), "the wave finished before the kill; the spec proves nothing")

		By("the standby takes the lease and finishes the delivery from the record")
		Eventually(func() *framework.Process { return leaderOf(standby) }, 60*time.Second, 500*time.Millisecond).Should(Equal(standby))
		Eventually(func() v1alpha1.DeliveryState { return record().Status.State }, 180*time.Second, 500*time.Millisecond).Should(Equal(v1alpha1.DeliverySucceeded))
		done := record()
		Expect(done.Status.Waves[0].StartedAt.Time).To(Equal(canary.StartedAt.Time), "the finished canary wave was not started again")
		Expect(done.Status.Waves[0].CompletedAt.Time).To(Equal(canary.CompletedAt.Time))
		Expect(count(hashes(ctx, ns.Name), old)).To(BeZero())
		Expect(generations(ctx, ns.Name)).To(HaveEach(BeEquivalentTo(2)), "each template changed once")
		Consistently(func() map[string]int64 { return generations(ctx, ns.Name) }, 5*time.Second, time.Second).Should(HaveEach(BeEquivalentTo(2)))
		Expect(controllerPatches(ns.Name)).NotTo(ContainElement(BeNumerically(">", 1)))
		AddReportEntry("delivery failover", fmt.Sprintf("%d of %d workloads re-stamped before the leader was killed in wave rest; the standby delivered the rest", rolledByLeader, workloads))
	})
})
