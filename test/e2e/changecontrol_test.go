package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// Identities of the change-control specs. The pipeline is a service account
// and a group; humans are plain users. All are impersonated with kubectl's
// --as/--as-group, so the API server authenticates them as it would the
// real ones and passes them to the webhook in userInfo.
const (
	changeControlLabel = "e2e.configward.dev/change-control"
	pipelineSA         = "system:serviceaccount:ci:deployer"
	pipelineGroup      = "e2e:release-managers"
	configwardSA       = "system:serviceaccount:configward-system:configward-controller"
	certManagerSA      = "system:serviceaccount:cert-manager:cert-manager"
	human              = "alice"
)

// suiteChangeControl are the change-control flags of the suite's webhook
// and controller, as the chart gives both the same.
var suiteChangeControl = manager.ChangeControl{
	PipelineServiceAccounts:    []string{"ci/deployer"},
	PipelineGroups:             []string{pipelineGroup},
	NamespaceSelector:          changeControlLabel + "=on",
	ConfigwardServiceAccounts:  []string{"configward-system/configward-controller"},
	CertManagerServiceAccounts: []string{"cert-manager/cert-manager"},
}

func configureChangeControl(o *manager.Webhook) { o.ChangeControl = suiteChangeControl }

// grantTestIdentities lets the impersonated identities edit the objects
// the specs use, so that what stops them is configward, not RBAC.
func grantTestIdentities() {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-editor"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "pods"}, Verbs: []string{rbacv1.VerbAll}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{rbacv1.VerbAll}},
			{APIGroups: []string{"configward.dev"}, Resources: []string{"configschemas", "configsets"}, Verbs: []string{rbacv1.VerbAll}},
		},
	}
	Expect(env.Client.Create(context.Background(), role)).To(Succeed())
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-editors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: human},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: pipelineGroup},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "policy-deployer"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "configward-system", Name: "configward-controller"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "cert-manager", Name: "cert-manager"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "some-addon"},
		},
	}
	Expect(env.Client.Create(context.Background(), crb)).To(Succeed())
}

// as runs kubectl as identity (a user or a service account username),
// with optional groups.
func as(identity string, stdin string, args ...string) framework.KubectlResult {
	return env.Kubectl(stdin, append([]string{"--as=" + identity}, args...)...)
}

func asGroup(user, group, stdin string, args ...string) framework.KubectlResult {
	return env.Kubectl(stdin, append([]string{"--as=" + user, "--as-group=" + group}, args...)...)
}

// asPipeline applies manifests as the pipeline, which governed namespaces
// take config from.
func asPipeline(manifests ...string) {
	res := as(pipelineSA, strings.Join(manifests, "\n---\n"), "apply", "-f", "-")
	Expect(res.ExitCode).To(Equal(0), res.Stderr)
}

// pipelineClient is a client acting as the pipeline's service account.
func pipelineClient() client.Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: pipelineSA}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// governedNamespace returns a namespace under change control, once the
// change-control webhook demonstrably enforces there.
func governedNamespace() string {
	ns := newNamespace("cc", map[string]string{changeControlLabel: "on"})
	asPipeline(configMap(ns, "probe", map[string]string{"v": "0"}, nil))
	Eventually(func() int {
		return as(human, "", "-n", ns, "patch", "configmap", "probe", "--dry-run=server", "--type=merge", "-p", `{"data":{"v":"1"}}`).ExitCode
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(1), "the change-control webhook never enforced")
	return ns
}

type stored struct {
	ResourceVersion string
	Data            map[string]string
}

func storedConfigMap(ns, name string) stored {
	var cm corev1.ConfigMap
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
	return stored{cm.ResourceVersion, cm.Data}
}

func denial(ns, who, fields, kind, name string) string {
	return fmt.Sprintf(`admission webhook "changes.validate.configward.dev" denied the request: [out-of-pipeline-edit] %s changes %s of %s %s/%s outside the pipeline. Make the change in version control and let the pipeline apply it; in an emergency, repeat the edit with a new annotation configward.dev/break-glass: "<reason>" (the edit is recorded).`,
		who, fields, kind, ns, name)
}

// auditAnnotations returns the annotations the API server's audit log
// recorded for requests of verb on the object.
func auditAnnotations(ns, resource, name, verb string) []map[string]string {
	events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return ev.Verb == verb && ev.ObjectRef.Resource == resource && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == name
	})
	Expect(err).NotTo(HaveOccurred())
	var out []map[string]string
	for _, ev := range events {
		out = append(out, ev.Annotations)
	}
	return out
}

var _ = Describe("change control", func() {
	var ns string
	BeforeEach(func() {
		ns = governedNamespace()
		asPipeline(configMap(ns, "app-flags", map[string]string{"level": "info"}, nil))
	})

	It("lets the pipeline change governed config, refuses a human and leaves the stored object as it was", func() {
		res := as(pipelineSA, configMap(ns, "app-flags", map[string]string{"level": "debug"}, nil), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		res = asGroup("bob", pipelineGroup, configMap(ns, "app-flags", map[string]string{"level": "warn"}, nil), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(storedConfigMap(ns, "app-flags").Data).To(Equal(map[string]string{"level": "warn"}))

		before := storedConfigMap(ns, "app-flags")
		res = as(human, configMap(ns, "app-flags", map[string]string{"level": "trace", "extra": "1"}, nil), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(denial(ns, human, `data["extra"] and data["level"]`, "ConfigMap", "app-flags")))
		_, message, _ := strings.Cut(res.Stderr, "denied the request:") // kubectl apply prints its own patch before
		Expect(message).NotTo(ContainSubstring("trace"), "a value reached the message")
		Expect(storedConfigMap(ns, "app-flags")).To(Equal(before))

		By("metadata-only edits by a human pass")
		Expect(as(human, "", "-n", ns, "label", "configmap", "app-flags", "team=payments").ExitCode).To(Equal(0))
		res = as(human, "", "-n", ns, "annotate", "configmap", "app-flags", "owner=alice")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(storedConfigMap(ns, "app-flags").Data).To(Equal(map[string]string{"level": "warn"}))
	})

	DescribeTable("refuses every way a human can write content, leaving the object as it was",
		func(stdin string, extraEnv []string, args ...string) {
			before := storedConfigMap(ns, "app-flags")
			r := env.KubectlEnv(extraEnv, strings.ReplaceAll(stdin, "NS", ns), append([]string{"--as=" + human, "-n", ns}, args...)...)
			Expect(r.ExitCode).NotTo(Equal(0), r.Stdout)
			Expect(r.Stderr).To(ContainSubstring(denial(ns, human, `data["level"]`, "ConfigMap", "app-flags")))
			Expect(storedConfigMap(ns, "app-flags")).To(Equal(before))
		},
		Entry("merge patch", "", nil, "patch", "configmap", "app-flags", "--type=merge", "-p", `{"data":{"level":"x"}}`),
		Entry("JSON patch", "", nil, "patch", "configmap", "app-flags", "--type=json", "-p", `[{"op":"replace","path":"/data/level","value":"x"}]`),
		Entry("strategic merge patch", "", nil, "patch", "configmap", "app-flags", "--type=strategic", "-p", `{"data":{"level":"x"}}`),
		Entry("server-side apply", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-flags, namespace: NS}\ndata: {level: x}\n", nil,
			"apply", "--server-side", "--force-conflicts", "-f", "-"),
		Entry("replace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-flags, namespace: NS}\ndata: {level: x}\n", nil, "replace", "-f", "-"),
		Entry("kubectl edit", "", []string{"KUBE_EDITOR=sed -i s/info$/x/"}, "edit", "configmap", "app-flags"),
	)

	It("never shows Secret values, and compares stringData as it lands in data", func() {
		asPipeline(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: hunter2, user: app}\n", ns))
		res := as(human, "", "-n", ns, "patch", "secret", "db", "--type=merge", "-p", `{"stringData":{"password":"swordfish"}}`)
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(denial(ns, human, `data["password"]`, "Secret", "db")))
		Expect(res.Stderr).NotTo(ContainSubstring("swordfish"))
		Expect(res.Stderr).NotTo(ContainSubstring("hunter2"))
		Expect(as(pipelineSA, "", "-n", ns, "patch", "secret", "db", "--type=merge", "-p", `{"stringData":{"password":"swordfish"}}`).ExitCode).To(Equal(0))
	})

	It("lets a break-glass edit through once, records it four ways, and refuses the replayed reason", func() {
		before := counter("configward_break_glass_total", map[string]string{"kind": "ConfigMap", "operation": "UPDATE"})
		res := as(human, "", "-n", ns, "patch", "configmap", "app-flags", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-42 bad flag"}},"data":{"level":"error"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		note := fmt.Sprintf(`break-glass by alice: changed data["level"] of ConfigMap %s/app-flags outside the pipeline, reason "INC-42 bad flag"`, ns)
		Expect(res.Stderr).To(Equal(fmt.Sprintf("Warning: [out-of-pipeline-edit] %s. Recorded; bring the change into version control or the next deployment undoes it.\n", note)))
		Expect(storedConfigMap(ns, "app-flags").Data).To(Equal(map[string]string{"level": "error"}))

		Eventually(func() []string { return eventsFor(ns, "app-flags", "BreakGlass") }, 10*time.Second, 200*time.Millisecond).
			Should(ConsistOf(note))
		Expect(counter("configward_break_glass_total", map[string]string{"kind": "ConfigMap", "operation": "UPDATE"})).To(Equal(before + 1))
		Eventually(func() []map[string]string { return auditAnnotations(ns, "configmaps", "app-flags", "patch") }, 10*time.Second, 200*time.Millisecond).
			Should(ContainElement(HaveKeyWithValue("changes.validate.configward.dev/break-glass", note)))

		By("the same reason again is not a new break-glass")
		before2 := storedConfigMap(ns, "app-flags")
		res = as(human, "", "-n", ns, "patch", "configmap", "app-flags", "--type=merge", "-p", `{"data":{"level":"fatal"}}`)
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(denial(ns, human, `data["level"]`, "ConfigMap", "app-flags")))
		Expect(storedConfigMap(ns, "app-flags")).To(Equal(before2))
	})

	It("guards a ConfigSchema like the config it governs: only the pipeline loosens or deletes it, or a break-glass, recorded four ways", func() {
		strict := schemaYAML(ns, "app", []string{"app-flags"}, "level", "text", `{type: string, enum: [debug, info, warn, error]}`, "")
		loose := schemaYAML(ns, "app", []string{"app-flags"}, "level", "text", `{type: string}`, "")
		asPipeline(strict)
		generation := func() int64 {
			var cs v1alpha1.ConfigSchema
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, &cs)).To(Succeed())
			return cs.Generation
		}
		before := generation()
		res := as(human, loose, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf(`admission webhook "schema-changes.validate.configward.dev" denied the request: [out-of-pipeline-edit] alice changes spec.keys of ConfigSchema %s/app outside the pipeline.`, ns)))
		Expect(generation()).To(Equal(before), "the refused edit left the schema as it was")

		By("the pipeline changes it")
		asPipeline(loose)
		asPipeline(strict)

		By("a break-glass edit is let through and recorded four ways")
		count := func() float64 {
			return counter("configward_break_glass_total", map[string]string{"kind": "ConfigSchema", "operation": "UPDATE"})
		}
		breakGlasses := count()
		res = as(human, "", "-n", ns, "patch", "configschema", "app", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-9 new level"}},"spec":{"keys":[{"name":"level","format":"text","required":true,"schema":{"type":"string"}}]}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		note := fmt.Sprintf(`break-glass by alice: changed spec.keys of ConfigSchema %s/app outside the pipeline, reason "INC-9 new level"`, ns)
		Expect(res.Stderr).To(ContainSubstring("Warning: [out-of-pipeline-edit] " + note))
		Eventually(func() []string { return eventsFor(ns, "app", "BreakGlass") }, 10*time.Second, 200*time.Millisecond).Should(ConsistOf(note))
		Expect(count()).To(Equal(breakGlasses + 1))
		Eventually(func() []map[string]string { return auditAnnotations(ns, "configschemas", "app", "patch") }, 10*time.Second, 200*time.Millisecond).
			Should(ContainElement(HaveKeyWithValue("schema-changes.validate.configward.dev/break-glass", note)))

		By("deleting it: refused, unless annotated for a break-glass delete first")
		res = as(human, "", "-n", ns, "delete", "configschema", "app")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf(`[out-of-pipeline-edit] alice deletes ConfigSchema %s/app outside the pipeline.`, ns)))
		Expect(as(human, "", "-n", ns, "annotate", "configschema", "app", "configward.dev/break-glass-delete=INC-10 retired").ExitCode).To(Equal(0))
		res = as(human, "", "-n", ns, "delete", "configschema", "app")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf(`Warning: [out-of-pipeline-edit] break-glass by alice: deleted ConfigSchema %s/app outside the pipeline, reason "INC-10 retired"`, ns)))

		By("nor may a human create one")
		res = as(human, strict, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf(`[out-of-pipeline-edit] alice creates ConfigSchema %s/app outside the pipeline.`, ns)))
	})

	It("guards a ConfigSet like the config it groups: only the pipeline moves its version", func() {
		set := func(version string) string {
			return fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigSet\nmetadata: {name: app, namespace: %s}\nspec:\n  version: %s\n  members: [{kind: ConfigMap, name: app-flags}]\n", ns, version)
		}
		asPipeline(set("v1"))
		res := as(human, set("v2"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf(`admission webhook "schema-changes.validate.configward.dev" denied the request: [out-of-pipeline-edit] alice changes spec.version of ConfigSet %s/app outside the pipeline.`, ns)))
		var stored v1alpha1.ConfigSet
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, &stored)).To(Succeed())
		Expect(stored.Spec.Version).To(Equal("v1"), "the refused edit left the set as it was")
		res = as(human, "", "-n", ns, "delete", "configset", "app")
		Expect(res).To(And(HaveField("ExitCode", 1), HaveField("Stderr", ContainSubstring("[out-of-pipeline-edit] alice deletes ConfigSet"))))
		asPipeline(set("v2"))
	})

	It("refuses a human delete, and a delete of config still in use until its Deployment is gone", func() {
		apply(deployment(ns, "web", "", fmt.Sprintf(envFromSpec, "app-flags")))
		res := as(human, "", "-n", ns, "delete", "configmap", "app-flags")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(Equal(fmt.Sprintf(`Error from server (Forbidden): admission webhook "changes.validate.configward.dev" denied the request: [out-of-pipeline-edit] alice deletes ConfigMap %[1]s/app-flags outside the pipeline. Delete it through the pipeline; in an emergency, first annotate it with configward.dev/break-glass-delete: "<reason>", then delete it (the delete is recorded).
[config-in-use-delete] ConfigMap %[1]s/app-flags is used by Deployment web: their pods fail to start or to refresh it once it is gone. Remove the references (or the workloads) first.
`, ns)))

		By("the pipeline is warned, not stopped: it may be deleting the Deployment in the same change set")
		asPipeline(configMap(ns, "other-flags", map[string]string{"a": "1"}, nil), deployment(ns, "api", "", fmt.Sprintf(envFromSpec, "other-flags")))
		res = as(pipelineSA, "", "-n", ns, "delete", "configmap", "other-flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf("Warning: [config-in-use-delete] ConfigMap %s/other-flags is used by Deployment api", ns)))

		By("break-glass delete, once the Deployment is gone; the cache may not have seen the Deployment go")
		Expect(as(human, "", "-n", ns, "annotate", "configmap", "app-flags", "configward.dev/break-glass-delete=INC-7 leaked").ExitCode).To(Equal(0))
		Expect(as(human, "", "-n", ns, "delete", "deployment", "web").ExitCode).To(Equal(0))
		res = as(human, "", "-n", ns, "delete", "configmap", "app-flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf(`Warning: [out-of-pipeline-edit] break-glass by alice: deleted ConfigMap %s/app-flags outside the pipeline, reason "INC-7 leaked"`, ns)))
		Eventually(func() []string { return eventsFor(ns, "app-flags", "BreakGlass") }, 10*time.Second, 200*time.Millisecond).Should(HaveLen(1))
	})

	It("refuses deleting config in use in a namespace without change control, and allows it once the consumer is gone", func() {
		plain := newNamespace("inuse", nil)
		apply(configMap(plain, "flags", map[string]string{"a": "1"}, nil), workloadYAML("Pod", plain, "runner", fmt.Sprintf(envFromSpec, "flags")))
		Eventually(func() int {
			return as(human, "", "-n", plain, "delete", "configmap", "flags", "--dry-run=server").ExitCode
		}, 10*time.Second, 200*time.Millisecond).Should(Equal(1))
		res := as(human, "", "-n", plain, "delete", "configmap", "flags")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(Equal(fmt.Sprintf("Error from server (Forbidden): admission webhook \"changes.validate.configward.dev\" denied the request: [config-in-use-delete] ConfigMap %s/flags is used by Pod runner: their pods fail to start or to refresh it once it is gone. Remove the references (or the workloads) first.\n", plain)))
		Expect(as(human, "", "-n", plain, "delete", "pod", "runner", "--grace-period=0", "--force").ExitCode).To(Equal(0))
		res = as(human, "", "-n", plain, "delete", "configmap", "flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	})

	Describe("never blocks", func() {
		It("deleting a namespace full of governed config that workloads use (kube-controller-manager's namespace controller)", func() {
			var manifests []string
			for i := range 10 {
				manifests = append(manifests,
					configMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"k": "v"}, nil),
					fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: s-%d, namespace: %s}\nstringData: {k: v}\n", i, ns),
					deployment(ns, fmt.Sprintf("d-%d", i), "", fmt.Sprintf(envFromSpec, fmt.Sprintf("cm-%d", i))))
			}
			asPipeline(manifests...)
			res := env.Kubectl("", "delete", "namespace", ns, "--wait=true", "--timeout=90s")
			Expect(res.ExitCode).To(Equal(0), res.Stderr)
			err := env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s still exists: %v", ns, err)
		})

		It("the root CA publisher restoring kube-root-ca.crt, while a human may not touch it", func() {
			var ca corev1.ConfigMap
			Eventually(func() error {
				return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}, &ca)
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
			want := ca.Data["ca.crt"]
			Expect(want).To(ContainSubstring("BEGIN CERTIFICATE"))

			res := as(human, "", "-n", ns, "patch", "configmap", "kube-root-ca.crt", "--type=merge", "-p", `{"data":{"ca.crt":"forged"}}`)
			Expect(res.ExitCode).To(Equal(1))
			Expect(res.Stderr).To(ContainSubstring(denial(ns, human, `data["ca.crt"]`, "ConfigMap", "kube-root-ca.crt")))

			Expect(as(pipelineSA, "", "-n", ns, "patch", "configmap", "kube-root-ca.crt", "--type=merge", "-p", `{"data":{"ca.crt":"stale"}}`).ExitCode).To(Equal(0))
			Eventually(func() string {
				_ = env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}, &ca)
				return ca.Data["ca.crt"]
			}, 30*time.Second, 200*time.Millisecond).Should(Equal(want), "the root CA publisher did not restore kube-root-ca.crt")
		})

		It("garbage collection of config owned by a deleted object", func() {
			asPipeline(configMap(ns, "owner", map[string]string{"a": "1"}, nil))
			owner := storedOwner(ns, "owner")
			dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", Namespace: ns,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner}}},
				Data: map[string]string{"b": "2"}}
			// The pipeline sets the owner reference: owner references are
			// governing metadata.
			Expect(pipelineClient().Create(context.Background(), dependent)).To(Succeed())
			Expect(as(pipelineSA, "", "-n", ns, "delete", "configmap", "owner").ExitCode).To(Equal(0))
			Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{}))
			}, 60*time.Second, 250*time.Millisecond).Should(BeTrue(), "the garbage collector did not delete the dependent ConfigMap")
		})

		It("the service-account token controller filling a token Secret", func() {
			Expect(env.Client.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: ns}})).To(Succeed())
			asPipeline(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: builder-token\n  namespace: %s\n  annotations: {kubernetes.io/service-account.name: builder}\ntype: kubernetes.io/service-account-token\n", ns))
			Eventually(func() []string {
				var s corev1.Secret
				_ = env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "builder-token"}, &s)
				return keysOf(s.Data)
			}, 30*time.Second, 200*time.Millisecond).Should(ContainElements("token", "ca.crt", "namespace"))
		})

		It("configward's own service account", func() {
			res := as(configwardSA, "", "-n", ns, "patch", "configmap", "app-flags", "--type=merge", "-p", `{"data":{"level":"x"}}`)
			Expect(res.ExitCode).To(Equal(0), res.Stderr)
		})

		It("Helm's release Secrets, written by the real helm run by anyone", func() {
			chart := GinkgoT().TempDir()
			Expect(os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: tiny\nversion: 0.1.0\n"), 0o600)).To(Succeed())
			Expect(os.MkdirAll(filepath.Join(chart, "templates"), 0o700)).To(Succeed())
			Expect(os.WriteFile(filepath.Join(chart, "templates", "deployment.yaml"), []byte(strings.TrimSpace(deployment(ns, "tiny", "", "containers:\n- name: app\n  image: registry.example/app:{{ .Release.Revision }}\n"))+"\n"), 0o600)).To(Succeed())
			for _, args := range [][]string{
				{"install", "tiny", chart},
				{"upgrade", "tiny", chart},
				{"uninstall", "tiny"},
			} {
				res := env.Helm(append(args, "-n", ns, "--kube-as-user", human)...)
				Expect(res.ExitCode).To(Equal(0), "helm %v as %s: %s", args, human, res.Stderr)
			}
		})

		It("Helm's release Secrets, for anyone", func() {
			Expect(env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Namespace: ns},
				Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("H4sI")}})).To(Succeed())
			Expect(as(human, "", "-n", ns, "patch", "secret", "sh.helm.release.v1.web.v1", "--type=merge", "-p", `{"data":{"release":"SDRzSQ=="}}`).ExitCode).To(Equal(0))
			Expect(as(human, "", "-n", ns, "delete", "secret", "sh.helm.release.v1.web.v1").ExitCode).To(Equal(0))
		})

		It("cert-manager renewing the Secrets it manages, and only those", func() {
			asPipeline(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: serving-tls\n  namespace: %[1]s\n  annotations: {cert-manager.io/certificate-name: serving}\ntype: kubernetes.io/tls\nstringData: {tls.crt: a, tls.key: b}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %[1]s}\nstringData: {password: a}\n", ns))
			Expect(as(certManagerSA, "", "-n", ns, "patch", "secret", "serving-tls", "--type=merge", "-p", `{"stringData":{"tls.crt":"c","tls.key":"d"}}`).ExitCode).To(Equal(0))
			Expect(as(certManagerSA, "", "-n", ns, "patch", "secret", "db", "--type=merge", "-p", `{"stringData":{"password":"c"}}`).ExitCode).To(Equal(1))
			Expect(as(human, "", "-n", ns, "patch", "secret", "serving-tls", "--type=merge", "-p", `{"stringData":{"tls.key":"e"}}`).ExitCode).To(Equal(1))
		})
	})
})

func storedOwner(ns, name string) types.UID {
	var cm corev1.ConfigMap
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
	return cm.UID
}

func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
