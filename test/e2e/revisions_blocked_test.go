package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/scheme"
)

// The refusing webhook stands for whatever refuses configward's controller
// a snapshot write: configward's own webhook started without the
// controller's identity (make demo once did), or a policy engine. It
// refuses every ConfigMap create that looks like a snapshot in namespaces
// labelled refuseSnapshotsLabel=true, as configward's does: with a 403.
const (
	refuseSnapshotsPath  = "/e2e-refuse-snapshots"
	refuseSnapshotsLabel = "e2e.configward.dev/refuse-snapshots"
	refuseSnapshotsHook  = "refuse-snapshots.e2e.configward.dev"
)

func registerSnapshotRefuser(p *manager.WebhookProcess) {
	p.Server.Register(refuseSnapshotsPath, &admission.Webhook{
		Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			var cm corev1.ConfigMap
			if err := admission.NewDecoder(scheme.Scheme()).Decode(req, &cm); err != nil {
				return admission.Errored(400, err)
			}
			if cm.Labels[v1alpha1.SnapshotLabel] == v1alpha1.SnapshotLabelValue {
				return admission.Denied(fmt.Sprintf("[e2e-policy-engine] ConfigMap %s/%s looks like a snapshot; %s may not create it", cm.Namespace, cm.Name, req.UserInfo.Username))
			}
			return admission.Allowed("")
		}),
	})
}

// refuseSnapshotsIn installs the refusing webhook for namespaces labelled
// for it; the returned func takes it away.
func refuseSnapshotsIn() func() {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "configward-e2e-refuse-snapshots"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         refuseSnapshotsHook,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "unused", Path: ptr.To(refuseSnapshotsPath)}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{refuseSnapshotsLabel: "true"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	env.PointAtLocalWebhook(cfg)
	Expect(env.Client.Create(context.Background(), cfg)).To(Succeed())
	removed := false
	remove := func() {
		if !removed {
			removed = true
			Expect(client.IgnoreNotFound(env.Client.Delete(context.Background(), cfg))).To(Succeed())
		}
	}
	DeferCleanup(remove)
	return remove
}

// revisionsReady is a ConfigPolicy's RevisionsReady condition.
func revisionsReady(name string) func() metav1.Condition {
	return func() metav1.Condition {
		var cp v1alpha1.ConfigPolicy
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &cp); err != nil {
			return metav1.Condition{}
		}
		if c := meta.FindStatusCondition(cp.Status.Conditions, v1alpha1.ConditionRevisionsReady); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
}

// namespaceAnnotation is one annotation of a namespace.
func namespaceAnnotation(ns, key string) func() string {
	return func() string {
		var n corev1.Namespace
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)).To(Succeed())
		return n.Annotations[key]
	}
}

// warningsIn lists the reasons and notes of the Warning Events of ns, as
// "Kind/name Reason: note".
func warningsIn(ns string) []string {
	var list eventsv1.EventList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, fmt.Sprintf("%s/%s %s: %s", e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note))
		}
	}
	return out
}

// templateOf is a Deployment's pod template annotations and generation.
func templateOf(ns, name string) (map[string]string, int64) {
	var d appsv1.Deployment
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return d.Spec.Template.Annotations, d.Generation
}

var _ = Describe("config revisions when config goes or snapshots cannot be written", func() {
	It("rolls nothing when the pipeline deletes a covered ConfigMap: scale-ups and rollout undo keep the revision's snapshot, and a new workload's pods start without a Warning", func() {
		// The pipeline's delete of config in use is warned, not refused,
		// as it is where change control names a pipeline.
		ns := newNamespace("revisions", map[string]string{policyLabel: "gone"})
		applyPolicy(policyYAML("revisions-gone", "gone", "revisions: {enabled: true}\nrules: {config-in-use-delete: {action: Warn}}"))
		Eventually(policyReady("revisions-gone"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		cm := func(level string) string { return configMap(ns, "cfg", map[string]string{"level": level}, nil) }
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"cfg": nil}, replicatedDeployment(ns, "web", "cfg", 2))
		rolloutStatus(ns, "deployment/web")
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info"))
		Expect(warningsIn(ns)).NotTo(ContainElement(ContainSubstring("FailedCreate")), "the first pods of a new workload wait for its snapshot instead of being refused")
		apply(cm("debug"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("debug", "debug"))
		rolloutStatus(ns, "deployment/web")
		before, generation := templateOf(ns, "web")

		By("the pipeline deletes cfg, which web still reads: warned, and nothing moves")
		res := env.Kubectl("", "delete", "configmap", "cfg", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("[config-in-use-delete]"))
		Expect(res.Stderr).To(ContainSubstring("go on reading that snapshot"))
		Consistently(func() int64 { _, g := templateOf(ns, "web"); return g }, 3*rolloutBatchWindow+2*time.Second, 250*time.Millisecond).Should(Equal(generation))

		By("a scale-up: the controller looks again, rolls nothing, and the new pods read the revision's snapshot")
		Expect(env.Kubectl("", "scale", "deployment/web", "--replicas=4", "-n", ns).ExitCode).To(Equal(0))
		rolloutStatus(ns, "deployment/web")
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("debug", "debug", "debug", "debug"))
		Consistently(func() map[string]string { a, _ := templateOf(ns, "web"); return a }, 3*rolloutBatchWindow, 250*time.Millisecond).Should(Equal(before))
		Expect(eventsFor(ns, "web", "ConfigChanged")).To(HaveLen(1), "only the change before the delete rolled it")

		By("kubectl rollout undo to the first revision: its snapshot stands for the deleted ConfigMap")
		res = env.Kubectl("", "rollout", "undo", "deployment/web", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		rolloutStatus(ns, "deployment/web")
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info", "info", "info"))
		Consistently(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, 3*rolloutBatchWindow, 250*time.Millisecond).Should(ConsistOf("info", "info", "info", "info"))
	})

	It("rolls nothing when a delivered ConfigMap is deleted under an open delivery, and a first wave that asks for approval waits for it", func() {
		ns := deliveryNamespace("gone", `waves:
- name: canary
  selector: {matchLabels: {configward.dev/wave: canary}}
  approval: true
- name: rest
  approval: true
soakSeconds: 1
`, "rules: {config-in-use-delete: {action: Warn}}")
		old := snapshotOfCfg(ns, "app-0")
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@canary"))
		Consistently(func() string { return snapshotOfCfg(ns, "app-7") }, 2*rolloutBatchWindow+time.Second, 250*time.Millisecond).Should(Equal(old),
			"nothing moves before a person promotes the first wave")
		Expect(env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/cfg").ExitCode).To(Equal(0))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		rolloutStatus(ns, "deployment/app-7")
		generations := map[string]int64{}
		for i := range 10 {
			_, generations[fmt.Sprintf("app-%d", i)] = templateOf(ns, fmt.Sprintf("app-%d", i))
		}

		By("the pipeline deletes cfg: the delivery is cancelled, and no consumer is re-stamped")
		res := env.Kubectl("", "delete", "configmap", "cfg", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "cfg"), rolloutTimeout, time.Second).Should(HavePrefix("Cancelled/"))
		Consistently(func() map[string]int64 {
			out := map[string]int64{}
			for name := range generations {
				_, out[name] = templateOf(ns, name)
			}
			return out
		}, 3*rolloutBatchWindow+2*time.Second, 500*time.Millisecond).Should(Equal(generations))

		By("a scale-up of a consumer the delivery had not reached: its new pods read its old snapshot")
		Expect(env.Kubectl("", "scale", "deployment/app-0", "--replicas=2", "-n", ns).ExitCode).To(Equal(0))
		rolloutStatus(ns, "deployment/app-0")
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-0", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info"))
		Expect(eventsFor(ns, "app-7", "ConfigChanged")).To(ConsistOf(ContainSubstring("ConfigMap/cfg (delivery configmap-cfg-1, wave canary) changed")),
			"the config is named once, with the wave that moved it")
	})

	It("starts a new workload's pods when a ResourceQuota refuses its snapshots, says so, and pins again once the quota allows", func() {
		ns := revisionsNamespace("blocked-quota", "enabled: true")
		apply(configMap(ns, "cfg", map[string]string{"level": "info"}, nil))
		quota := configMapQuota(ns, 0)

		apply(replicatedDeployment(ns, "web", "cfg", 2))
		rolloutStatus(ns, "deployment/web")
		Eventually(func() []string { return readsOf(ns, "web", "level")() }, rolloutTimeout).Should(ConsistOf("cfg=info", "cfg=info"),
			"its pods start, reading the original")
		Expect(namespaceAnnotation(ns, v1alpha1.SnapshotsBlockedAnnotation)()).To(ContainSubstring("quota"))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigRevisionBlocked") }, 10*time.Second).Should(ContainElement(And(
			ContainSubstring("cannot be written"), ContainSubstring("exceeded quota"), ContainSubstring("RevisionsReady"))))
		Eventually(revisionsReady("revisions-blocked-quota"), 20*time.Second).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", v1alpha1.ReasonSnapshotsBlocked), HaveField("Message", ContainSubstring("exceeded quota"))))
		Eventually(func() string { return env.KubectlPlugin("status", "-n", ns).Stdout }, 20*time.Second).Should(
			ContainSubstring("Deployment/web: blocked: config snapshots cannot be written"))

		By("the quota is raised: the mark goes, the condition turns True, and the next change pins again")
		quota.Spec.Hard = corev1.ResourceList{"count/configmaps": resource.MustParse("100")}
		Expect(env.Client.Update(context.Background(), quota)).To(Succeed())
		Eventually(namespaceAnnotation(ns, v1alpha1.SnapshotsBlockedAnnotation), 40*time.Second).Should(BeEmpty())
		Eventually(revisionsReady("revisions-blocked-quota"), 40*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(readsOf(ns, "web", "level"), rolloutTimeout).Should(And(HaveLen(2), HaveEach(MatchRegexp(`^cfg-[0-9a-f]{10}=debug$`))),
			"pods name a snapshot again")
	})

	It("starts a new workload's pods and halts a delivery when an admission webhook refuses configward's snapshots, and recovers when it goes", func() {
		const tag = "refused"
		ns := newNamespace("delivery", map[string]string{policyLabel: tag, refuseSnapshotsLabel: "true"})
		stop := refuseSnapshotsIn()
		applyPolicy(policyYAML("delivery-"+tag, tag, "revisions: {enabled: true}\ndelivery:\n  waves: [{name: all}]\n  soakSeconds: 1\n"))
		Eventually(revisionsReady("delivery-"+tag), 20*time.Second).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", v1alpha1.ReasonSnapshotsRefused), HaveField("Message", ContainSubstring("e2e-policy-engine"))),
			"the trial write at the policy's start already says what refuses it")
		apply(configMap(ns, "cfg", map[string]string{"level": "info"}, nil))
		apply(replicatedDeployment(ns, "web", "cfg", 1))
		rolloutStatus(ns, "deployment/web")
		Eventually(func() []string { return readsOf(ns, "web", "level")() }, rolloutTimeout).Should(ConsistOf("cfg=info"))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigRevisionBlocked") }, 10*time.Second).Should(ContainElement(ContainSubstring("e2e-policy-engine")))

		By("a change of the delivered ConfigMap: its delivery halts before its first wave, with the refusal in its record")
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), rolloutTimeout, time.Second).Should(Equal("Halted/SnapshotsBlocked@"))
		Expect(deliveries(ns, "cfg")[0].Status.Message).To(ContainSubstring("e2e-policy-engine"))

		By("the refusing webhook goes: the condition turns True again")
		stop()
		Eventually(revisionsReady("delivery-"+tag), 60*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(namespaceAnnotation(ns, v1alpha1.SnapshotsBlockedAnnotation), 40*time.Second).Should(BeEmpty())
	})
})

// A channel configward cannot write is never mounted: where snapshots are
// blocked (here a ResourceQuota full), a new hot ConfigMap gets no
// channels, and a pod pointed at one would wait for it forever.
var _ = Describe("hot config whose channels cannot be written", func() {
	It("points no pod at a channel configward cannot write: the pod reads the original, and its other hot config its channel", func() {
		ns := hotDeliveryNamespace("blocked-channels", halfOfA+"- name: rest\nsoakSeconds: 0\n")
		// Room for the pipeline's banner, none for its snapshot or channels.
		configMapQuota(ns, 1)
		apply(hotConfigMap(ns, "banner", map[string]string{"text": "hello"}))
		Eventually(namespaceAnnotation(ns, v1alpha1.SnapshotsBlockedAnnotation), 30*time.Second).Should(ContainSubstring("quota"))
		apply(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: c, namespace: %s, labels: {app: c}}
spec:
  replicas: 1
  selector: {matchLabels: {app: c}}
  template:
    metadata: {labels: {app: c}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts: [{name: flags, mountPath: /etc/flags}, {name: banner, mountPath: /etc/banner}]
      volumes: [{name: flags, configMap: {name: flags}}, {name: banner, configMap: {name: banner}}]
`, ns))
		rolloutStatus(ns, "deployment/c")
		pods := livePods(ns, "c")
		Expect(pods).To(HaveLen(1))
		var named []string
		for _, v := range pods[0].Spec.Volumes {
			if v.ConfigMap != nil {
				named = append(named, v.ConfigMap.Name)
			}
		}
		Expect(named).To(ConsistOf("flags-ch-rest", "banner"), "flags' channels exist; banner's cannot be written")
		var list corev1.ConfigMapList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
		for _, c := range list.Items {
			Expect(c.Name).NotTo(HavePrefix("banner-ch-"), "no channel of banner was written")
		}
	})
})

// configMapQuota creates a ResourceQuota that lets ns hold room more
// ConfigMaps than it holds now, and waits until the quota controller has
// counted the namespace.
func configMapQuota(ns string, room int) *corev1.ResourceQuota {
	var cms corev1.ConfigMapList
	Expect(env.Client.List(context.Background(), &cms, client.InNamespace(ns))).To(Succeed())
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmaps"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": *resource.NewQuantity(int64(len(cms.Items)+room), resource.DecimalSI)}}}
	Expect(env.Client.Create(context.Background(), quota)).To(Succeed())
	Eventually(func() corev1.ResourceList {
		Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(quota), quota)).To(Succeed())
		return quota.Status.Hard
	}, 10*time.Second).ShouldNot(BeEmpty(), "the quota controller has counted the namespace")
	return quota
}
