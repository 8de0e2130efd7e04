package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/test/framework"
)

// The harness suite proves the test machinery itself with a webhook that
// exists only here: it denies ConfigMaps labelled verdict=deny, warns on
// verdict=warn, and records the name of every ConfigMap it was asked about.
// Everything between the API server and that handler is configward's own
// serving stack (TLS, certificate reloads, hardening).

const (
	harnessPath      = "/e2e-harness"
	harnessLabel     = "e2e.configward.dev/harness"
	harnessVerdict   = "e2e.configward.dev/verdict"
	harnessHookName  = "harness.e2e.configward.dev"
	harnessConfigObj = "configward-e2e-harness"
)

var harnessSeen sync.Map // ConfigMap namespace/name -> struct{}

func registerHarnessWebhook(p *manager.WebhookProcess) {
	p.Server.Register(harnessPath, &admission.Webhook{
		Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			harnessSeen.Store(req.Namespace+"/"+req.Name, struct{}{})
			var cm corev1.ConfigMap
			if err := (admission.NewDecoder(scheme.Scheme())).Decode(req, &cm); err != nil {
				return admission.Errored(400, err)
			}
			switch cm.Labels[harnessVerdict] {
			case "deny":
				return admission.Denied(fmt.Sprintf("[e2e-harness] ConfigMap %s/%s is labelled %s=deny", cm.Namespace, cm.Name, harnessVerdict))
			case "warn":
				return admission.Allowed("").WithWarnings(fmt.Sprintf("[e2e-harness] ConfigMap %s/%s is labelled %s=warn", cm.Namespace, cm.Name, harnessVerdict))
			}
			return admission.Allowed("")
		}),
	})
}

func installHarnessWebhook() {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: harnessConfigObj},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: harnessHookName,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "unused", Path: ptr.To(harnessPath)},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{harnessLabel: "true"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	env.PointAtLocalWebhook(cfg)
	Expect(env.Client.Create(context.Background(), cfg)).To(Succeed())
}

func harnessNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "harness-", Labels: map[string]string{harnessLabel: "true"}}}
	Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	// The API server learns about new webhook configurations asynchronously;
	// wait until this namespace's requests demonstrably reach the webhook.
	Eventually(func() bool {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"}}
		_ = env.Client.Create(context.Background(), probe, &client.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		_, ok := harnessSeen.Load(ns.Name + "/probe")
		return ok
	}, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), "the API server never called the harness webhook")
	return ns.Name
}

func configMapYAML(ns, name, verdict string) string {
	labels := ""
	if verdict != "" {
		labels = fmt.Sprintf("\n  labels:\n    %s: %s", harnessVerdict, verdict)
	}
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s%s\ndata:\n  key: value\n", name, ns, labels)
}

var _ = Describe("the test harness", func() {
	It("shows kubectl users what the webhook allowed, warned about and denied", func() {
		ns := harnessNamespace()

		res := env.Kubectl(configMapYAML(ns, "allowed", ""), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(Equal("configmap/allowed created\n"))

		res = env.Kubectl(configMapYAML(ns, "warned", "warn"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(Equal(fmt.Sprintf("Warning: [e2e-harness] ConfigMap %s/warned is labelled %s=warn\n", ns, harnessVerdict)))

		res = env.Kubectl(configMapYAML(ns, "denied", "deny"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(Equal(fmt.Sprintf(
			"Error from server (Forbidden): error when creating \"STDIN\": admission webhook %q denied the request: [e2e-harness] ConfigMap %s/denied is labelled %s=deny\n",
			harnessHookName, ns, harnessVerdict)))

		res = env.Kubectl("", "get", "configmap", "denied", "-n", ns)
		Expect(res.ExitCode).To(Equal(1), "a denied ConfigMap must not have been stored")
	})

	It("keeps answering the API server while the serving certificate is rotated, and serves the new one", func() {
		ns := harnessNamespace()
		srv := env.Webhook.Server
		oldFP, err := env.CertificateOnDisk()
		Expect(err).NotTo(HaveOccurred())
		Expect(webhookserver.Fingerprint(srv.ServedCertificate())).To(Equal(oldFP))
		rotationsBefore := srv.Rotations()

		const total, rotateAt = 200, 60
		errs := make([]error, total)
		rotate := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := range total {
				if i == rotateAt {
					close(rotate)
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("rot-%03d", i)}}
				errs[i] = env.Client.Create(context.Background(), cm)
				time.Sleep(30 * time.Millisecond)
			}
		}()
		<-rotate
		Expect(env.RotateServingCertificate()).To(Succeed())
		newFP, err := env.CertificateOnDisk()
		Expect(err).NotTo(HaveOccurred())
		Expect(newFP).NotTo(Equal(oldFP))
		wg.Wait()

		for i, err := range errs {
			Expect(err).NotTo(HaveOccurred(), "request %d of %d failed", i, total)
			_, seen := harnessSeen.Load(fmt.Sprintf("%s/rot-%03d", ns, i))
			Expect(seen).To(BeTrue(), "request %d never reached the webhook", i)
		}
		Expect(srv.Rotations()).To(Equal(rotationsBefore+1), "the webhook did not reload the replaced files")
		Expect(webhookserver.Fingerprint(srv.ServedCertificate())).To(Equal(newFP))
		// Nothing else talks TLS to the webhook in this suite, so handshakes
		// with the new certificate are the API server reconnecting after
		// its old connections were retired.
		Expect(srv.Handshakes()[newFP]).To(BeNumerically(">", 0),
			"the API server kept using connections made with the old certificate")

		cfg := env.ClientTLS()
		cfg.ServerName = "127.0.0.1"
		conn, err := tls.Dial("tcp", srv.Addr().String(), cfg)
		Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		Expect(fingerprintOf(conn.ConnectionState().PeerCertificates[0])).To(Equal(newFP))
	})

	It("on shutdown reports not ready first, keeps serving for the shutdown delay, then stops", func() {
		const delay = 3 * time.Second
		p, probe, err := env.NewWebhookProcess(delay, 0)
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		Eventually(func() int { return probeStatus(probe, "/readyz") }, 30*time.Second).Should(Equal(http.StatusOK))

		cfg := env.ClientTLS()
		cfg.ServerName = "127.0.0.1"
		serving := func() error {
			conn, err := tls.Dial("tcp", p.Server.Addr().String(), cfg)
			if err == nil {
				conn.Close()
			}
			return err
		}
		Expect(serving()).To(Succeed())

		stopped := time.Now()
		cancel()
		Eventually(func() int { return probeStatus(probe, "/readyz") }, time.Second, 50*time.Millisecond).Should(Equal(http.StatusInternalServerError))
		Expect(probeStatus(probe, "/healthz")).To(Equal(http.StatusOK), "liveness must not fail while draining")
		Consistently(serving, delay-time.Since(stopped)-500*time.Millisecond).Should(Succeed(), "stopped serving before the shutdown delay")
		Eventually(done, delay+30*time.Second).Should(Receive(BeNil()))
		Expect(time.Since(stopped)).To(BeNumerically(">=", delay))
		Expect(serving()).NotTo(Succeed(), "still serving after shutdown")
	})

	It("on shutdown closes no connection under the API server: an idle one is answered after the delay, and the process stops once it is closed", func() {
		const delay = time.Second
		p, probe, err := env.NewWebhookProcess(delay, 0)
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		Eventually(func() int { return probeStatus(probe, "/readyz") }, 30*time.Second).Should(Equal(http.StatusOK))

		// One keep-alive connection, as the API server's client keeps them,
		// and a second that stays idle to the end.
		cfg := env.ClientTLS()
		cfg.ServerName = "127.0.0.1"
		kept := &http.Transport{TLSClientConfig: cfg, MaxConnsPerHost: 1, IdleConnTimeout: time.Hour}
		defer kept.CloseIdleConnections()
		idle := &http.Transport{TLSClientConfig: cfg.Clone(), IdleConnTimeout: time.Hour}
		url := "https://" + p.Server.Addr().String() + "/mutate-config-hash"
		review := func(t *http.Transport) (*http.Response, bool, error) {
			reused := false
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, url, strings.NewReader("{}"))
			resp, err := t.RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return resp, reused, err
		}
		_, _, err = review(kept)
		Expect(err).NotTo(HaveOccurred())
		_, _, err = review(idle)
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Server.OpenConnections()).To(BeEquivalentTo(2))

		cancel()
		// Past the shutdown delay, where a server that stops then would
		// close both idle connections under their client.
		time.Sleep(delay + 500*time.Millisecond)
		resp, reused, err := review(kept)
		Expect(err).NotTo(HaveOccurred(), "a review written onto an idle connection after the shutdown delay was lost")
		Expect(reused).To(BeTrue(), "the review went on the connection kept alive from before the shutdown")
		Expect(resp.Close).To(BeTrue(), "the answer tells the client to close the connection")
		Consistently(done, 2*time.Second).ShouldNot(Receive(), "stopped while the API server still held a connection")
		Expect(p.Server.OpenConnections()).To(BeEquivalentTo(1))

		// The client closes the last one, as the API server does after 90 s idle.
		idle.CloseIdleConnections()
		Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	})

	It("is not ready while the certificate on disk cannot be served, and keeps serving the last good one", func() {
		good, err := env.CertificateOnDisk()
		Expect(err).NotTo(HaveOccurred())
		Eventually(readyz, 30*time.Second).Should(Equal(http.StatusOK))

		// A renewal that lands a key that does not match the certificate.
		certPEM, _, err := env.CA.Issue()
		Expect(err).NotTo(HaveOccurred())
		_, otherKey, err := env.CA.Issue()
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.WriteAtomic(env.CertDir, map[string][]byte{"tls.crt": certPEM, "tls.key": otherKey})).To(Succeed())

		Eventually(readyz, 10*time.Second).Should(Equal(http.StatusInternalServerError))
		Consistently(func() string { return webhookserver.Fingerprint(env.Webhook.Server.ServedCertificate()) }, 3*time.Second).Should(Equal(good))
		ns := harnessNamespace()
		Expect(env.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "still-served"}})).To(Succeed())

		Expect(env.RotateServingCertificate()).To(Succeed())
		Eventually(readyz, 10*time.Second).Should(Equal(http.StatusOK))
	})
})

func readyz() int { return probeStatus(env.ProbeAddr, "/readyz") }

func probeStatus(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

func fingerprintOf(c *x509.Certificate) string {
	return webhookserver.Fingerprint(&tls.Certificate{Certificate: [][]byte{c.Raw}})
}
