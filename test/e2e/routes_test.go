package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// These specs try, as an attacker who may edit ConfigMaps and Secrets in a
// governed namespace, every route around change control that
// docs/policy/change-control.md lists ("Every route around change control").
// Each is refused (the stored object unchanged, resourceVersion included)
// or, where allowed by design, recorded: an Event, an audit annotation and
// a metric.

// storedObject is what a refused write must leave exactly as it was.
func storedObject(ns, kind, name string) string {
	res := env.Kubectl("", "get", kind, name, "-n", ns, "-o", "yaml")
	Expect(res.ExitCode).To(Equal(0), res.Stderr)
	return res.Stdout
}

// refusedAs runs kubectl as identity and expects an out-of-pipeline-edit
// refusal that leaves the object (when it exists) as it was.
func refusedAs(identity, ns, kind, name, stdin string, args ...string) {
	before := ""
	if env.Kubectl("", "get", kind, name, "-n", ns).ExitCode == 0 {
		before = storedObject(ns, kind, name)
	}
	res := as(identity, stdin, append([]string{"-n", ns}, args...)...)
	Expect(res.ExitCode).To(Equal(1), "%v was allowed: %s", args, res.Stdout)
	Expect(res.Stderr).To(ContainSubstring("[out-of-pipeline-edit]"), "%v", args)
	if before != "" {
		Expect(storedObject(ns, kind, name)).To(Equal(before), "a refused write changed the object")
	} else {
		Expect(env.Kubectl("", "get", kind, name, "-n", ns).ExitCode).To(Equal(1), "a refused create stored the object")
	}
}

var _ = Describe("change control against the routes around it", func() {
	var ns string
	BeforeEach(func() {
		ns = governedNamespace()
		asPipeline(configMap(ns, "app-flags", map[string]string{"level": "info"}, nil))
	})

	It("route 1: an owner reference to a missing owner is refused; set by the pipeline, the garbage collector deletes and only the pipeline may re-create", func() {
		ghost := `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"ghost","uid":"6b1f1f0e-0000-4000-8000-000000000000"}]}}`
		refusedAs(human, ns, "configmap", "app-flags", "", "patch", "configmap", "app-flags", "--type=merge", "-p", ghost)

		By("the pipeline itself sets one; the garbage collector deletes the ConfigMap")
		Expect(as(pipelineSA, "", "-n", ns, "patch", "configmap", "app-flags", "--type=merge", "-p", ghost).ExitCode).To(Equal(0))
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app-flags"}, &corev1.ConfigMap{}))
		}, 60*time.Second, 250*time.Millisecond).Should(BeTrue(), "the garbage collector did not delete the ConfigMap")

		By("a human re-creating it with content of their own is refused; the pipeline is not")
		refusedAs(human, ns, "configmap", "app-flags", configMap(ns, "app-flags", map[string]string{"level": "trace"}, nil), "apply", "-f", "-")
		asPipeline(configMap(ns, "app-flags", map[string]string{"level": "info"}, nil))
	})

	It("route 2: a break-glass delete is recorded, and re-creating needs a break-glass of its own, recorded too", func() {
		creates := counter("configward_break_glass_total", map[string]string{"kind": "ConfigMap", "operation": "CREATE"})
		Expect(as(human, "", "-n", ns, "annotate", "configmap", "app-flags", "configward.dev/break-glass-delete=INC-5 wrong data").ExitCode).To(Equal(0))
		Expect(as(human, "", "-n", ns, "delete", "configmap", "app-flags").ExitCode).To(Equal(0))

		refusedAs(human, ns, "configmap", "app-flags", configMap(ns, "app-flags", map[string]string{"level": "trace"}, nil), "apply", "-f", "-")

		res := as(human, configMap(ns, "app-flags", map[string]string{"level": "warn"}, map[string]string{v1alpha1.BreakGlassAnnotation: "INC-5 restore"}), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		note := fmt.Sprintf(`break-glass by %s: created ConfigMap %s/app-flags outside the pipeline, reason "INC-5 restore"`, human, ns)
		Expect(res.Stderr).To(ContainSubstring("Warning: [out-of-pipeline-edit] " + note))
		Eventually(func() []string { return eventsFor(ns, "app-flags", "BreakGlass") }, 10*time.Second, 200*time.Millisecond).
			Should(ContainElement(note))
		Eventually(func() []map[string]string { return auditAnnotations(ns, "configmaps", "app-flags", "create") }, 10*time.Second, 200*time.Millisecond).
			Should(ContainElement(HaveKeyWithValue("changes.validate.configward.dev/break-glass", note)))
		Expect(counter("configward_break_glass_total", map[string]string{"kind": "ConfigMap", "operation": "CREATE"})).To(Equal(creates + 1))
	})

	It("route 3: metadata that governs is a change; other metadata is free", func() {
		asPipeline(schemaYAML(ns, "flags-schema", nil, "level", "text", `{"enum": ["info", "debug"]}`,
			"  selector: {matchLabels: {schema: flags}}\n"))
		asPipeline(strings.Replace(configMap(ns, "schemed", map[string]string{"level": "info"}, map[string]string{v1alpha1.SchemaAnnotation: "flags-schema"}),
			"metadata:\n", "metadata:\n  labels: {schema: flags}\n  finalizers: []\n", 1))
		for _, tc := range []struct{ what, name, patch string }{
			{"an exemption added first", "app-flags", `{"metadata":{"annotations":{"configward.dev/exempt.out-of-pipeline-edit":"trust me"}}}`},
			{"the reload mode set to ignore", "app-flags", `{"metadata":{"annotations":{"configward.dev/reload":"ignore"}}}`},
			{"the label that selects a ConfigSchema removed", "schemed", `{"metadata":{"labels":{"schema":null}}}`},
			{"the schema annotation removed", "schemed", `{"metadata":{"annotations":{"configward.dev/schema":null}}}`},
			{"a finalizer that would block the pipeline's delete", "app-flags", `{"metadata":{"finalizers":["example.com/hold"]}}`},
		} {
			By(tc.what)
			refusedAs(human, ns, "configmap", tc.name, "", "patch", "configmap", tc.name, "--type=merge", "-p", tc.patch)
		}
		By("free metadata")
		Expect(as(human, "", "-n", ns, "label", "configmap", "app-flags", "team=payments").ExitCode).To(Equal(0))
		Expect(as(human, "", "-n", ns, "annotate", "configmap", "app-flags", "owner=alice").ExitCode).To(Equal(0))
	})

	It("route 4: cert-manager writes only Secrets it already manages, and no one may make a Secret look like one", func() {
		asPipeline(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: trust-bundle, namespace: %s}\nstringData: {ca.crt: pipeline-ca}\n", ns))
		refusedAs(certManagerSA, ns, "secret", "trust-bundle", "", "patch", "secret", "trust-bundle", "--type=merge", "-p",
			`{"metadata":{"annotations":{"cert-manager.io/certificate-name":"evil"}},"stringData":{"ca.crt":"attacker-ca"}}`)
		refusedAs(human, ns, "secret", "trust-bundle", "", "annotate", "secret", "trust-bundle", "cert-manager.io/certificate-name=evil")
		By("cert-manager issuing a new Secret for a Certificate")
		res := as(certManagerSA, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: issued-tls\n  namespace: %s\n  annotations: {cert-manager.io/certificate-name: issued}\ntype: kubernetes.io/tls\nstringData: {tls.crt: a, tls.key: b}\n", ns), "create", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	})

	It("route 5: a Pod naming a non-workload as its controller is judged like one nobody owns", func() {
		ns := rulesNamespace()
		asConfigMapOwned := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: sneaky
  namespace: %s
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: hot-flags, uid: 6b1f1f0e-0000-4000-8000-000000000001, controller: true}]
spec:
  containers:
  - name: app
    image: app
    envFrom: [{configMapRef: {name: hot-flags}}]
`, ns)
		res := env.Kubectl(asConfigMapOwned, "apply", "--dry-run=server", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`[hot-config-in-env] Pod ` + ns + `/sneaky container "app" reads ConfigMap "hot-flags"`))
	})

	It("route 6: add-ons in kube-system are judged like anyone else", func() {
		refusedAs("system:serviceaccount:kube-system:some-addon", ns, "configmap", "app-flags", "", "patch", "configmap", "app-flags", "--type=merge", "-p", `{"data":{"level":"x"}}`)
	})

	It("route 7: relabelling a namespace out of change control is recorded, and configward's own label comes back", func() {
		Eventually(func() map[string]string {
			var n corev1.Namespace
			_ = env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)
			return n.Labels
		}, 10*time.Second, 200*time.Millisecond).Should(HaveKeyWithValue(v1alpha1.ChangeControlLabel, v1alpha1.ChangeControlGoverned))
		Expect(env.Client.Create(context.Background(), &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-namespace-admin-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "nadia"}},
		})).To(Succeed())
		left := counter("configward_change_control_transitions_total", map[string]string{"change": "left"})
		labelChanged := counter("configward_change_control_transitions_total", map[string]string{"change": "label-changed"})

		By("removing configward's label: allowed, told, recorded, and put back")
		res := as("nadia", "", "label", "namespace", ns, v1alpha1.ChangeControlLabel+"-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("Warning: [out-of-pipeline-edit] nadia changed label " + v1alpha1.ChangeControlLabel + " of namespace " + ns))
		Eventually(func() map[string]string {
			var n corev1.Namespace
			_ = env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)
			return n.Labels
		}, 10*time.Second, 200*time.Millisecond).Should(HaveKeyWithValue(v1alpha1.ChangeControlLabel, v1alpha1.ChangeControlGoverned))
		Expect(counter("configward_change_control_transitions_total", map[string]string{"change": "label-changed"})).To(BeNumerically(">", labelChanged))

		By("removing the label change control selects on: the namespace leaves change control, recorded four ways")
		res = as("nadia", "", "label", "namespace", ns, changeControlLabel+"-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		note := fmt.Sprintf("namespace %s left change control: changed by nadia; its ConfigMaps and Secrets may now be changed by anyone with RBAC", ns)
		Expect(res.Stderr).To(ContainSubstring("Warning: [out-of-pipeline-edit] " + note))
		Expect(counter("configward_change_control_transitions_total", map[string]string{"change": "left"})).To(Equal(left + 1))
		Eventually(func() []string {
			var list corev1.EventList
			Expect(env.Client.List(context.Background(), &list)).To(Succeed())
			var out []string
			for _, e := range list.Items {
				if e.InvolvedObject.Kind == "Namespace" && e.InvolvedObject.Name == ns && e.Reason == "ChangeControl" {
					out = append(out, e.Message)
				}
			}
			return out
		}, 10*time.Second, 200*time.Millisecond).Should(ContainElement(note))
		Eventually(func() map[string]string {
			var n corev1.Namespace
			_ = env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)
			return n.Labels
		}, 10*time.Second, 200*time.Millisecond).ShouldNot(HaveKey(v1alpha1.ChangeControlLabel), "configward labels what it governs, no more")
	})

	It("route 8: a ConfigPolicy that cannot be in force with the others is refused, and its status says what is in force when it got in anyway", func() {
		rule := func(policy string) string {
			return fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: %s}\nspec:\n  namespaceSelector: {matchLabels: {%s: nobody}}\n"+
				"  customRules:\n  - id: shared-id\n    rego: |\n      package configward.custom.shared_id\n\n      findings contains f if {\n        false\n        f := {}\n      }\n", policy, policyLabel)
		}
		applyPolicy(rule("owner-of-id"))
		res := env.Kubectl(rule("second-claim"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`The ConfigPolicy "second-claim" is invalid: spec.customRules: Invalid value: cannot be in force with the other ConfigPolicies: custom rule id "shared-id" is declared by ConfigPolicy "owner-of-id" too`))

		By("stored while the webhook was not registered: Ready=False, with why")
		restore := withoutWebhook("configpolicies.validate.configward.dev")
		Eventually(func() int { return env.Kubectl(rule("second-claim"), "apply", "-f", "-").ExitCode }, 10*time.Second, 200*time.Millisecond).Should(Equal(0))
		restore()
		DeferCleanup(func() { env.Kubectl("", "delete", "configpolicy", "second-claim", "--ignore-not-found") })
		ready := func() string {
			res := env.Kubectl("", "get", "configpolicy", "second-claim", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
			return res.Stdout
		}
		Eventually(ready, 15*time.Second, 200*time.Millisecond).Should(HavePrefix(`False spec.customRules: Invalid value: cannot be in force with the other ConfigPolicies: custom rule id "shared-id" is declared by ConfigPolicy "owner-of-id" too`))

		By("the policy it clashed with is deleted: it comes into force, and its status says so")
		Expect(env.Kubectl("", "delete", "configpolicy", "owner-of-id").ExitCode).To(Equal(0))
		Eventually(ready, 15*time.Second, 200*time.Millisecond).Should(Equal("True this generation compiled and is in force"))
	})
})
