package controllers

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/webhookscope"
	"github.com/configward/configward/internal/workload"
)

// The probe configurations stand for the chart's: configward's two
// workload webhooks, pointed at an address where nothing listens. The
// validating one fails closed, so a dry-run create the API server sends to
// it fails and one its matchCondition keeps away succeeds: what the
// condition lets through is read from the answer, request by request. The
// mutating one fails open (an unreachable webhook is skipped), so only the
// validating webhook decides; both carry the same expression.
const scopeProbe = "configward-scope-probe"

// scopeProbeLabel selects the namespaces the probe webhooks judge, so the
// other specs never meet them.
const scopeProbeLabel = "scope-probe"

func scopeProbeConfigurations() []client.Object {
	dead := "https://127.0.0.1:1/"
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"", "apps", "batch"}, APIVersions: []string{"v1"},
			Resources: []string{"pods", "deployments", "statefulsets", "daemonsets", "replicasets", "jobs", "cronjobs"}},
	}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{scopeProbeLabel: "true"}}
	return []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: scopeProbe},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: webhookscope.ConfigHashWebhook,
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &dead}, Rules: rules, NamespaceSelector: selector,
				FailurePolicy: ptr.To(admissionregistrationv1.Ignore), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](2)}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: scopeProbe},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: webhookscope.ValidateWorkloadWebhook,
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &dead}, Rules: rules, NamespaceSelector: selector,
				FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](2)}}},
	}
}

// scopeConditions are the expressions of the condition on the probe's two
// webhooks ("" where it has none).
func scopeConditions() [2]string {
	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: scopeProbe}, &m)).To(Succeed())
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: scopeProbe}, &v)).To(Succeed())
	var out [2]string
	for i, obj := range []client.Object{&m, &v} {
		for _, c := range webhookscope.Current(obj, [2]string{webhookscope.ConfigHashWebhook, webhookscope.ValidateWorkloadWebhook}[i]) {
			if c.Name == webhookscope.WithConfigCondition {
				out[i] = c.Expression
			}
		}
	}
	return out
}

// sentToWebhook says whether the API server sent a dry-run create of o to
// the probe's validating webhook (which cannot answer, so the create fails
// with the API server's "failed calling webhook").
func sentToWebhook(o client.Object) bool { return sentToWebhookAs(env.Client, o) }

// sentToWebhookAs is sentToWebhook for a write c makes.
func sentToWebhookAs(c client.Client, o client.Object) bool {
	err := c.Create(ctx, o, client.DryRunAll)
	if err == nil {
		return false
	}
	if msg := err.Error(); !strings.Contains(msg, "failed calling webhook") {
		Fail(fmt.Sprintf("%T %s failed for another reason: ...%s", o, o.GetName(), msg[max(0, len(msg)-600):]))
	}
	return true
}

// as is a client that writes as user, in groups, and in a service
// account's groups when user is one.
func as(user string, groups ...string) client.Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	if ns, _, ok := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":"); ok && ns != user {
		cfg.Impersonate.Groups = append(cfg.Impersonate.Groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func podSpec(mutate func(*corev1.PodSpec)) corev1.PodSpec {
	s := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}
	if mutate != nil {
		mutate(&s)
	}
	return s
}

// deploymentWithRS is a ReplicaSet reading a ConfigMap, as a Deployment
// makes it.
func deploymentWithRS(ns, name string) *appsv1.ReplicaSet {
	d := deploymentWith(ns, name, func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}
	})
	return &appsv1.ReplicaSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
}

func deploymentWith(ns, name string, mutate func(*corev1.PodSpec)) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: podSpec(mutate)}}}
}

var _ = Describe("scoping the workload webhooks to writes that involve config", Ordered, func() {
	var ns string
	BeforeAll(func() {
		ns = namespace(map[string]string{scopeProbeLabel: "true"})
	})

	It("puts the same condition on both webhooks while no ConfigPolicy has custom rules", func() {
		Eventually(scopeConditions, 15*time.Second, 100*time.Millisecond).Should(HaveEach(Not(BeEmpty())))
		c := scopeConditions()
		Expect(c[0]).To(Equal(c[1]))
	})

	It("sends every write that references a ConfigMap or Secret or carries configward metadata, and no other", func() {
		// The API server loads webhook configurations asynchronously.
		Eventually(func() bool { return sentToWebhook(deploymentWith(ns, "probe", nil)) }, 10*time.Second, 100*time.Millisecond).Should(BeFalse())
		cmKey := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Key: "k"}}
		secretKey := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}
		forms := map[string]func(*corev1.PodSpec){
			"env from a ConfigMap key": func(s *corev1.PodSpec) { s.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: cmKey}} },
			"env from a Secret key":    func(s *corev1.PodSpec) { s.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: secretKey}} },
			"envFrom a ConfigMap": func(s *corev1.PodSpec) {
				s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}
			},
			"envFrom a Secret": func(s *corev1.PodSpec) {
				s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}
			},
			"a ConfigMap volume": func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}
			},
			"a Secret volume": func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
			},
			"a projected ConfigMap": func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{DownwardAPI: &corev1.DownwardAPIProjection{}}, {ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}}}}
			},
			"a projected Secret": func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}}}
			},
			"an init container's env": func(s *corev1.PodSpec) {
				s.InitContainers = []corev1.Container{{Name: "init", Image: "init:1", Env: []corev1.EnvVar{{Name: "A", ValueFrom: secretKey}}}}
			},
		}
		i := 0
		name := func() string { i++; return fmt.Sprintf("w%d", i) }
		for form, mutate := range forms {
			Expect(sentToWebhook(deploymentWith(ns, name(), mutate))).To(BeTrue(), "a Deployment reading %s", form)
		}
		Expect(sentToWebhook(deploymentWith(ns, name(), nil))).To(BeFalse(), "a Deployment that references no config")
		// Volumes and env that are not config are not sent.
		Expect(sentToWebhook(deploymentWith(ns, name(), func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{}}}}}}}
			s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}))).To(BeFalse(), "a Deployment with an emptyDir, a downward API volume and plain env")

		By("configward's metadata on the object or its template")
		withAnnotation := deploymentWith(ns, name(), nil)
		withAnnotation.Annotations = map[string]string{v1alpha1.RolloutAnnotation: v1alpha1.RolloutDisabled}
		Expect(sentToWebhook(withAnnotation)).To(BeTrue(), "an object annotation")
		staleHash := deploymentWith(ns, name(), nil)
		staleHash.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: "v2:stale"}
		Expect(sentToWebhook(staleHash)).To(BeTrue(), "a stale config hash on the template, which configward removes")
		withLabel := deploymentWith(ns, name(), nil)
		withLabel.Labels = map[string]string{"configward.dev/wave": "canary"}
		Expect(sentToWebhook(withLabel)).To(BeTrue(), "an object label")
		otherAnnotation := deploymentWith(ns, name(), nil)
		otherAnnotation.Annotations = map[string]string{"example.com/configward.dev": "x"}
		Expect(sentToWebhook(otherAnnotation)).To(BeFalse(), "another tool's annotation")

		By("every built-in kind, by its own template path")
		configRef := forms["env from a ConfigMap key"]
		labels := map[string]string{"app": "x"}
		template := func(mutate func(*corev1.PodSpec)) corev1.PodTemplateSpec {
			t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(mutate)}
			t.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			return t
		}
		for _, withConfig := range []bool{true, false} {
			var mutate func(*corev1.PodSpec)
			if withConfig {
				mutate = configRef
			}
			always := template(mutate)
			always.Spec.RestartPolicy = corev1.RestartPolicyAlways
			meta := func() metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name()} }
			selector := &metav1.LabelSelector{MatchLabels: labels}
			for _, o := range []client.Object{
				&corev1.Pod{ObjectMeta: meta(), Spec: podSpec(mutate)},
				&appsv1.StatefulSet{ObjectMeta: meta(), Spec: appsv1.StatefulSetSpec{Selector: selector, Template: always}},
				&appsv1.DaemonSet{ObjectMeta: meta(), Spec: appsv1.DaemonSetSpec{Selector: selector, Template: always}},
				&appsv1.ReplicaSet{ObjectMeta: meta(), Spec: appsv1.ReplicaSetSpec{Selector: selector, Template: always}},
				&batchv1.Job{ObjectMeta: meta(), Spec: batchv1.JobSpec{Template: template(mutate)}},
				&batchv1.CronJob{ObjectMeta: meta(), Spec: batchv1.CronJobSpec{Schedule: "@hourly",
					JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template(mutate)}}}},
			} {
				Expect(sentToWebhook(o)).To(Equal(withConfig), "%T with config: %v", o, withConfig)
			}
		}

		By("an object a workload kind controls is judged at its owner and never sent; one another controller owns is")
		owned := func(o client.Object, apiVersion, kind string, controller bool) client.Object {
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "6b8c2c1e-0000-4000-8000-000000000001", Controller: ptr.To(controller)}})
			return o
		}
		pod := func() *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name()}, Spec: podSpec(configRef)}
		}
		rsController, jobController := as("system:serviceaccount:kube-system:replicaset-controller"), as("system:serviceaccount:kube-system:job-controller")
		Expect(sentToWebhookAs(rsController, owned(pod(), "apps/v1", "ReplicaSet", true))).To(BeFalse(), "a Pod of a ReplicaSet, by its controller")
		// Without a service account per controller, kube-controller-manager
		// needs rights its bootstrap role lacks (creating pods); the cluster
		// grants them, here as a master.
		Expect(sentToWebhookAs(as(workload.ControllerManager, "system:masters"), owned(pod(), "apps/v1", "ReplicaSet", true))).To(BeFalse(),
			"a Pod of a ReplicaSet, by kube-controller-manager without a service account per controller")
		Expect(sentToWebhookAs(jobController, owned(pod(), "batch/v1", "Job", true))).To(BeFalse(), "a Pod of a Job, by its controller")
		Expect(sentToWebhookAs(as("system:serviceaccount:kube-system:deployment-controller"), owned(deploymentWithRS(ns, name()), "apps/v1", "Deployment", true))).
			To(BeFalse(), "a ReplicaSet of a Deployment, by its controller")
		Expect(sentToWebhookAs(rsController, owned(pod(), "example.com/v1", "ReplicaSet", true))).To(BeTrue(), "a Pod of another group's ReplicaSet")
		Expect(sentToWebhookAs(rsController, owned(pod(), "apps/v1", "ReplicaSet", false))).To(BeTrue(), "a Pod a ReplicaSet owns but does not control")

		By("a controller reference anyone else writes is sent: a person, another controller")
		Expect(sentToWebhook(owned(pod(), "apps/v1", "ReplicaSet", true))).To(BeTrue(), "a Pod naming a ReplicaSet, by a person")
		Expect(sentToWebhook(owned(deploymentWithRS(ns, name()), "apps/v1", "Deployment", true))).To(BeTrue(), "a ReplicaSet naming a Deployment, by a person")
		Expect(sentToWebhookAs(jobController, owned(pod(), "apps/v1", "ReplicaSet", true))).To(BeTrue(), "a Pod naming a ReplicaSet, by the Job controller")

		By("an update that adds config is sent, as is any update of an object carrying configward metadata")
		d := deploymentWith(ns, "updated", nil)
		Expect(env.Client.Create(ctx, d)).To(Succeed(), "a Deployment without config is written without configward")
		forms["a ConfigMap volume"](&d.Spec.Template.Spec)
		err := env.Client.Update(ctx, d, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("failed calling webhook")))
	})

	It("takes the condition off while a ConfigPolicy has custom rules, which may judge any workload, and puts it back after", func() {
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "scope-custom"},
			Spec: v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: `package configward.custom.no_latest

findings contains f if {
	some c in input.object.spec.template.spec.containers
	endswith(c.image, ":latest")
	f := {"rule": "no-latest", "path": "spec.template.spec.containers", "message": "a :latest image"}
}
`}}}}
		Expect(env.Client.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { _ = env.Client.Delete(ctx, policy) })
		Eventually(scopeConditions, 15*time.Second, 100*time.Millisecond).Should(Equal([2]string{"", ""}))
		Expect(sentToWebhook(deploymentWith(ns, "no-config-custom", nil))).To(BeTrue(), "a Deployment without config, with custom rules in force")
		ownedPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owned-custom", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "owner", UID: "6b8c2c1e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}}, Spec: podSpec(nil)}
		Expect(sentToWebhookAs(as("system:serviceaccount:kube-system:replicaset-controller"), ownedPod)).To(BeFalse(),
			"a ReplicaSet's Pod, by its controller: judged at its owner, custom rules or not")
		Expect(sentToWebhook(ownedPod)).To(BeTrue(), "a Pod naming a ReplicaSet, by a person")

		Expect(env.Client.Delete(ctx, policy)).To(Succeed())
		Eventually(scopeConditions, 15*time.Second, 100*time.Millisecond).Should(HaveEach(Not(BeEmpty())))
		Eventually(func() bool { return sentToWebhook(deploymentWith(ns, "no-config-again", nil)) }, 10*time.Second, 200*time.Millisecond).Should(BeFalse())
	})
})
