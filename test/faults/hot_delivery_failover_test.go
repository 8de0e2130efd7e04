package faults

import (
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// A delivery of hot config is cut short by killing the leading controller
// while its second wave soaks; the standby carries it on from the record:
// it never starts a finished wave again, and writes each wave's channel
// once.
var _ = Describe("the leading controller killed during a delivery of hot config", func() {
	It("leaves the standby to finish it from its record, each channel written once", func() {
		ctx := context.Background()
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hot-delivery-failover"}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"faults": "hot-delivery"}},
			Revisions:         v1alpha1.RevisionSettings{Enabled: true},
			Delivery: &v1alpha1.DeliverySettings{ProgressDeadlineSeconds: 120, SoakSeconds: new(int32(4)), Waves: []v1alpha1.Wave{
				{Name: "one"}, {Name: "two"}, {Name: "three"}}},
		}}
		Expect(env.Client.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, policy)).To(Succeed()) })
		flags := []string{"--leader-elect=true", "--rollout-batch-window=1s"}
		first, err := env.StartControllerBinary("hot-delivery-a", flags...)
		Expect(err).NotTo(HaveOccurred())
		second, err := env.StartControllerBinary("hot-delivery-b", flags...)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { first.Kill(); second.Kill() })

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hot-failover-", Labels: map[string]string{"faults": "hot-delivery"}}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "flags", Annotations: map[string]string{v1alpha1.ReloadAnnotation: "hot"}},
			Data: map[string]string{"level": "info"}}
		Expect(env.Client.Create(ctx, cm)).To(Succeed())
		channels := func() map[string]string {
			var list corev1.ConfigMapList
			Expect(env.Client.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
			out := map[string]string{}
			for _, c := range list.Items {
				out[c.Annotations[v1alpha1.ChannelWaveAnnotation]] = c.Data["level"]
			}
			return out
		}
		Eventually(channels, 60*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"one": "info", "two": "info", "three": "info"}))
		var leader *framework.Process
		Eventually(func() *framework.Process { leader = leaderOf(first, second); return leader }, 60*time.Second, 250*time.Millisecond).ShouldNot(BeNil())
		standby := first
		if leader == first {
			standby = second
		}

		By("the hot ConfigMap changes; while wave two soaks, the leader is killed")
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
		Eventually(func() string { return record().Status.CurrentWave }, 60*time.Second, 100*time.Millisecond).Should(Equal("two"))
		Expect(record().Spec.Hot).To(BeTrue())
		Eventually(channels, 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"one": "debug", "two": "debug", "three": "info"}))
		one := record().Status.Waves[0]
		leader.Kill()
		Expect(record().Status.State).To(Equal(v1alpha1.DeliveryProgressing), "the delivery finished before the kill; the spec proves nothing")

		By("the standby takes the lease and finishes the delivery from the record")
		Eventually(func() *framework.Process { return leaderOf(standby) }, 60*time.Second, 500*time.Millisecond).Should(Equal(standby))
		Eventually(func() v1alpha1.DeliveryState { return record().Status.State }, 120*time.Second, 500*time.Millisecond).Should(Equal(v1alpha1.DeliverySucceeded))
		done := record()
		Expect(done.Status.Waves[0].StartedAt.Time).To(Equal(one.StartedAt.Time), "the finished wave one was not started again")
		Expect(channels()).To(Equal(map[string]string{"one": "debug", "two": "debug", "three": "debug"}))
		writes, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Namespace == ns.Name &&
				ev.Verb == "update" && ev.ResponseStatus.Code == http.StatusOK
		})
		Expect(err).NotTo(HaveOccurred())
		updates := map[string]int{}
		for _, ev := range writes {
			updates[ev.ObjectRef.Name]++
		}
		Expect(updates).To(Equal(map[string]int{"flags-ch-one": 1, "flags-ch-two": 1, "flags-ch-three": 1}), "each channel took the change once")
	})
})
