package certrestarts_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

// The stale-certificates controller against kube-apiserver and etcd alone:
// the Eviction API as the API server serves it, with no kubelet, no
// ReplicaSet controller and no disruption controller (so a
// PodDisruptionBudget's status is never observed and every eviction it
// covers is refused). decide_test.go holds the decisions.

var suite = framework.NewControllerSuite(manager.Controller{StaleCertGrace: time.Second, StaleCertEvictionsPerMinute: 600})

func TestAgainstAPIServer(t *testing.T) {
	suite.Run(t, "the stale-certificates controller against kube-apiserver and etcd")
}

var ctx = context.Background()

var _ = Describe("evicting pods that present a stale certificate", func() {
	It("is refused while a PodDisruptionBudget says no and tried again, then evicts one pod at a time, the next once the last one's replacement is ready", func() {
		ns := suite.Namespace(nil)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{v1alpha1.ServingCertAnnotation: "8443", v1alpha1.OnStaleCertAnnotation: v1alpha1.OnStaleCertRestart}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}}}
		suite.Create(d)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
		suite.Create(rs)
		Expect(suite.Env.Client.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: d.Spec.Selector}})).To(Succeed())
		pod := func(name string, staleFor time.Duration) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: rs.Spec.Template.Labels, Annotations: rs.Spec.Template.Annotations,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
				Spec: rs.Spec.Template.Spec}
			suite.Create(p)
			mounted := reload.Leaf{Serial: "0B", NotAfter: time.Now().Add(90 * 24 * time.Hour)}
			e := reload.CertEntry{Port: 8443, Secret: "web-tls", Certificate: "web", Result: reload.CertCurrent, Presented: &mounted, Mounted: mounted, Since: time.Now().UTC()}
			if staleFor > 0 {
				e.Result, e.Presented, e.Since = reload.CertStale, &reload.Leaf{Serial: "0A", NotAfter: time.Now().Add(24 * time.Hour)}, time.Now().Add(-staleFor).UTC()
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, reload.CertCondition([]reload.CertEntry{e})}
			Expect(suite.Env.Client.Status().Update(ctx, p)).To(Succeed())
			return p
		}
		exists := func(p *corev1.Pod) func() bool {
			return func() bool {
				return !apierrors.IsNotFound(suite.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))
			}
		}
		events := func(reason string) func() []string {
			return func() []string {
				notes, err := suite.Env.EventNotes(ctx, ns, "web", reason)
				Expect(err).NotTo(HaveOccurred())
				return notes
			}
		}
		longest, other := pod("web-1-a", 2*time.Hour), pod("web-1-b", time.Hour)

		By("the PodDisruptionBudget refuses: the longest stale pod stays, the refusal is recorded once and tried again")
		Eventually(events("StaleCertificateEvictionRefused"), 15*time.Second).Should(ConsistOf(And(ContainSubstring("pod web-1-a not evicted"), ContainSubstring("Certificate web"))))
		Consistently(exists(longest), 3*time.Second).Should(BeTrue())

		By("the budget gone, web-1-a is evicted, and web-1-b waits for its replacement")
		Expect(suite.Env.Client.Delete(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
		Eventually(exists(longest), 30*time.Second).Should(BeFalse())
		Expect(events("StaleCertificateEvicted")()).To(ConsistOf(And(ContainSubstring("evicted pod web-1-a"), ContainSubstring("serial 0A"), ContainSubstring("serial 0B"))))
		Consistently(exists(other), 5*time.Second).Should(BeTrue(), "nothing replaced web-1-a yet")

		By("a replacement, ready and current: web-1-b is evicted next")
		pod("web-1-c", 0)
		Eventually(exists(other), 30*time.Second).Should(BeFalse())
		Expect(events("StaleCertificateEvicted")()).To(HaveLen(2))
	})
})
