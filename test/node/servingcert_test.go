package node

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/test/framework"
)

// The workloads of the served-certificate spec, and their Secret.
const (
	servedSecret = "web-tls"
	promApp      = "prom"
	onceApp      = "once"
	promPort     = 9090
	oncePort     = 8443
)

// cert-manager issues a certificate into a hot Secret two workloads mount:
// Prometheus, which reads its certificate at each handshake
// (--web.config.file, tls_server_config), and tlsonce, which loads it once.
// A renewal, asked for as `cmctl renew` does, reaches both pods' files;
// each pod's reload agent dials its port and says what it presents.
// Prometheus stays current; tlsonce turns stale, is reported, and, asking
// for it, is evicted one pod at a time with its PodDisruptionBudget held,
// its replacement current.
var _ = Describe("served certificates on the real node, renewed by cert-manager", Ordered, ContinueOnFailure, func() {
	ctx := context.Background()
	var ns string

	BeforeAll(func() {
		Expect(node.ImportImage(os.Getenv(framework.PrometheusImageEnv))).To(Succeed(), "run make node, which builds the Prometheus image")
		ns = namespace(nil)
		Expect(env.Client.Create(ctx, &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "selfsigned"},
			Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}})).To(Succeed())
		Expect(env.Client.Create(ctx, &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: cmapi.CertificateSpec{
			SecretName: servedSecret, DNSNames: []string{"web." + ns + ".svc"}, IssuerRef: cmmeta.IssuerReference{Name: "selfsigned", Kind: "Issuer"},
			// Hot: a renewal reaches the pods' files, and rolls nothing.
			SecretTemplate: &cmapi.CertificateSecretTemplate{Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}},
		}})).To(Succeed())
		Eventually(secretSerial(ns), time.Minute, 250*time.Millisecond).ShouldNot(BeEmpty())
		awaitHotVolume(ns, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: servedSecret}})
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom-config"}, Data: map[string]string{
			"prometheus.yml": "global:\n  scrape_interval: 1m\n",
			"web.yml":        "tls_server_config:\n  cert_file: /etc/tls/tls.crt\n  key_file: /etc/tls/tls.key\n",
		}})).To(Succeed())
		Expect(env.Client.Create(ctx, servingDeployment(ns, promApp, 1))).To(Succeed())
		Expect(env.Client.Create(ctx, servingDeployment(ns, onceApp, 2))).To(Succeed())
		Expect(env.Client.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: onceApp}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: new(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": onceApp}}}})).To(Succeed())
		Eventually(func() int { return len(readyPods(ns, promApp)) + len(readyPods(ns, onceApp)) }, 3*time.Minute, 250*time.Millisecond).Should(Equal(3), func() string {
			return agentLogs(ns) + "\n" + env.Kubectl("", "get", "events", "-n", ns).Stdout
		})
	})

	It("reports every pod current on the certificate cert-manager issued, with the presented expiry", func() {
		first := secretSerial(ns)()
		for _, app := range []string{promApp, onceApp} {
			Eventually(servedBy(ns, app), 2*time.Minute, 250*time.Millisecond).Should(HaveEach(reload.CertCurrent+" "+first), agentLogs(ns))
		}
		for _, p := range readyPods(ns, onceApp) {
			e := reload.CertEntriesOf(&p)[oncePort]
			Expect(e.Certificate).To(Equal("web"), "the Secret's Certificate beside the pod")
			Expect(e.MountedCurrent).To(BeTrue())
			Expect(e.Presented.NotAfter).To(BeTemporally(">", time.Now().Add(time.Hour)))
		}
	})

	It("an agent's token speaks for its own pod only: a report of another pod's port changes nothing", func() {
		prom, once := readyPods(ns, promApp)[0], readyPods(ns, onceApp)[0]
		before := reload.CertEntriesOf(&prom)[promPort]
		token := podToken(&once, reload.Audience)
		forged := reload.Leaf{Serial: "DEAD", NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), SHA256: strings.Repeat("0", 64)}
		code, body := postReport(token, reload.Report{Certificates: []reload.CertReport{{Port: promPort, Secret: servedSecret, Result: reload.CertStale,
			Presented: &forged, Mounted: forged, CheckedAt: time.Now()}}})
		Expect(code).To(Equal(200), body)
		Expect(body).To(ContainSubstring("ignored"))
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&prom), &prom)).To(Succeed())
		Expect(reload.CertEntriesOf(&prom)[promPort]).To(Equal(before))
	})

	It("after a renewal: Prometheus presents it, tlsonce stays on the old one (stale, reported), is evicted one pod at a time as its PodDisruptionBudget allows, and its replacements are current", func() {
		first := secretSerial(ns)()
		original := map[string]bool{}
		for _, p := range readyPods(ns, onceApp) {
			original[p.Name] = true
		}
		renew(ns)
		Eventually(secretSerial(ns), time.Minute, 250*time.Millisecond).ShouldNot(Equal(first))
		second := secretSerial(ns)()
		renewedAt := time.Now()
		Eventually(servedBy(ns, promApp), 2*time.Minute, 250*time.Millisecond).Should(HaveEach(reload.CertCurrent+" "+second), agentLogs(ns))
		AddReportEntry("served certificate", fmt.Sprintf("Prometheus presented the renewed certificate %s after cert-manager wrote it", time.Since(renewedAt).Round(time.Second)))

		By("tlsonce's pods present the first certificate while they mount the second")
		Eventually(servedBy(ns, onceApp), 2*time.Minute, 250*time.Millisecond).Should(ContainElement(reload.CertStale+" "+first), agentLogs(ns))
		Eventually(func() []string { return eventsFor(ns, onceApp, "ServedCertificateStale") }, time.Minute, time.Second).Should(
			ContainElement(And(ContainSubstring("port 8443 presents certificate serial "+first), ContainSubstring("mounts serial "+second), ContainSubstring("Certificate web"))))
		Eventually(func() string { return certResultOf(ns, onceApp).Description }, time.Minute, time.Second).Should(ContainSubstring("serial " + first))
		status := env.KubectlPlugin("status", "-n", ns)
		Expect(status.Stdout).To(And(ContainSubstring("Served certificates"), MatchRegexp(`Deployment/once\s+\d\s+[12]\s`),
			ContainSubstring("port 8443 presents certificate serial "+first+", mounts serial "+second+" from Secret web-tls (Certificate web)")), status.Stdout+status.Stderr)

		By("evicted one at a time: never fewer than one tlsonce pod ready, the PodDisruptionBudget's minimum")
		deadline := time.Now().Add(4 * time.Minute)
		for {
			pods := livePods(ns, onceApp)
			ready, fromStart := 0, 0
			for _, p := range pods {
				if original[p.Name] {
					fromStart++
				}
				if p.DeletionTimestamp == nil && isReady(&p) {
					ready++
				}
			}
			Expect(ready).To(BeNumerically(">=", 1), "pods: %v", podStates(pods))
			if fromStart == 0 && ready == 2 {
				break
			}
			Expect(time.Now().Before(deadline)).To(BeTrue(), "the stale pods were not all replaced: %v\n%s", podStates(pods), controllerSays(ns))
			time.Sleep(250 * time.Millisecond)
		}
		Eventually(func() []string { return eventsFor(ns, onceApp, "StaleCertificateEvicted") }, 30*time.Second, time.Second).Should(HaveLen(2))
		Eventually(servedBy(ns, onceApp), 2*time.Minute, 250*time.Millisecond).Should(HaveEach(reload.CertCurrent+" "+second), agentLogs(ns))
		Eventually(func() string { return string(certResultOf(ns, onceApp).Result) }, time.Minute, time.Second).Should(Equal("pass"))
	})

	It("Prometheus stays current through a second renewal, and its agent stays within its limits", func() {
		pids := agentProcesses(readyPods(ns, promApp))
		Expect(pids).To(HaveLen(1))
		start, began := sampleAgents(pids), time.Now()
		before := secretSerial(ns)()
		renew(ns)
		Eventually(secretSerial(ns), time.Minute, 250*time.Millisecond).ShouldNot(Equal(before))
		Eventually(servedBy(ns, promApp), 2*time.Minute, 250*time.Millisecond).Should(HaveEach(reload.CertCurrent+" "+secretSerial(ns)()), agentLogs(ns))
		end := sampleAgents(pids)[pids[0]]
		window := time.Since(began)
		cpu := millicores(end.cpu-start[pids[0]].cpu, window)
		// RSS counts the pages of configward's binary the agent mapped,
		// shared and not charged; the limit counts the container's cgroup.
		AddReportEntry("agent with the certificate check", fmt.Sprintf("%.1f millicores over %s (a renewal and its checks), RSS %s (anonymous %s), container memory peak %s (limits 100m, 48 MiB)",
			cpu, window.Round(time.Second), mib(end.rss), mib(end.anon), mib(end.cgroupPeak)))
		Expect(cpu).To(BeNumerically("<", 100))
		Expect(end.cgroupPeak).To(BeNumerically("<", 48<<20))
	})
})

// servingDeployment runs app (Prometheus or tlsonce) with replicas pods,
// mounting the Secret cert-manager issues, its port checked.
func servingDeployment(ns, app string, replicas int32) *appsv1.Deployment {
	tls := corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: servedSecret}}}
	c := corev1.Container{Name: app, ImagePullPolicy: corev1.PullNever, VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/tls", ReadOnly: true}}}
	spec := corev1.PodSpec{Volumes: []corev1.Volume{tls}, TerminationGracePeriodSeconds: new(int64(1))}
	annotations := map[string]string{}
	switch app {
	case promApp:
		c.Image = framework.PrometheusImage
		c.Args = []string{"--config.file=/etc/prometheus/prometheus.yml", "--web.config.file=/etc/prometheus/web.yml", "--storage.tsdb.path=/data",
			fmt.Sprintf("--web.listen-address=:%d", promPort)}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: "/etc/prometheus"}, corev1.VolumeMount{Name: "data", MountPath: "/data"})
		spec.Volumes = append(spec.Volumes,
			corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "prom-config"}}}},
			corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		annotations[v1alpha1.ServingCertAnnotation] = fmt.Sprint(promPort)
	case onceApp:
		c.Image = framework.TLSOnceImage
		c.Args = []string{"-cert", "/etc/tls", fmt.Sprintf("-listen=:%d", oncePort)}
		annotations[v1alpha1.ServingCertAnnotation] = fmt.Sprint(oncePort)
		annotations[v1alpha1.OnStaleCertAnnotation] = v1alpha1.OnStaleCertRestart
	}
	spec.Containers = []corev1.Container{c}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}, Annotations: annotations}, Spec: spec}}}
}

// secretSerial is the serial of the leaf in the Secret cert-manager writes
// ("" before it does), as the agent reports serials.
func secretSerial(ns string) func() string {
	return func() string {
		var s corev1.Secret
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: servedSecret}, &s); err != nil {
			return ""
		}
		b, _ := pem.Decode(s.Data[corev1.TLSCertKey])
		if b == nil {
			return ""
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return ""
		}
		return reload.LeafOf(c).Serial
	}
}

// renew asks cert-manager to issue the Certificate again now, as `cmctl
// renew` does.
func renew(ns string) {
	var cert cmapi.Certificate
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &cert)).To(Succeed())
	now := metav1.Now()
	cert.Status.Conditions = append(cert.Status.Conditions, cmapi.CertificateCondition{
		Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
		Message: "renewal requested by the node suite", LastTransitionTime: &now})
	Expect(env.Client.Status().Update(context.Background(), &cert)).To(Succeed())
}

// servedBy is, per live pod of app, "<result> <presented serial>" of its
// port, as its ServingCertificate condition says.
func servedBy(ns, app string) func() []string {
	return func() []string {
		var out []string
		for _, p := range livePods(ns, app) {
			if p.DeletionTimestamp != nil {
				continue
			}
			entries := reload.CertEntriesOf(&p)
			if len(entries) == 0 {
				out = append(out, "none")
			}
			for _, e := range entries {
				serial := ""
				if e.Presented != nil {
					serial = e.Presented.Serial
				}
				out = append(out, e.Result+" "+serial)
			}
		}
		return out
	}
}

func readyPods(ns, app string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range livePods(ns, app) {
		if p.DeletionTimestamp == nil && isReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podStates(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s ready=%v deleting=%v", p.Name, isReady(&p), p.DeletionTimestamp != nil))
	}
	return out
}

// certResultOf is the certificate-served result of Deployment name.
func certResultOf(ns, name string) openreports.ReportResult {
	return reportResult(ns, name, func(res openreports.ReportResult) bool { return res.Rule == report.CertificateServed })
}
