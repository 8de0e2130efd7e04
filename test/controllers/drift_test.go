package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// stampedWith sets the config hash on a Deployment's template, as the
// mutating webhook would have.
func stampedWith(d *appsv1.Deployment, hash string) *appsv1.Deployment {
	d.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: hash}
	return d
}

// podOf is a pod a ReplicaSet of the Deployment made, started with hash.
func podOf(rs *appsv1.ReplicaSet, name, hash string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: rs.Spec.Template.Labels,
			Annotations:     map[string]string{v1alpha1.ConfigHashAnnotation: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

var _ = Describe("the drift controller", func() {
	It("reports, per workload, whether its pods run the config it has now", func() {
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		create(cm)
		d := stampedWith(deployment(ns, "web", "cfg"), hashOf(cm))
		create(d)
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: d.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
		}
		create(rs)
		current, stale := podOf(rs, "web-1-a", hashOf(cm)), podOf(rs, "web-1-b", "hmac-sha256:an-older-config")
		create(current, stale)
		Eventually(results(d), 10*time.Second).Should(ConsistOf("config-current fail progressing"))

		By("once the pod on the older config is gone, every pod runs the current config")
		Expect(env.Client.Delete(ctx, stale)).To(Succeed())
		Eventually(results(d), 10*time.Second).Should(ConsistOf("config-current pass done"))
	})
})

var _ = Describe("the Reports' findings on existing objects", func() {
	It("judge a workload with the rollout settings of its namespace's ConfigPolicies", func() {
		const label = "controllers.configward.dev/rollouts"
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rollouts-off"}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "off"}},
			Rollouts:          v1alpha1.RolloutSettings{Disabled: true},
		}}
		create(policy)
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, policy)).To(Succeed()) })
		Eventually(ready(policy), 10*time.Second).Should(Equal(metav1.ConditionTrue))

		subPath := func(ns string) *appsv1.Deployment {
			cm := configMap(ns, "cfg", "port: 80")
			d := deployment(ns, "web", "cfg")
			d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
			d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app/app.yaml", SubPath: "app.yaml"}}
			stampedWith(d, hashOf(create1(cm)))
			create(d)
			return d
		}
		off := subPath(namespace(map[string]string{label: "off"}))
		on := subPath(namespace(nil))
		// Rollouts bring the change where they are on; where a policy turns
		// them off, nothing would, and subpath-config warns.
		Eventually(results(off), 10*time.Second).Should(ContainElement("subpath-config warn Warn"))
		Eventually(results(on), 10*time.Second).Should(ContainElement(HavePrefix("config-current")))
		Consistently(results(on), time.Second).ShouldNot(ContainElement(HavePrefix("subpath-config")))
	})

	It("judge a ConfigMap by the ConfigSchema that governs it", func() {
		ns := namespace(nil)
		cs := &v1alpha1.ConfigSchema{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: v1alpha1.ConfigSchemaSpec{
			ConfigMapNames: []string{"app"},
			Keys: []v1alpha1.KeySchema{{Name: "app.yaml", Format: "yaml", Required: true,
				Schema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":["port"]}`)}}},
		}}
		create(cs)
		Eventually(ready(cs), 10*time.Second).Should(Equal(metav1.ConditionTrue))
		cm := configMap(ns, "app", "host: example")
		create(cm)
		Eventually(results(cm), 10*time.Second).Should(ConsistOf("config-schema fail Deny"))
		setValue(cm, "port: 80")
		Eventually(results(cm), 10*time.Second).Should(BeEmpty())
	})
})

// create1 creates one object and returns it.
func create1[T client.Object](obj T) T {
	create(obj)
	return obj
}

// ready is the status of the Ready condition a reconciler set on a
// ConfigPolicy or ConfigSchema, for its current generation.
func ready(obj client.Object) func() metav1.ConditionStatus {
	return func() metav1.ConditionStatus {
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		var conds []metav1.Condition
		var observed int64
		switch o := obj.(type) {
		case *v1alpha1.ConfigPolicy:
			conds, observed = o.Status.Conditions, o.Status.ObservedGeneration
		case *v1alpha1.ConfigSchema:
			conds, observed = o.Status.Conditions, o.Status.ObservedGeneration
		}
		c := meta.FindStatusCondition(conds, "Ready")
		if c == nil || observed != obj.GetGeneration() {
			return ""
		}
		return c.Status
	}
}

var _ = Describe("the ConfigPolicy reconciler", func() {
	It("says whether the controller may write the snapshots a policy's revisions need", func() {
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "revisions"}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"controllers.configward.dev/revisions": "on"}},
			Revisions:         v1alpha1.RevisionSettings{Enabled: true, Secrets: true},
		}}
		create(policy)
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, policy)).To(Succeed()) })
		Eventually(func() string {
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			c := meta.FindStatusCondition(policy.Status.Conditions, v1alpha1.ConditionRevisionsReady)
			if c == nil {
				return ""
			}
			return string(c.Status) + " " + c.Reason
		}, 10*time.Second).Should(Equal("True SnapshotsWritable"), "the suite's controller runs with every right")
	})
})
