package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/test/framework"
)

var ctx = context.Background()

// configKey is the one key of the specs' ConfigMaps and Secrets.
const configKey = "app.yaml"

func configMap(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{configKey: value}}
}

// podTemplate reads ConfigMap cm through envFrom.
func podTemplate(name, cm string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}},
	}
}

func deployment(ns, name, cm string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, cm)},
	}
}

func create(objs ...client.Object) {
	for _, o := range objs {
		Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
}

// afterCreationSecond waits until the clock (the API server's: this
// machine's) is past the second obj was created in.
func afterCreationSecond(obj client.Object) {
	time.Sleep(time.Until(obj.GetCreationTimestamp().Truncate(time.Second).Add(time.Second)))
}

// setValue changes the ConfigMap's one value.
func setValue(cm *corev1.ConfigMap, value string) { writeAs(cm, value, "controllers-suite") }

// templateHash is the config hash on a Deployment's pod template, as stored.
func templateHash(d *appsv1.Deployment) func() string {
	return func() string {
		var got appsv1.Deployment
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), &got)).To(Succeed())
		return got.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]
	}
}

// hashOf is the hash of a template reading every key of the stored
// ConfigMaps cms (of one namespace), as configward computes it.
func hashOf(cms ...*corev1.ConfigMap) string {
	key, err := env.HashKey(ctx)
	Expect(err).NotTo(HaveOccurred())
	var entries []digest.Entry
	for _, cm := range cms {
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		entries = append(entries, digest.Entry{Kind: "ConfigMap", Name: cm.Name, Content: digest.Content(digest.KeyDigests(cm.Data, cm.BinaryData), nil)})
	}
	return digest.PodTemplateHash(key, cms[0].Namespace, entries)
}

// events lists the notes of the Events of one reason on the object named.
func events(ns, name, reason string) func() []string {
	return framework.Events(env.Client, ns, name, reason)
}

// results lists the results of the Report configward keeps on obj, as
// "rule result action".
func results(obj client.Object) func() []string { return framework.ReportResults(env.Client, obj) }

func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

// policyNamespace creates a namespace and a ConfigPolicy named name that
// selects it alone, its spec set by set, and waits for the policy to be
// in force.
func policyNamespace(name string, set func(*v1alpha1.ConfigPolicySpec)) string {
	return namespace(configPolicy(name, set))
}

// configPolicy creates a ConfigPolicy named name, its spec set by set,
// that selects the namespaces with the labels it returns, and waits for
// it to be in force. It is deleted with the spec, unless the spec did.
func configPolicy(name string, set func(*v1alpha1.ConfigPolicySpec)) map[string]string {
	labels := map[string]string{"controllers.configward.dev/" + name: "on"}
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: labels},
	}}
	set(&policy.Spec)
	create(policy)
	DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, policy))).To(Succeed()) })
	Eventually(ready(policy), 10*time.Second).Should(Equal(metav1.ConditionTrue))
	return labels
}

// setPolicy changes the spec of ConfigPolicy name by set and waits for the
// change to be in force.
func setPolicy(name string, set func(*v1alpha1.ConfigPolicySpec)) {
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(env.Client.Get(ctx, clientKey(policy), policy)).To(Succeed())
	set(&policy.Spec)
	Expect(env.Client.Update(ctx, policy)).To(Succeed())
	Eventually(ready(policy), 10*time.Second).Should(Equal(metav1.ConditionTrue))
}
