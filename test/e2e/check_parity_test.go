package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/check"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

var _ = Describe("configward check", func() {
	It("gives the same findings and exemption notes offline as the admission webhooks give kubectl", func() {
		ns := schemaNamespace()
		objs, err := check.Load([]string{filepath.Join(framework.RepoRoot(), "internal", "check", "testdata", "shop")}, nil)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			o.Obj.SetNamespace(ns)
		}
		store, err := configpolicy.New(context.Background(), logr.Discard())
		Expect(err).NotTo(HaveOccurred())
		// The namespace holds exactly these objects, so the set is complete.
		results, err := check.Run(context.Background(), store.Current(), objs, check.Options{Complete: true})
		Expect(err).NotTo(HaveOccurred())

		expect := func(kind string) (denied []string, warned []string) {
			for _, r := range results {
				if r.Kind != kind {
					continue
				}
				switch r.Action {
				case rules.Deny:
					denied = append(denied, rules.Line(rules.Finding{Rule: r.Rule, Message: r.Message}))
				case rules.Warn, check.Note:
					warned = append(warned, "Warning: "+rules.Warning(rules.Finding{Rule: r.Rule, Message: r.Message}))
				}
			}
			return denied, warned
		}
		manifest := func(kind string) string {
			for _, o := range objs {
				if o.Obj.GetObjectKind().GroupVersionKind().Kind == kind && o.Obj.GetName() != "flags" {
					y, err := yaml.Marshal(o.Obj)
					Expect(err).NotTo(HaveOccurred())
					return string(y)
				}
			}
			Fail("no " + kind)
			return ""
		}

		By("storing the config the Deployment and the ConfigMap depend on")
		for _, o := range objs {
			if o.Obj.GetName() == "flags" || o.Obj.GetObjectKind().GroupVersionKind().Kind == "ConfigSchema" {
				y, err := yaml.Marshal(o.Obj)
				Expect(err).NotTo(HaveOccurred())
				apply(string(y))
			}
		}
		Eventually(schemaReady(ns, "settings"), 10*time.Second).Should(Equal("True"))

		_, deploymentWarnings := expect("Deployment")
		Expect(deploymentWarnings).To(ContainElement(ContainSubstring("configward.dev/exempt.secret-in-env does not count here")),
			"the fixture's exemption note must be part of the comparison")
		for _, kind := range []string{"Deployment", "ConfigMap"} {
			denied, warned := expect(kind)
			Expect(denied).NotTo(BeEmpty(), "the fixture should make %s denied", kind)
			res := env.Kubectl(manifest(kind), "create", "--dry-run=server", "-f", "-")
			Expect(res.ExitCode).To(Equal(1), kind)
			Expect(res.Stderr).To(ContainSubstring("denied the request: "+strings.Join(denied, "\n")), kind)
			var gotWarnings []string
			for _, l := range strings.Split(res.Stderr, "\n") {
				if strings.HasPrefix(l, "Warning: ") {
					gotWarnings = append(gotWarnings, l)
				}
			}
			Expect(gotWarnings).To(ConsistOf(warned), kind)
		}
	})

	It("gives a declared Rollout the same findings offline as the webhook gives kubectl", func() {
		ns := rulesNamespace()
		kinds, err := workload.LoadDeclarations(workloadKindsFile)
		Expect(err).NotTo(HaveOccurred())
		manifest := argoRollout(ns, "checkout", `containers:
- name: api
  image: app
  volumeMounts: [{name: flags, mountPath: /etc/app/flags.yaml, subPath: flags.yaml}]
  env: [{name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: db, key: password}}}]
volumes: [{name: flags, configMap: {name: hot-flags}}]
`, "")
		dir := GinkgoT().TempDir()
		// The config it references, as rulesNamespace stored it.
		config := configMap(ns, "hot-flags", map[string]string{"flags.yaml": "a: 1"}, map[string]string{"configward.dev/reload": "hot"}) +
			"---\n" + fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: not-printed}\n", ns)
		Expect(os.WriteFile(filepath.Join(dir, "rollout.yaml"), []byte(manifest), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o600)).To(Succeed())
		objs, err := check.LoadKinds(kinds, []string{dir}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(HaveLen(3))
		store, err := configpolicy.New(context.Background(), logr.Discard())
		Expect(err).NotTo(HaveOccurred())
		results, err := check.Run(context.Background(), store.Current(), objs, check.Options{Complete: true, Kinds: kinds})
		Expect(err).NotTo(HaveOccurred())
		var denied, warned []string
		for _, r := range results {
			switch r.Action {
			case rules.Deny:
				denied = append(denied, rules.Line(rules.Finding{Rule: r.Rule, Message: r.Message}))
			case rules.Warn:
				warned = append(warned, "Warning: "+rules.Warning(rules.Finding{Rule: r.Rule, Message: r.Message}))
			}
		}
		Expect(denied).To(ConsistOf(HavePrefix("[subpath-config] Rollout " + ns + "/checkout")))
		Expect(warned).To(ConsistOf(HavePrefix("Warning: [secret-in-env] Rollout " + ns + "/checkout")))

		res := env.Kubectl(manifest, "create", "--dry-run=server", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring("denied the request: " + strings.Join(denied, "\n")))
		var gotWarnings []string
		for _, l := range strings.Split(res.Stderr, "\n") {
			if strings.HasPrefix(l, "Warning: ") {
				gotWarnings = append(gotWarnings, l)
			}
		}
		Expect(gotWarnings).To(ConsistOf(warned))
	})
})

// One judgement (workloadrules.Judge) serves admission, `configward check`
// and the Reports of existing workloads; under every ConfigPolicy setting
// that changes what the rules find or do, the three must agree.
var _ = Describe("admission, configward check and the Reports under a ConfigPolicy", func() {
	const customRule = `customRules:
- id: no-latest-parity
  rego: |
    package configward.custom.no_latest_parity

    findings contains f if {
      some i, c in input.object.spec.template.spec.containers
      endswith(c.image, ":latest")
      f := {"rule": "no-latest-parity", "path": sprintf("spec.template.spec.containers[%d].image", [i]),
        "message": sprintf("%s container %q uses a :latest image", [input.workload.display, c.name])}
    }
`
	const subPathMount = "containers:\n- name: app\n  image: registry.example/app:1\n" +
		"  volumeMounts: [{name: cfg, mountPath: /etc/app/app.yaml, subPath: app.yaml}]\nvolumes: [{name: cfg, configMap: {name: cfg}}]\n"
	const secretEnv = "containers:\n- name: app\n  image: registry.example/app:1\n  envFrom: [{secretRef: {name: db}}]\n"
	const exempt = "  annotations: {configward.dev/exempt.secret-in-env: \"the legacy client reads only env\"}"

	DescribeTable("find the same things, with the same actions",
		func(tag, policy, annotations, spec string) {
			ns := policyNamespace(tag)
			config := configMap(ns, "cfg", map[string]string{"app.yaml": "port: 80"}, nil)
			workload := deployment(ns, "web", annotations, spec)
			// Stored before the policy, which the default actions allow: the
			// Report judges it as it stands once the policy is in force.
			apply(config, workload)
			applyPolicy(policyYAML("parity-"+tag, tag, policy))
			Eventually(policyReady("parity-"+tag), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))

			By("configward check, offline, with the policy and every object of the namespace")
			dir := GinkgoT().TempDir()
			nsYAML := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {%s: %s}}\n", ns, policyLabel, tag)
			secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: x}\n", ns)
			Expect(os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(strings.Join([]string{nsYAML, secret, config, workload}, "\n---\n")), 0o600)).To(Succeed())
			objs, err := check.Load([]string{dir}, nil)
			Expect(err).NotTo(HaveOccurred())
			store, err := configpolicy.New(context.Background(), logr.Discard())
			Expect(err).NotTo(HaveOccurred())
			for _, o := range decodeAll(policyYAML("parity-"+tag, tag, policy)) {
				Expect(store.Load(context.Background(), o.(*v1alpha1.ConfigPolicy))).To(Succeed())
			}
			results, err := check.Run(context.Background(), store.Current(), objs, check.Options{Complete: true})
			Expect(err).NotTo(HaveOccurred())
			// offline is every finding with its action; seenByKubectl what
			// kubectl prints of them (a denial's lines, warnings, which are
			// shortened to fit, and the notes on exemptions that do not count).
			var offline, seenByKubectl, told []string
			for _, r := range results {
				if r.Kind != "Deployment" {
					continue
				}
				f := rules.Finding{Rule: r.Rule, Message: r.Message}
				switch r.Action {
				case check.Note:
					told = append(told, rules.Warning(f))
					continue
				case rules.Deny:
					seenByKubectl = append(seenByKubectl, "Deny "+rules.Line(f))
				case rules.Warn:
					seenByKubectl = append(seenByKubectl, "Warn "+rules.Warning(f))
				}
				offline = append(offline, string(r.Action)+" "+rules.Line(f))
			}
			Expect(offline).NotTo(BeEmpty(), "each setting must give the workload a finding to compare")

			By("admission: kubectl applying a change of the pod spec, so nothing counts as unchanged")
			changed := strings.Replace(workload, "  - name: app\n", "  - name: app\n        terminationMessagePath: /dev/parity\n", 1)
			Expect(changed).NotTo(Equal(workload))
			res := env.Kubectl(changed, "apply", "--dry-run=server", "-f", "-")
			var admitted []string
			if res.ExitCode != 0 {
				_, denial, found := strings.Cut(res.Stderr, "denied the request: ")
				Expect(found).To(BeTrue(), res.Stderr)
				for i, l := range strings.Split(strings.TrimSpace(denial), "\n[") {
					if i > 0 {
						l = "[" + l
					}
					admitted = append(admitted, "Deny "+l)
				}
			}
			var noted []string
			for _, l := range strings.Split(res.Stderr, "\n") {
				w, ok := strings.CutPrefix(l, "Warning: ")
				if !ok || strings.HasPrefix(w, "[config-hash]") {
					continue
				}
				if strings.Contains(w, "does not count here") || strings.Contains(w, "has no reason") {
					noted = append(noted, w)
				} else {
					admitted = append(admitted, "Warn "+w)
				}
			}
			Expect(admitted).To(ConsistOf(seenByKubectl))
			Expect(noted).To(ConsistOf(told))

			By("the Report of the stored workload")
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
			Eventually(func() []string {
				var out []string
				for _, r := range reportResults(ns, d) {
					if r.Rule != report.ConfigCurrent {
						out = append(out, r.Properties[report.PropAction]+" "+rules.Line(rules.Finding{Rule: r.Rule, Message: r.Description}))
					}
				}
				return out
			}, 20*time.Second, 200*time.Millisecond).Should(ConsistOf(offline))
		},
		Entry("rollouts turned off: a subPath mount of rollout-mode config is warned", "parity-rollouts-off",
			"rollouts: {disabled: true}", "", subPathMount),
		Entry("a rule's action raised", "parity-raised",
			"rules: {secret-in-env: {action: Deny}}", "", secretEnv),
		Entry("a rule turned off beside one left on", "parity-off",
			`rules: {secret-in-env: {action: "Off"}}`, "",
			"containers:\n- name: app\n  image: registry.example/app:1\n  envFrom: [{secretRef: {name: db}}, {configMapRef: {name: gone}}]\n"),
		Entry("a rule audited", "parity-audit",
			"rules: {secret-in-env: {action: Audit}}", "", secretEnv),
		Entry("an exemption the policy allows", "parity-exempt",
			"rules: {secret-in-env: {action: Deny, allowExemption: true}}", exempt, secretEnv),
		Entry("an exemption the policy does not allow", "parity-no-exempt",
			"rules: {secret-in-env: {action: Warn}}", exempt, secretEnv),
		Entry("a custom rule", "parity-custom", customRule, "",
			"containers:\n- name: app\n  image: registry.example/app:latest\n"),
	)
})

// reportResults are the results of the Report configward keeps on obj
// (nil while it has none).
func reportResults(ns string, obj client.Object) []openreports.ReportResult {
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil
	}
	var r openreports.Report
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: report.Name(obj.GetUID())}, &r); err != nil {
		return nil
	}
	return r.Results
}

func decodeAll(y string) []client.Object {
	objs, err := decodeYAML(y)
	Expect(err).NotTo(HaveOccurred())
	return objs
}
