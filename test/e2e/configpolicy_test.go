package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// policyLabel selects the namespaces of one spec's policies, so that the
// cluster-scoped policies of one spec never reach another's namespaces.
const policyLabel = "e2e.configward.dev/policy"

// applyPolicy applies a ConfigPolicy with kubectl and deletes it when the
// spec ends.
func applyPolicy(y string) {
	res := env.Kubectl(y, "apply", "-f", "-")
	Expect(res.ExitCode).To(Equal(0), res.Stderr)
	name := decode(y).GetName()
	DeferCleanup(func() {
		env.Kubectl("", "delete", "configpolicy", name, "--ignore-not-found")
	})
}

func policyYAML(name, selectorValue, body string) string {
	return fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: %s}\nspec:\n  namespaceSelector: {matchLabels: {%s: %s}}\n%s",
		name, policyLabel, selectorValue, indent(body, 2))
}

// policyNamespace returns a namespace selected by the policies whose
// selector value is tag, holding a Secret the workloads use through env.
func policyNamespace(tag string) string {
	ns := newNamespace("policy", map[string]string{policyLabel: tag})
	apply(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: x}\n", ns))
	return ns
}

// secretEnvDeployment is a Deployment that secret-in-env finds (Warn by
// default).
func secretEnvDeployment(ns, name, annotations string) string {
	return deployment(ns, name, annotations, "containers:\n- name: app\n  image: registry.example/app:1\n  envFrom: [{secretRef: {name: db}}]\n")
}

// dryRun applies manifests with a server-side dry run and returns kubectl's
// exit code and stderr.
func dryRun(y string) (int, string) {
	res := env.Kubectl(y, "apply", "--dry-run=server", "-f", "-")
	return res.ExitCode, res.Stderr
}

func policyReady(name string) func() metav1.Condition {
	return func() metav1.Condition {
		var cp v1alpha1.ConfigPolicy
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &cp); err != nil {
			return metav1.Condition{}
		}
		c := meta.FindStatusCondition(cp.Status.Conditions, "Ready")
		if c == nil || cp.Status.ObservedGeneration != cp.Generation {
			return metav1.Condition{}
		}
		return *c
	}
}

var _ = Describe("ConfigPolicy", func() {
	// The bound: a policy change is in force on every request that starts
	// 5 s after kubectl apply returns (measured: 0.4-1.2 s, kubectl's own
	// round trips included).
	It("changes a rule's action without a restart, within 5 s", func() {
		tag := "hot-swap"
		ns := policyNamespace(tag)
		code, stderr := dryRun(secretEnvDeployment(ns, "api", ""))
		Expect(code).To(Equal(0))
		Expect(stderr).To(HavePrefix("Warning: [secret-in-env]"), "the default is Warn")

		start := time.Now()
		applyPolicy(policyYAML("hot-swap", tag, "rules:\n  secret-in-env: {action: Deny}\n"))
		Eventually(func() int { c, _ := dryRun(secretEnvDeployment(ns, "api", "")); return c }, 5*time.Second, 50*time.Millisecond).Should(Equal(1))
		toDeny := time.Since(start)

		start = time.Now()
		applyPolicy(policyYAML("hot-swap", tag, "rules:\n  secret-in-env: {action: \"Off\"}\n"))
		Eventually(func() string { _, s := dryRun(secretEnvDeployment(ns, "api", "")); return s }, 5*time.Second, 50*time.Millisecond).Should(BeEmpty())
		toOff := time.Since(start)
		AddReportEntry("ConfigPolicy action change to effect (kubectl apply to first request under the new action)",
			fmt.Sprintf("Warn->Deny %s, Deny->Off %s", toDeny, toOff))
		GinkgoWriter.Printf("policy change took effect after %s (Warn->Deny) and %s (Deny->Off)\n", toDeny, toOff)

		Eventually(policyReady("hot-swap"), 10*time.Second, 100*time.Millisecond).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "Compiled")))
		var cp v1alpha1.ConfigPolicy
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: "hot-swap"}, &cp)).To(Succeed())
		Expect(cp.Status.ActiveHash).To(HaveLen(64))
	})

	It("applies the strictest action where two policies overlap, and the defaults where none selects", func() {
		ns := policyNamespace("overlap")
		applyPolicy(policyYAML("overlap-lenient", "overlap", "rules:\n  secret-in-env: {action: \"Off\"}\n"))
		applyPolicy("apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: overlap-strict}\nspec:\n" +
			"  namespaceSelector: {matchExpressions: [{key: " + policyLabel + ", operator: In, values: [overlap]}]}\n  rules:\n    secret-in-env: {action: Deny}\n")
		Eventually(func() string { _, s := dryRun(secretEnvDeployment(ns, "api", "")); return s }, 10*time.Second, 100*time.Millisecond).
			Should(ContainSubstring(`denied the request: [secret-in-env]`))

		unselected := policyNamespace("nobody")
		code, stderr := dryRun(secretEnvDeployment(unselected, "api", ""))
		Expect(code).To(Equal(0))
		Expect(stderr).To(HavePrefix("Warning: [secret-in-env]"))
	})

	It("refuses a broken policy at apply, with the line of the Rego error", func() {
		for _, tc := range []struct{ body, want string }{
			{"customRules:\n- id: no-latest\n  rego: |\n    package configward.custom.no_latest\n\n    findings contains f if {\n      f := undefined_thing\n    }\n",
				`The ConfigPolicy "broken" is invalid: spec.customRules: Invalid value: 1 error occurred: configpolicy/broken/no-latest.rego:4: rego_unsafe_var_error: var undefined_thing is unsafe`},
			{"rules:\n  secret-in-envv: {action: Deny}\n", `The ConfigPolicy "broken" is invalid: spec.rules[secret-in-envv]: Invalid value: unknown rule id "secret-in-envv"`},
			// Every problem at once, one line each.
			{"rules:\n  nope: {action: Deny}\npipeline: {serviceAccounts: [deployer]}\n", "The ConfigPolicy \"broken\" is invalid: \n" +
				"* spec.rules[nope]: Invalid value: unknown rule id \"nope\" (built-in rules: config-in-use-delete, config-schema, hot-config-in-env, missing-config-ref, out-of-pipeline-edit, secret-file-mode, secret-in-env, subpath-config; or declare it in spec.customRules)\n" +
				"* spec.pipeline.serviceAccounts[0]: Invalid value: service account \"deployer\": want namespace/name\n"},
			{"rules: {}\n", ""},
		} {
			y := policyYAML("broken", "refused", tc.body)
			if tc.want == "" {
				y = strings.Replace(y, "matchLabels: {"+policyLabel+": refused}", "matchExpressions: [{key: a, operator: Near}]", 1)
				tc.want = `The ConfigPolicy "broken" is invalid: spec.namespaceSelector: Invalid value: "Near" is not a valid label selector operator`
			}
			res := env.Kubectl(y, "apply", "-f", "-")
			Expect(res.ExitCode).To(Equal(1), y)
			Expect(res.Stderr).To(ContainSubstring(tc.want))
			Expect(env.Kubectl("", "get", "configpolicy", "broken").ExitCode).To(Equal(1), "a refused policy must not be stored")
		}
	})

	It("keeps the last good generation when a broken one is stored while the webhook is not registered, and says so in its status", func() {
		tag := "lkg"
		ns := policyNamespace(tag)
		applyPolicy(policyYAML("lkg", tag, "rules:\n  secret-in-env: {action: Deny}\n"))
		Eventually(func() int { c, _ := dryRun(secretEnvDeployment(ns, "api", "")); return c }, 10*time.Second, 100*time.Millisecond).Should(Equal(1))
		Eventually(policyReady("lkg"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		var good v1alpha1.ConfigPolicy
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: "lkg"}, &good)).To(Succeed())

		restore := withoutWebhook("configpolicies.validate.configward.dev")
		broken := policyYAML("lkg", tag, "rules:\n  secret-in-env: {action: \"Off\"}\ncustomRules:\n- id: oops\n  rego: |\n    package configward.custom.oops\n\n    findings contains f if { f := nope }\n")
		Eventually(func() int { return env.Kubectl(broken, "apply", "-f", "-").ExitCode }, 10*time.Second, 200*time.Millisecond).Should(Equal(0))
		restore()

		Eventually(policyReady("lkg"), 10*time.Second, 100*time.Millisecond).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "CompileFailed"),
			HaveField("Message", ContainSubstring("configpolicy/lkg/oops.rego:3: rego_unsafe_var_error: var nope is unsafe")),
			HaveField("Message", ContainSubstring("generation 1, the last that compiled, stays in force (activeHash)"))))
		var now v1alpha1.ConfigPolicy
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: "lkg"}, &now)).To(Succeed())
		Expect(now.Status.ActiveHash).To(Equal(good.Status.ActiveHash))
		Consistently(func() int { c, _ := dryRun(secretEnvDeployment(ns, "api", "")); return c }, 3*time.Second, 250*time.Millisecond).
			Should(Equal(1), "the broken generation (which turns the rule off) must not be in force")
	})

	It("lets an object exempt itself only where the policy allows it, and only with a reason", func() {
		tag := "exempt"
		ns := policyNamespace(tag)
		apply(configMap(ns, "hot-flags", map[string]string{"a": "1"}, map[string]string{"configward.dev/reload": "hot"}))
		applyPolicy(policyYAML("exempt", tag, "rules:\n  secret-in-env: {action: Deny, allowExemption: true}\n"))
		Eventually(func() int { c, _ := dryRun(secretEnvDeployment(ns, "api", "")); return c }, 10*time.Second, 100*time.Millisecond).Should(Equal(1))

		By("allowed, with a reason: audited and recorded")
		res := env.Kubectl(secretEnvDeployment(ns, "vendor", "  annotations: {configward.dev/exempt.secret-in-env: \"vendor image reads env only\"}"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(BeEmpty(), "an exempted finding is audited, not printed")
		Eventually(func() []string { return eventsFor(ns, "vendor", "SecretInEnv") }, 10*time.Second, 200*time.Millisecond).
			Should(ConsistOf(HaveSuffix(`(Audit: exempted by configward.dev/exempt.secret-in-env: "vendor image reads env only")`)))

		By("without a reason")
		res = env.Kubectl(secretEnvDeployment(ns, "blank", "  annotations: {configward.dev/exempt.secret-in-env: \"\"}"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring("denied the request: [secret-in-env]"))
		Expect(res.Stderr).To(ContainSubstring("Warning: [secret-in-env] configward.dev/exempt.secret-in-env has no reason, so it does not count"))

		By("a rule the policy does not let objects exempt")
		res = env.Kubectl(deployment(ns, "hot", "  annotations: {configward.dev/exempt.hot-config-in-env: \"we restart by hand\"}",
			"containers:\n- name: app\n  image: registry.example/app:1\n  envFrom: [{configMapRef: {name: hot-flags}}]\n"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring("denied the request: [hot-config-in-env]"))
		Expect(res.Stderr).To(ContainSubstring("Warning: [hot-config-in-env] configward.dev/exempt.hot-config-in-env does not count here"))
	})

	It("runs custom Rego rules that deny and warn through kubectl", func() {
		tag := "custom"
		ns := policyNamespace(tag)
		applyPolicy(policyYAML("custom", tag, `customRules:
- id: no-latest-tag
  action: Deny
  rego: |
    package configward.custom.no_latest_tag

    findings contains f if {
      some i, c in input.object.spec.template.spec.containers
      endswith(c.image, ":latest")
      f := {
        "rule": "no-latest-tag",
        "path": sprintf("spec.template.spec.containers[%d].image", [i]),
        "message": sprintf("%s container %q uses a :latest image; pin a version so a rollout is reproducible", [input.workload.display, c.name]),
      }
    }
- id: flags-must-be-hot
  rego: |
    package configward.custom.flags_must_be_hot

    findings contains f if {
      some ref in input.references
      ref.kind == "ConfigMap"
      endswith(ref.name, "-flags")
      ref.target.exists
      ref.target.reload != "hot"
      f := {
        "rule": "flags-must-be-hot",
        "path": ref.path,
        "message": sprintf("%s reads ConfigMap %q, which holds feature flags: annotate it configward.dev/reload=hot so flag flips do not restart pods", [input.workload.display, ref.name]),
      }
    }
`))
		latest := deployment(ns, "web", "", "containers:\n- name: app\n  image: registry.example/app:latest\n")
		Eventually(func() string { _, s := dryRun(latest); return s }, 10*time.Second, 100*time.Millisecond).Should(ContainSubstring("no-latest-tag"))
		res := env.Kubectl(latest, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(fmt.Sprintf(`denied the request: [no-latest-tag] Deployment %s/web container "app" uses a :latest image; pin a version so a rollout is reproducible`, ns)))

		apply(configMap(ns, "app-flags", map[string]string{"new-checkout": "on"}, nil))
		res = env.Kubectl(deployment(ns, "web", "", "containers:\n- name: app\n  image: registry.example/app:1.2\n  envFrom: [{configMapRef: {name: app-flags}}]\n"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(Equal(fmt.Sprintf("Warning: [flags-must-be-hot] Deployment %s/web reads ConfigMap \"app-flags\", which holds feature flags: annotate it configward.dev/reload=hot so flag flips do not restart pods\n", ns)))

		By("not where the policy does not select")
		code, stderr := dryRun(deployment(policyNamespace("elsewhere"), "web", "", "containers:\n- name: app\n  image: registry.example/app:latest\n"))
		Expect(code).To(Equal(0), stderr)
		Expect(stderr).To(BeEmpty())
	})

	It("sandboxes custom Rego: no network at apply, and a rule that hangs, fails or forges an id is contained to its own finding at its own action", func() {
		By("a rule calling http.send is refused at apply, naming the rule, the line and the built-in")
		res := env.Kubectl(policyYAML("sandbox-net", "sandbox-net", `customRules:
- id: metadata
  rego: |
    package configward.custom.metadata

    findings contains f if {
      r := http.send({"method": "GET", "url": "http://169.254.169.254/latest/meta-data/"})
      f := {"rule": "metadata", "message": r.raw_body}
    }
`), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`The ConfigPolicy "sandbox-net" is invalid: spec.customRules[0].rego: Invalid value: configpolicy/sandbox-net/metadata.rego:4: calls http.send, which ConfigPolicy rules may not use: network, runtime and non-deterministic built-ins are not available (rules must decide from their input alone)`))
		Expect(env.Kubectl("", "get", "configpolicy", "sandbox-net").ExitCode).To(Equal(1), "a refused policy was stored")

		By("a rule that never ends, one that fails at run time and one that reports a built-in rule's id")
		tag := "sandbox"
		ns := policyNamespace(tag)
		applyPolicy(policyYAML("sandbox", tag, `customRules:
- id: a-spin
  action: Warn
  rego: |
    package configward.custom.a_spin

    findings contains f if {
      some i in numbers.range(1, 1e12)
      i < 0
      f := {"rule": "a-spin", "message": "never"}
    }
- id: b-crash
  action: Deny
  rego: |
    package configward.custom.b_crash

    findings contains f if {
      f := {"rule": "b-crash", "message": sprintf("%d", [to_number(input.object.metadata.name)])}
    }
- id: c-forge
  action: Warn
  rego: |
    package configward.custom.c_forge

    findings contains {"rule": "hot-config-in-env", "action": "Deny", "message": "forged"}
`))
		d := secretEnvDeployment(ns, "web", "")
		Eventually(func() string { _, s := dryRun(d); return s }, 10*time.Second, 100*time.Millisecond).Should(ContainSubstring("b-crash"))
		res = env.Kubectl(d, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1), "the failing rule's action is Deny")
		Expect(res.Stderr).To(MatchRegexp(`Warning: \[a-spin\] custom rule "a-spin" of ConfigPolicy "sandbox" could not be evaluated: it ran out of its time budget \(\d+ms of the 100ms the custom rules share per request\); fix the rule in its ConfigPolicy\n`))
		Expect(res.Stderr).To(ContainSubstring(`Warning: [c-forge] custom rule "c-forge" of ConfigPolicy "sandbox" could not be evaluated: reported a finding for rule "hot-config-in-env"; a custom rule may only report its own id "c-forge"; fix the rule in its ConfigPolicy` + "\n"))
		Expect(res.Stderr).To(ContainSubstring(`Warning: [secret-in-env] `), "the built-in rules did not run")
		Expect(res.Stderr).To(ContainSubstring(`denied the request: [b-crash] custom rule "b-crash" of ConfigPolicy "sandbox" could not be evaluated: configpolicy/sandbox/b-crash.rego:4: eval_builtin_error: to_number: strconv.ParseFloat: parsing "web": invalid syntax; fix the rule in its ConfigPolicy`))
		Expect(res.Stderr).NotTo(ContainSubstring("forged"))
		Expect(env.Kubectl("", "get", "deployment", "web", "-n", ns).ExitCode).To(Equal(1), "a denied Deployment was stored")
	})

	It("runs the audit-first sample: everything recorded, nothing refused, nothing rolled", func() {
		sample, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "audit-first.yaml"))
		Expect(err).NotTo(HaveOccurred())
		ns := policyNamespace("audit-first")
		// The sample selects every namespace; here it selects this spec's only.
		scoped := strings.Replace(string(sample), "namespaceSelector: {}", fmt.Sprintf("namespaceSelector: {matchLabels: {%s: audit-first}}", policyLabel), 1)
		Expect(scoped).NotTo(Equal(string(sample)))
		applyPolicy(scoped)

		hot := configMap(ns, "flags", map[string]string{"beta": "on"}, map[string]string{"configward.dev/reload": "hot"})
		app := configMap(ns, "app", map[string]string{"app.yaml": "port: 8080"}, nil)
		schemaless := configMap(ns, "payments", map[string]string{"app.yaml": "port: 9090"}, map[string]string{"configward.dev/schema": "nowhere"})
		web := deployment(ns, "web", "", `containers:
- name: app
  image: registry.example/app:1
  envFrom: [{configMapRef: {name: flags}}, {secretRef: {name: db}}]
  env: [{name: MISSING, valueFrom: {configMapKeyRef: {name: nowhere, key: k}}}]
  volumeMounts: [{name: app, mountPath: /etc/app/app.yaml, subPath: app.yaml}]
volumes: [{name: app, configMap: {name: app}}]
`)
		Eventually(func() int { code, _ := dryRun(hot + "\n---\n" + web); return code }, 10*time.Second, 100*time.Millisecond).Should(Equal(0),
			"hot-config-in-env still denies: the sample did not come into force")
		res := env.Kubectl(strings.Join([]string{hot, app, schemaless, web}, "\n---\n"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(BeEmpty(), "Audit warns no one")

		By("every finding is an Event")
		for _, reason := range []string{"HotConfigInEnv", "SecretInEnv", "SubpathConfig", "MissingConfigRef", "ConfigSchema"} {
			Eventually(func() string {
				return env.Kubectl("", "get", "events", "-n", ns, "--field-selector", "reason="+reason, "-o", "jsonpath={.items[*].message}").Stdout
			}, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring("(Audit"), reason)
		}
		By("rollouts are off: nothing is stamped")
		Expect(env.Kubectl("", "get", "deployment", "web", "-n", ns, "-o", `jsonpath={.spec.template.metadata.annotations.configward\.dev/config-hash}`).Stdout).To(BeEmpty())
		By("a ConfigMap in use is deleted, and that is recorded too")
		res = env.Kubectl("", "delete", "configmap", "app", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() string {
			return env.Kubectl("", "get", "events", "-n", ns, "--field-selector", "reason=ConfigInUseDelete", "-o", "jsonpath={.items[*].message}").Stdout
		}, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring("(Audit"))
	})

	It("turns config-hash rollouts off, or leaves Secrets out of the hash, where a policy says so", func() {
		stamped := func(ns, consumes string) string {
			obj := decode(podYAML(ns, "probe", consumes))
			Expect(env.Client.Create(context.Background(), obj, &client.CreateOptions{DryRun: []string{metav1.DryRunAll}})).To(Succeed())
			return obj.GetAnnotations()[v1alpha1.ConfigHashAnnotation]
		}
		off := policyNamespace("rollouts-off")
		apply(configMap(off, "app-config", map[string]string{"a": "1"}, nil))
		Expect(stamped(off, "app-config")).NotTo(BeEmpty(), "stamped by default")
		applyPolicy(policyYAML("rollouts-off", "rollouts-off", "rollouts: {disabled: true}\n"))
		Eventually(func() string { return stamped(off, "app-config") }, 5*time.Second, 100*time.Millisecond).Should(BeEmpty())

		noSecrets := policyNamespace("rollouts-no-secrets")
		secretPod := func() string {
			obj := decode(fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: probe, namespace: %s}\nspec:\n  containers: [{name: app, image: app, volumeMounts: [{name: s, mountPath: /s}]}]\n  volumes: [{name: s, secret: {secretName: db}}]\n", noSecrets))
			Expect(env.Client.Create(context.Background(), obj, &client.CreateOptions{DryRun: []string{metav1.DryRunAll}})).To(Succeed())
			return obj.GetAnnotations()[v1alpha1.ConfigHashAnnotation]
		}
		Expect(secretPod()).NotTo(BeEmpty())
		applyPolicy(policyYAML("rollouts-no-secrets", "rollouts-no-secrets", "rollouts: {excludeSecrets: true}\n"))
		Eventually(secretPod, 5*time.Second, 100*time.Millisecond).Should(BeEmpty(), "a pod consuming only a Secret has nothing to hash")
	})

	It("sets config-schema's action, and lets a ConfigMap exempt itself from its schema where allowed", func() {
		tag := "schema-action"
		ns := policyNamespace(tag)
		apply(schemaYAML(ns, "settings", []string{"settings", "legacy"}, "port", "text", `{"pattern": "^[0-9]+$"}`, ""))
		Eventually(schemaReady(ns, "settings"), 10*time.Second, 100*time.Millisecond).Should(Equal("True"))
		bad := literalConfigMap(ns, "settings", map[string]string{"port": "eighty"}, "")
		Eventually(func() int { c, _ := dryRun(bad); return c }, 10*time.Second, 100*time.Millisecond).Should(Equal(1), "Deny by default")

		applyPolicy(policyYAML("schema-action", tag, "rules:\n  config-schema: {action: Warn, allowExemption: true}\n"))
		Eventually(func() string { _, s := dryRun(bad); return s }, 5*time.Second, 100*time.Millisecond).
			Should(HavePrefix("Warning: [config-schema] ConfigMap "+ns+`/settings breaks ConfigSchema "settings" (1 violation); fix the values and apply again: key "port" line 1 column 1: expected a string matching`),
				"a multi-line finding reaches kubectl as one line: the API server drops warnings with line breaks")

		res := env.Kubectl(literalConfigMap(ns, "legacy", map[string]string{"port": "eighty"}, "  annotations: {configward.dev/exempt.config-schema: \"read by a legacy parser; fixed in TICKET-9\"}\n"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(BeEmpty(), "an exempted finding is audited, not printed")
		Eventually(func() []string { return eventsFor(ns, "legacy", "ConfigSchema") }, 10*time.Second, 200*time.Millisecond).
			Should(ConsistOf(ContainSubstring(`exempted by configward.dev/exempt.config-schema: "read by a legacy parser; fixed in TICKET-9"`)))
	})

	It("names the pipeline for change control", func() {
		tag := "pipeline"
		ns := policyNamespace(tag)
		apply(configMap(ns, "flags", map[string]string{"level": "info"}, nil))
		applyPolicy(policyYAML("pipeline", tag, "pipeline:\n  serviceAccounts: [ci/policy-deployer]\n"))
		Eventually(func() int {
			return as(human, "", "-n", ns, "patch", "configmap", "flags", "--dry-run=server", "--type=merge", "-p", `{"data":{"level":"debug"}}`).ExitCode
		}, 10*time.Second, 100*time.Millisecond).Should(Equal(1))
		res := as("system:serviceaccount:ci:policy-deployer", "", "-n", ns, "patch", "configmap", "flags", "--type=merge", "-p", `{"data":{"level":"debug"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	})
})

// withoutWebhook takes one of configward's webhooks out of its validating
// or mutating configuration, as if configward were not installed or the
// webhook could not be reached with failurePolicy Ignore, and returns a
// function that puts it back.
func withoutWebhook(name string) (restore func()) {
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(env.Client.List(context.Background(), &validating)).To(Succeed())
	for i := range validating.Items {
		if restore := removeWebhook(&validating.Items[i], func(c *admissionregistrationv1.ValidatingWebhookConfiguration) *[]admissionregistrationv1.ValidatingWebhook {
			return &c.Webhooks
		}, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == name }); restore != nil {
			return restore
		}
	}
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	Expect(env.Client.List(context.Background(), &mutating)).To(Succeed())
	for i := range mutating.Items {
		if restore := removeWebhook(&mutating.Items[i], func(c *admissionregistrationv1.MutatingWebhookConfiguration) *[]admissionregistrationv1.MutatingWebhook {
			return &c.Webhooks
		}, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == name }); restore != nil {
			return restore
		}
	}
	Fail("webhook " + name + " is not installed")
	return nil
}

// removeWebhook removes the webhook of cfg that is, if cfg has one, and
// returns how to add it back to the configuration as it is by then; nil
// when cfg has none.
func removeWebhook[C client.Object, W any](cfg C, webhooks func(C) *[]W, is func(W) bool) (restore func()) {
	ctx := context.Background()
	hooks := webhooks(cfg)
	j := slices.IndexFunc(*hooks, is)
	if j < 0 {
		return nil
	}
	removed := (*hooks)[j]
	*hooks = slices.Delete(*hooks, j, j+1)
	Expect(env.Client.Update(ctx, cfg)).To(Succeed())
	return func() {
		now := cfg.DeepCopyObject().(C)
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), now)).To(Succeed())
		*webhooks(now) = append(*webhooks(now), removed)
		Expect(env.Client.Update(ctx, now)).To(Succeed())
	}
}
