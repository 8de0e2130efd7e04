package security

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/admission"
)

// The webhook of this suite does not authenticate its callers: what a
// fabricated review can make it record is what an attacker on the pod
// network could.
var _ = Describe("a fabricated AdmissionReview from a client without the API server's certificate", Ordered, func() {
	const ns = "forge"
	var stored string // Secret forge/db as stored, JSON

	// effectMetrics are the webhook's metric lines that only real requests
	// may move.
	effectMetrics := func() string {
		var lines []string
		for _, l := range strings.Split(string(get(webhook.MetricsURL)), "\n") {
			for _, m := range []string{"configward_break_glass_total", "configward_policy_decisions_total", "configward_exemptions_total",
				"configward_config_hash_stamped_total", "configward_change_control_transitions_total"} {
				if strings.HasPrefix(l, m) {
					lines = append(lines, l)
				}
			}
		}
		return strings.Join(lines, "\n")
	}
	// send posts a review for an object as user, without a client
	// certificate, and returns the webhook's answer.
	send := func(path, user string, op admissionv1.Operation, kind metav1.GroupVersionKind, resource string, object, old string) *admissionv1.AdmissionResponse {
		req := admissionv1.AdmissionRequest{
			UID: "forged", Kind: kind, Resource: metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: resource},
			Operation: op, Namespace: ns, Name: "db", UserInfo: authenticationv1.UserInfo{Username: user},
		}
		req.Object.Raw = []byte(object)
		if old != "" {
			req.OldObject.Raw = []byte(old)
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
		Expect(err).NotTo(HaveOccurred())
		anonymous := env.ClientTLS()
		anonymous.Certificates = nil
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: anonymous}}
		resp, err := c.Post("https://"+webhook.Addr+path, "application/json", bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK), string(raw))
		var out admissionv1.AdmissionReview
		Expect(json.Unmarshal(raw, &out)).To(Succeed())
		return out.Response
	}
	secretKind := metav1.GroupVersionKind{Version: "v1", Kind: "Secret"}
	deploymentKind := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

	BeforeAll(func() {
		kubectl("", "", "create", "namespace", ns)
		policy := fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: forge}\nspec:\n"+
			"  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}\n  pipeline: {serviceAccounts: [ci/deployer]}\n", ns)
		Expect(kubectl("", policy, "apply", "-f", "-").ExitCode).To(Equal(0))
		Eventually(func() string {
			return kubectl("", "", "get", "namespace", ns, "-o", `jsonpath={.metadata.labels.configward\.dev/change-control}`).Stdout
		}, 30*time.Second, 200*time.Millisecond).Should(Equal("governed"))
		res := kubectl(pipeline, "", "create", "secret", "generic", "db", "-n", ns, "--from-literal=password=one")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		stored = kubectl("", "", "get", "secret", "db", "-n", ns, "-o", "json").Stdout
	})

	It("is answered, but leaves no Event and moves no metric", func() {
		before := effectMetrics()
		// password "one" becomes "two"
		changed := strings.Replace(stored, `"b25l"`, `"dHdv"`, 1)
		edited := strings.Replace(changed, `"namespace": "forge",`, `"namespace": "forge", "annotations": {"configward.dev/break-glass": "INC-FORGED"},`, 1)
		Expect(edited).NotTo(Equal(changed))
		Expect(changed).NotTo(Equal(stored))

		By("a break-glass edit blaming someone: the webhook lets it through, as it would a real one")
		resp := send(admission.ValidateConfigChangesPath, "bob", admissionv1.Update, secretKind, "secrets", edited, stored)
		Expect(resp.Allowed).To(BeTrue(), "%+v", resp.Result)
		By("an edit outside the pipeline: refused")
		resp = send(admission.ValidateConfigChangesPath, "bob", admissionv1.Update, secretKind, "secrets", changed, stored)
		Expect(resp.Allowed).To(BeFalse())
		By("a workload exempted from a rule, and one to stamp")
		workload := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"db","namespace":%q,"annotations":{"configward.dev/exempt.secret-in-env":"forged"}},`+
			`"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"a","image":"x","env":[{"name":"P","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}}]}]}}}}`, ns)
		send(admission.ValidateWorkloadsPath, "bob", admissionv1.Create, deploymentKind, "deployments", workload, "")
		resp = send(admission.ConfigHashPath, "bob", admissionv1.Create, deploymentKind, "deployments", workload, "")
		Expect(resp.Patch).NotTo(BeEmpty(), "the webhook did not stamp the fabricated workload, so this spec proves nothing about stamping")

		By("the cache never shows those writes: nothing is recorded")
		Consistently(effectMetrics, 5*time.Second, 500*time.Millisecond).Should(Equal(before))
		Expect(kubectl("", "", "get", "events", "-n", ns, "-o", "yaml").Stdout).NotTo(ContainSubstring("INC-FORGED"))
	})

	It("unlike the same break-glass edit through the API server, which is recorded", func() {
		// Another spec of this suite may have made a real break-glass edit
		// already (specs run in random order), so count from here.
		breakGlass := func() float64 {
			return counter(effectMetrics(), `configward_break_glass_total{kind="Secret",operation="UPDATE"}`)
		}
		before := breakGlass()
		res := kubectl(human, "", "patch", "secret", "db", "-n", ns, "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-REAL"}},"stringData":{"password":"two"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() string { return kubectl("", "", "get", "events", "-n", ns, "-o", "yaml").Stdout }, 30*time.Second, 250*time.Millisecond).
			Should(ContainSubstring("INC-REAL"))
		Expect(breakGlass()).To(Equal(before+1),
			"the real edit counted once, and the fabricated one waiting for a write to the same Secret not at all")
		By("the real write does not confirm the fabricated break-glass still waiting for a change to that Secret")
		Consistently(func() string { return kubectl("", "", "get", "events", "-n", ns, "-o", "yaml").Stdout }, 3*time.Second, 500*time.Millisecond).
			ShouldNot(ContainSubstring("INC-FORGED"))
	})
})

// counter is the value of one series in Prometheus text, 0 when absent.
func counter(metrics, series string) float64 {
	for _, l := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			Expect(err).NotTo(HaveOccurred(), l)
			return f
		}
	}
	return 0
}
