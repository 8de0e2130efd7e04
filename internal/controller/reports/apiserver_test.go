package reports_test

import (
	"context"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/test/framework"
)

// The drift controller against kube-apiserver and etcd alone (see
// framework.ControllerSuite): what it writes in Reports and gauges from
// workloads, pods and config the specs write as other controllers would.
// reports_test.go holds the decisions that need no cluster.

var suite = framework.NewControllerSuite(manager.Controller{RolloutBatchWindow: 500 * time.Millisecond, StaleCertGrace: 3 * time.Second})

func TestAgainstAPIServer(t *testing.T) {
	suite.Run(t, "the drift controller against kube-apiserver and etcd")
}

var ctx = context.Background()

// stamped is a Deployment whose template runs container, stamped with
// hash as the webhook would have.
func stamped(ns, name, hash string, pod corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name},
			Annotations: map[string]string{v1alpha1.ConfigHashAnnotation: hash}}, Spec: pod}}}
}

// replicaSet is d's ReplicaSet, as the Deployment controller would write
// it.
func replicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
}

// podOf is a pod rs made, with its template's annotations, started with
// the config hash given.
func podOf(rs *appsv1.ReplicaSet, name, hash string) *corev1.Pod {
	annotations := maps.Clone(rs.Spec.Template.Annotations)
	annotations[v1alpha1.ConfigHashAnnotation] = hash
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: rs.Spec.Template.Labels,
		Annotations:     annotations,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: rs.Spec.Template.Spec}
}

// hashOf is the config hash of a template reading every key of each
// entry, as configward computes it.
func hashOf(ns string, entries ...digest.Entry) string {
	key, err := suite.Env.HashKey(ctx)
	Expect(err).NotTo(HaveOccurred())
	return digest.PodTemplateHash(key, ns, entries)
}

func configMapEntry(cm *corev1.ConfigMap) digest.Entry {
	return digest.Entry{Kind: "ConfigMap", Name: cm.Name, Content: digest.Content(digest.KeyDigests(cm.Data, cm.BinaryData), nil)}
}

// staleGauges are the namespace's stale workloads and stale pods.
func staleGauges(ns string) func() []float64 {
	return func() []float64 {
		labels := map[string]string{"namespace": ns}
		return []float64{framework.Metric("configward_stale_workloads", labels), framework.Metric("configward_stale_pods", labels)}
	}
}

func results(obj client.Object) func() []string {
	return framework.ReportResults(suite.Env.Client, obj)
}

var _ = Describe("the drift controller", func() {
	It("reports a stamped workload whose pods run older config, in its Report and the namespace's gauges, until they are replaced, and deletes its Report once it is gone", func() {
		ns := suite.Namespace(nil)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"app.yaml": "port: 80"}}
		suite.Create(cm)
		current := hashOf(ns, configMapEntry(cm))
		d := stamped(ns, "web", current, corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}})
		suite.Create(d)
		rs := replicaSet(d)
		suite.Create(rs)
		older := []*corev1.Pod{podOf(rs, "web-1-b", "hmac-sha256:an-older-config"), podOf(rs, "web-1-c", "hmac-sha256:an-older-config")}
		suite.Create(podOf(rs, "web-1-a", current), older[0], older[1])
		Eventually(results(d), 10*time.Second).Should(ConsistOf("config-current fail progressing"))
		Eventually(staleGauges(ns), 10*time.Second).Should(Equal([]float64{1, 2}))
		Expect(framework.StoredReport(suite.Env.Client, d)().Summary).To(HaveField("Fail", 1))

		By("once the pods on older config are replaced, every pod runs the current config")
		for _, p := range older {
			Expect(suite.Env.Client.Delete(ctx, p)).To(Succeed())
		}
		Eventually(results(d), 10*time.Second).Should(ConsistOf("config-current pass done"))
		Eventually(staleGauges(ns), 10*time.Second).Should(Equal([]float64{0, 0}))

		By("the workload deleted, its Report goes with it (no garbage collector runs here)")
		uid := d.UID
		Expect(suite.Env.Client.Delete(ctx, d)).To(Succeed())
		Eventually(func() error {
			return suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: report.Name(uid)}, &openreports.Report{})
		}, 10*time.Second).Should(Satisfy(apierrors.IsNotFound))
	})

	It("reports what pods made of hot config and which Secret a workload reads, and no Report holds a Secret's value in any form", func() {
		ns := suite.Namespace(nil)
		values := []string{"CANARY-reports-creds-1", "CANARY-reports-live-1"}
		creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte(values[0])}}
		live := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live", Annotations: map[string]string{v1alpha1.ReloadAnnotation: "hot"}},
			Data: map[string][]byte{"token": []byte(values[1])}}
		suite.Create(creds, live)
		// creds rolls (through env); live is hot, mounted as a directory,
		// with the reload agent beside the app.
		d := stamped(ns, "api", hashOf(ns, digest.Entry{Kind: "Secret", Name: "creds", Content: digest.Content(digest.SecretKeyDigests(creds.Data), nil)}), corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: reload.AgentContainer, Image: framework.AgentImage, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers: []corev1.Container{{Name: "app", Image: "app:1",
				EnvFrom:      []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "live", MountPath: "/etc/live"}}}},
			Volumes: []corev1.Volume{{Name: "live", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "live"}}}},
		})
		d.Spec.Template.Annotations[v1alpha1.ReloadAgentAnnotation] = "watch"
		suite.Create(d)
		rs := replicaSet(d)
		suite.Create(rs)

		By("the agents report: one pod's program applied the live Secret's content, the other's rejected it")
		key, err := suite.Env.HashKey(ctx)
		Expect(err).NotTo(HaveOccurred())
		content := reload.ContentID(key, ns, "Secret", "live", digest.SecretKeyDigests(live.Data))
		now := time.Now().UTC().Truncate(time.Second)
		for name, entry := range map[string]reload.PodEntry{
			"api-1-a": {Config: "Secret/live", Content: content, Result: reload.Applied, SwappedAt: now, At: now},
			// The webhook withholds what a program says of a Secret.
			"api-1-b": {Config: "Secret/live", Content: content, Result: reload.Rejected, Message: reload.Withheld, SwappedAt: now, At: now},
		} {
			p := podOf(rs, name, d.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation])
			suite.Create(p)
			p.Status.Conditions = []corev1.PodCondition{reload.Condition([]reload.PodEntry{entry})}
			Expect(suite.Env.Client.Status().Update(ctx, p)).To(Succeed())
		}
		Eventually(results(d), 10*time.Second).Should(ContainElements("config-current pass done", HavePrefix("config-reload fail"), "secret-in-env warn Warn"))
		reloadPods := func(state string) float64 {
			return framework.Metric("configward_reload_pods", map[string]string{"namespace": ns, "state": state})
		}
		Expect([]float64{reloadPods("applied"), reloadPods("rejected")}).To(Equal([]float64{1, 1}))
		Expect(framework.Leaks(reportsIn(ns), values...)).To(BeEmpty())

		By("both Secrets change: the pods run older content, and the new values do not reach a Report either")
		values = append(values, "CANARY-reports-creds-2", "CANARY-reports-live-2")
		creds.Data["password"], live.Data["token"] = []byte(values[2]), []byte(values[3])
		Expect(suite.Env.Client.Update(ctx, creds)).To(Succeed())
		Expect(suite.Env.Client.Update(ctx, live)).To(Succeed())
		// The rollout controller re-stamps the template: pending, then
		// progressing (nothing replaces the pods here).
		Eventually(results(d), 10*time.Second).Should(ContainElements(MatchRegexp("^config-current fail (pending|progressing)$"), HavePrefix("config-reload warn")))
		Expect(framework.Leaks(reportsIn(ns), values...)).To(BeEmpty())
	})
})

var _ = Describe("served certificates", func() {
	It("reports pods presenting a stale certificate: warn within the grace, fail past it with nothing else changing, the gauges per workload", func() {
		ns := suite.Namespace(nil)
		tlsSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-tls", Annotations: map[string]string{v1alpha1.ReloadAnnotation: "hot"}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("CANARY-served-key")}}
		suite.Create(tlsSecret)
		cert := reload.ServingCert{Port: 8443, Secret: "web-tls"}
		certVolume, certMount := reload.CertVolume(cert)
		d := stamped(ns, "web", "", corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: reload.AgentContainer, Image: framework.AgentImage, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				VolumeMounts: []corev1.VolumeMount{certMount}}},
			Containers: []corev1.Container{{Name: "web", Image: "web:1", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/tls"}}}},
			Volumes:    []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls"}}}, certVolume},
		})
		delete(d.Spec.Template.Annotations, v1alpha1.ConfigHashAnnotation)
		d.Spec.Template.Annotations[v1alpha1.ServingCertAnnotation] = "8443"
		suite.Create(d)
		rs := replicaSet(d)
		suite.Create(rs)

		day := time.Now().UTC().Truncate(time.Second)
		renewed := reload.Leaf{Serial: "0B", NotBefore: day.Add(-time.Hour), NotAfter: day.Add(90 * 24 * time.Hour), SHA256: "bb"}
		old := reload.Leaf{Serial: "0A", NotBefore: day.Add(-48 * time.Hour), NotAfter: day.Add(30 * 24 * time.Hour), SHA256: "aa"}
		for name, e := range map[string]reload.CertEntry{
			"web-1-a": {Port: 8443, Secret: "web-tls", Result: reload.CertCurrent, Presented: &renewed, Mounted: renewed, MountedCurrent: true, Since: day},
			"web-1-b": {Port: 8443, Secret: "web-tls", Result: reload.CertStale, Presented: &old, Mounted: renewed, MountedCurrent: true, Since: time.Now().UTC()},
		} {
			p := podOf(rs, name, "")
			suite.Create(p)
			p.Status.Conditions = []corev1.PodCondition{reload.CertCondition([]reload.CertEntry{e})}
			Expect(suite.Env.Client.Status().Update(ctx, p)).To(Succeed())
		}
		Eventually(results(d), 10*time.Second).Should(ContainElement(HavePrefix("certificate-served warn")))
		labels := map[string]string{"namespace": ns, "workload": "Deployment/web"}
		Expect(framework.Metric("configward_served_certificate_stale_pods", labels)).To(Equal(1.0))
		Expect(framework.Metric("configward_served_certificate_expiry_timestamp_seconds", labels)).To(Equal(float64(old.NotAfter.Unix())))

		By("the grace passes and nothing is written: the result fails by time alone")
		Eventually(results(d), 10*time.Second).Should(ContainElement(HavePrefix("certificate-served fail")))
		Expect(framework.Leaks(reportsIn(ns), "CANARY-served-key")).To(BeEmpty())

		By("the stale pod replaced by one presenting the renewal, it passes and the gauge says none")
		Expect(suite.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1-b"}})).To(Succeed())
		Eventually(results(d), 10*time.Second).Should(ContainElement(HavePrefix("certificate-served pass")))
		Eventually(func() float64 { return framework.Metric("configward_served_certificate_stale_pods", labels) }, 10*time.Second).Should(Equal(0.0))
	})
})

// reportsIn lists the Reports of ns, as stored.
func reportsIn(ns string) []openreports.Report {
	var list openreports.ReportList
	Expect(suite.Env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	Expect(list.Items).NotTo(BeEmpty())
	return list.Items
}
