package certrestarts_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

// The stale-certificates controller against kube-apiserver and etcd alone:
// the Eviction API as the API server serves it, with no kubelet (an evicted
// running pod stays terminating until the spec deletes it, as a kubelet
// would) and no ReplicaSet controller (the spec makes the replacement). An
// admission policy refuses evictions, as a PodDisruptionBudget would (the
// node suite has a real one, with the disruption controller).
// decide_test.go holds the decisions.

var suite = framework.NewControllerSuite(manager.Controller{StaleCertGrace: time.Second, StaleCertEvictionsPerMinute: 600})

func TestAgainstAPIServer(t *testing.T) {
	suite.Run(t, "the stale-certificates controller against kube-apiserver and etcd")
}

var ctx = context.Background()

var _ = Describe("evicting pods that present a stale certificate", func() {
	It("is tried again with backoff while evictions are refused, then evicts one pod at a time, the next once the last one's replacement is ready", func() {
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
		refuse := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-evictions-" + ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "no disruption allowed now"}}}}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: refuse.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: refuse.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
		Expect(suite.Env.Client.Create(ctx, refuse)).To(Succeed())
		Expect(suite.Env.Client.Create(ctx, binding)).To(Succeed())
		// The API server applies a new policy within a second or so.
		time.Sleep(2 * time.Second)
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
			// Running: the Eviction API checks budgets only for running pods.
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, reload.CertCondition([]reload.CertEntry{e})}
			Expect(suite.Env.Client.Status().Update(ctx, p)).To(Succeed())
			return p
		}
		evicted := func(p *corev1.Pod) func() bool {
			return func() bool {
				var got corev1.Pod
				err := suite.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)
				return apierrors.IsNotFound(err) || got.DeletionTimestamp != nil
			}
		}
		// gone finishes an evicted pod, as its kubelet would (a pod on no
		// node is deleted at once).
		gone := func(p *corev1.Pod) {
			Expect(client.IgnoreNotFound(suite.Env.Client.Delete(ctx, p, client.GracePeriodSeconds(0)))).To(Succeed())
		}
		events := func(reason string) func() []string {
			return func() []string {
				notes, err := suite.Env.EventNotes(ctx, ns, "web", reason)
				Expect(err).NotTo(HaveOccurred())
				return notes
			}
		}
		longest, other := pod("web-1-a", 2*time.Hour), pod("web-1-b", time.Hour)

		By("refused, as a budget refuses: the longest stale pod stays, the refusal is recorded once and tried again")
		Eventually(events("StaleCertificateEvictionRefused"), 15*time.Second).Should(ConsistOf(And(ContainSubstring("pod web-1-a not evicted"),
			ContainSubstring("no disruption allowed now"), ContainSubstring("Certificate web"))))
		Consistently(evicted(longest), 3*time.Second).Should(BeFalse())
		Expect(framework.Metric("configward_stale_certificate_evictions_total", map[string]string{"result": "failed"})).To(BeNumerically(">=", 1))

		By("allowed again, web-1-a is evicted within the backoff (10 s), and web-1-b waits until its replacement is ready")
		Expect(suite.Env.Client.Delete(ctx, binding)).To(Succeed())
		Expect(suite.Env.Client.Delete(ctx, refuse)).To(Succeed())
		Eventually(evicted(longest), 30*time.Second).Should(BeTrue())
		Eventually(events("StaleCertificateEvicted"), 10*time.Second).Should(ConsistOf(And(ContainSubstring("evicted pod web-1-a"), ContainSubstring("serial 0A"), ContainSubstring("serial 0B"))))
		gone(longest)
		Consistently(evicted(other), 5*time.Second).Should(BeFalse(), "nothing replaced web-1-a yet")

		By("a replacement, ready and current: web-1-b is evicted next")
		pod("web-1-c", 0)
		Eventually(evicted(other), 30*time.Second).Should(BeTrue())
		// Events are written after the eviction, by the recorder's own
		// goroutine.
		Eventually(events("StaleCertificateEvicted"), 10*time.Second).Should(HaveLen(2))
	})
})
