package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/reload"
)

// tlsSecret is a Secret of type kubernetes.io/tls, as cert-manager writes
// one (the values are placeholders: kwok runs no program).
func tlsSecret(ns, name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s, annotations: {cert-manager.io/certificate-name: %s}}
type: kubernetes.io/tls
stringData: {tls.crt: "certificate of %s", tls.key: "KEY-CANARY-%s", ca.crt: "authority"}
`, name, ns, name, name, name)
}

// servingWorkload is a Deployment whose container web mounts both
// Secrets and asks for its port's certificate to be checked with
// annotation.
func servingWorkload(ns, annotation string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {configward.dev/serving-cert: %q}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
        volumeMounts: [{name: tls, mountPath: /etc/tls}, {name: admin, mountPath: /etc/admin}]
      volumes:
      - {name: tls, secret: {secretName: web-tls, defaultMode: 0400}}
      - {name: admin, secret: {secretName: admin-tls, defaultMode: 0400}}
`, ns, annotation)
}

var _ = Describe("the served-certificate check", func() {
	It("is refused at apply where a port's certificate is ambiguous, injects the agent with the certificate alone, and lets no namespace editor write what a pod serves", func() {
		ns := rolloutNamespace()
		apply(tlsSecret(ns, "web-tls"), tlsSecret(ns, "admin-tls"))

		By("a container mounting two certificates must say which one the port presents")
		res := env.Kubectl(servingWorkload(ns, "8443"), "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(And(ContainSubstring("[serving-cert]"), ContainSubstring("mounts several certificates (web-tls, admin-tls)"), ContainSubstring("8443@web;secret=<name>")))

		By("named, the pods get the agent, reading the certificate of web-tls and never a key")
		apply(servingWorkload(ns, "8443@web;secret=web-tls"))
		rolloutStatus(ns, "deployment/web")
		pods := podsOf(ns, "web")()
		Expect(pods).To(HaveLen(1))
		c, spec := agentOf(pods[0])
		Expect(c).NotTo(BeNil())
		Expect(spec.Configs).To(BeEmpty())
		Expect(spec.Certificates).To(ConsistOf(reload.ServingCert{Port: 8443, Container: "web", Secret: "web-tls", Dir: reload.CertDir(8443)}))
		Expect(reload.ServingCertsOf(&pods[0])).To(ConsistOf(HaveField("Secret", "web-tls")))
		for _, v := range pods[0].Spec.Volumes {
			if v.Name != "configward-cert-8443" {
				continue
			}
			for _, src := range v.Projected.Sources {
				Expect(src.Secret.Name).To(Equal("web-tls"))
				Expect(src.Secret.Items).To(ConsistOf(Or(HaveField("Key", reload.TLSCert), HaveField("Key", reload.CACert))))
			}
		}

		By("an editor of the namespace cannot write the condition that decides an eviction")
		editor := "mallory"
		Expect(env.Client.Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mallory-edit"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: editor}}})).To(Succeed())
		stale := fmt.Sprintf(`{"status":{"conditions":[{"type":"configward.dev/ServingCertificate","status":"False","reason":"Stale","message":%q}]}}`,
			fmt.Sprintf(`[{"port":8443,"secret":"web-tls","result":"stale","presented":{"serial":"0A"},"mounted":{"serial":"0B"},"since":%q}]`, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)))
		res = as(editor, "", "patch", "pod", pods[0].Name, "-n", ns, "--subresource=status", "--type=strategic", "-p", stale)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("forbidden"))
		after := podsOf(ns, "web")()
		Expect(after).To(HaveLen(1))
		Expect(reload.CertEntriesOf(&after[0])).To(BeEmpty())
	})
})
