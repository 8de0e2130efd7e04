package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

// workloadKindsFile declares Argo Rollouts' Rollout to the suite's webhook
// and controller, as the chart's workloadKinds would.
var workloadKindsFile = filepath.Join(framework.RepoRoot(), "internal", "check", "testdata", "kinds", "workload-kinds.yaml")

// declareRolloutRules adds to the config-hash and validate webhooks the rule
// the chart renders for the declared kind.
func declareRolloutRules(o client.Object) {
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"argoproj.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"rollouts"}},
	}
	switch c := o.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			if c.Webhooks[i].Name == "config-hash.configward.dev" {
				c.Webhooks[i].Rules = append(c.Webhooks[i].Rules, rule)
			}
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			if c.Webhooks[i].Name == "validate.configward.dev" {
				c.Webhooks[i].Rules = append(c.Webhooks[i].Rules, rule)
			}
		}
	}
}

// argoRollout is a canary Rollout with the given pod spec, or, with ref
// set, one taking its template from that object (spec.workloadRef).
func argoRollout(ns, name, spec, ref string) string {
	head := fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: %s, namespace: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %s}}
  strategy: {canary: {}}
`, name, ns, name)
	if ref != "" {
		return head + "  workloadRef: " + ref + "\n"
	}
	return head + fmt.Sprintf("  template:\n    metadata: {labels: {app: %s}}\n    spec:\n%s", name, indent(spec, 6))
}

// rolloutState reads a Rollout's generation and template hash, and whether
// it has a template at all.
func rolloutState(ns, name string) func() templateState {
	return func() templateState {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("argoproj.io/v1alpha1")
		u.SetKind("Rollout")
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			return templateState{Generation: -1}
		}
		hash, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", v1alpha1.ConfigHashAnnotation)
		return templateState{Generation: u.GetGeneration(), Hash: hash}
	}
}

// No Argo controller runs here: these specs prove what configward writes
// (the template hash Argo rolls on, the Events, the refusals), not that
// Argo then replaces pods.
var _ = Describe("custom workload kinds: Argo Rollouts (real CRD)", func() {
	It("stamps a Rollout consuming a ConfigMap on create, and re-stamps it once when the ConfigMap changes", func() {
		ns := rolloutNamespace()
		// The Rollout once the webhook's cache has the ConfigMap (a dry-run
		// Deployment reading it shows when): applied together, the Rollout
		// can be stamped with the hash of a ConfigMap not seen yet, as the
		// Deployment specs found before.
		apply(configMap(ns, "web-config", map[string]string{"LOG_LEVEL": "info"}, nil))
		awaitConfigSeen(ns, map[string][]string{"web-config": nil}, deployment(ns, "probe", "", fmt.Sprintf(envFromSpec, "web-config")))
		apply(argoRollout(ns, "web", fmt.Sprintf(envFromSpec, "web-config"), ""))
		created := templateState{Generation: 1, Hash: expectedHash(ns, map[string][]string{"web-config": nil})}
		Expect(rolloutState(ns, "web")()).To(Equal(created), "stamped by the webhook as it was created")

		apply(configMap(ns, "web-config", map[string]string{"LOG_LEVEL": "debug"}, nil))
		rolled := templateState{Generation: 2, Hash: expectedHash(ns, map[string][]string{"web-config": nil})}
		Expect(rolled.Hash).NotTo(Equal(created.Hash))
		Eventually(rolloutState(ns, "web"), 10*time.Second).Should(Equal(rolled))
		Consistently(rolloutState(ns, "web"), settle).Should(Equal(rolled))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigChanged") }, 10*time.Second).Should(ConsistOf(
			"ConfigMap/web-config changed: updated configward.dev/config-hash to " + rolled.Hash +
				", which rolls the pods through the workload's own update strategy"))

		By("configward status and the Report show it as they show a Deployment (no Argo controller: no pods)")
		Eventually(status("-n", ns, "--workload-kinds", workloadKindsFile), 15*time.Second).Should(Equal(statusRun{ExitCode: 0, Table: "" +
			"WORKLOAD     CURRENT  STALE  STATE  LAST CHANGE           AGE\n" +
			"Rollout/web  0/0      0      done   ConfigMap/web-config  <age>\n"}))
		res := env.Status("-n", ns, "--workload-kinds", workloadKindsFile, "rollouts.argoproj.io/web", "-o", "wide")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(ContainSubstring(rolled.Hash + "  " + rolled.Hash))
		rollout := &unstructured.Unstructured{}
		rollout.SetAPIVersion("argoproj.io/v1alpha1")
		rollout.SetKind("Rollout")
		rollout.SetNamespace(ns)
		rollout.SetName("web")
		Eventually(reportOf(ns, rollout), 15*time.Second).Should(Equal([]string{"config-current pass Rollout/web"}))
	})

	It("re-stamps a paused Rollout but says, from its declared notRolledWhen, that running pods keep the old config", func() {
		ns := rolloutNamespace()
		paused := strings.Replace(argoRollout(ns, "web", fmt.Sprintf(envFromSpec, "web-config"), ""), "  replicas: 1\n", "  replicas: 1\n  paused: true\n", 1)
		apply(configMap(ns, "web-config", map[string]string{"k": "1"}, nil), paused)
		Expect(rolloutState(ns, "web")()).To(HaveField("Hash", HavePrefix("hmac-sha256:")))

		apply(configMap(ns, "web-config", map[string]string{"k": "2"}, nil))
		want := expectedHash(ns, map[string][]string{"web-config": nil})
		Eventually(rolloutState(ns, "web"), 10*time.Second).Should(Equal(templateState{Generation: 2, Hash: want}))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigChangedNotRolled") }, 10*time.Second).Should(ConsistOf(
			"ConfigMap/web-config changed: updated configward.dev/config-hash to " + want + ", but the Rollout is paused: " +
				"running pods keep the old config until it is resumed (kubectl argo rollouts resume)"))
		Expect(eventsFor(ns, "web", "ConfigChanged")).To(BeEmpty())
	})

	It("refuses a subPath mount of hot config in a Rollout with the Deployment's message", func() {
		ns := rulesNamespace()
		res := env.Kubectl(argoRollout(ns, "checkout", `containers:
- name: api
  image: app
  volumeMounts: [{name: flags, mountPath: /etc/app/flags.yaml, subPath: flags.yaml}]
volumes: [{name: flags, configMap: {name: hot-flags}}]
`, ""), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(Equal(`Error from server (Forbidden): error when creating "STDIN": admission webhook "validate.configward.dev" denied the request: ` +
			`[subpath-config] Rollout ` + ns + `/checkout container "api" mounts ConfigMap "hot-flags" with subPath "flags.yaml" at /etc/app/flags.yaml ` +
			`(spec.template.spec.containers[0].volumeMounts[0]): subPath mounts never receive updates, and this ConfigMap is marked configward.dev/reload=hot. ` +
			`Mount the volume as a directory (drop the subPath) and point the app at the file inside it.` + "\n"))
		Expect(env.Kubectl("", "get", "rollouts.argoproj.io", "checkout", "-n", ns).ExitCode).To(Equal(1), "a rejected Rollout must not be stored")
	})

	It("never stamps a Rollout with a workloadRef, and stamps and rolls the Deployment it references", func() {
		ns := rolloutNamespace()
		apply(configMap(ns, "base-config", map[string]string{"k": "1"}, nil),
			deployment(ns, "web-base", "", fmt.Sprintf(envFromSpec, "base-config")),
			argoRollout(ns, "web", "", "{apiVersion: apps/v1, kind: Deployment, name: web-base}"))
		Expect(stateOf("Deployment", ns, "web-base")()).To(HaveField("Hash", expectedHash(ns, map[string][]string{"base-config": nil})))
		Expect(rolloutState(ns, "web")()).To(Equal(templateState{Generation: 1}))

		apply(configMap(ns, "base-config", map[string]string{"k": "2"}, nil))
		Eventually(stateOf("Deployment", ns, "web-base"), 10*time.Second).Should(Equal(
			templateState{Generation: 2, Hash: expectedHash(ns, map[string][]string{"base-config": nil})}))
		Consistently(rolloutState(ns, "web"), settle).Should(Equal(templateState{Generation: 1}), "Argo follows the Deployment; the Rollout itself stays untouched")
	})

	It("refuses deleting a ConfigMap a Rollout still uses, naming the Rollout", func() {
		ns := newNamespace("inuse-rollout", nil)
		apply(configMap(ns, "flags", map[string]string{"a": "1"}, nil), argoRollout(ns, "web", fmt.Sprintf(envFromSpec, "flags"), ""))
		Eventually(func() int {
			return as(human, "", "-n", ns, "delete", "configmap", "flags", "--dry-run=server").ExitCode
		}, 10*time.Second, 200*time.Millisecond).Should(Equal(1))
		res := as(human, "", "-n", ns, "delete", "configmap", "flags")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(Equal(fmt.Sprintf("Error from server (Forbidden): admission webhook \"changes.validate.configward.dev\" denied the request: "+
			"[config-in-use-delete] ConfigMap %s/flags is used by Rollout web: their pods fail to start or to refresh it once it is gone. "+
			"Remove the references (or the workloads) first.\n", ns)))

		Expect(env.Kubectl("", "-n", ns, "delete", "rollouts.argoproj.io", "web").ExitCode).To(Equal(0))
		Eventually(func() int { return as(human, "", "-n", ns, "delete", "configmap", "flags").ExitCode }, 10*time.Second, 200*time.Millisecond).Should(Equal(0))
	})

	It("warns that a Rollout whose workloadRef names a PodTemplate will not roll", func() {
		ns := rolloutNamespace()
		res := env.Kubectl(strings.Join([]string{
			fmt.Sprintf("apiVersion: v1\nkind: PodTemplate\nmetadata: {name: web-tpl, namespace: %s}\ntemplate:\n  metadata: {labels: {app: web}}\n  spec:\n%s",
				ns, indent(fmt.Sprintf(envFromSpec, "cfg"), 4)),
			argoRollout(ns, "web", "", "{apiVersion: v1, kind: PodTemplate, name: web-tpl}"),
		}, "\n---\n"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		warnings := slices.DeleteFunc(strings.Split(res.Stderr, "\n"), func(l string) bool { return !strings.HasPrefix(l, "Warning: ") })
		Expect(warnings).To(ConsistOf("Warning: [config-hash] Rollout " + ns + "/web takes its pod template from PodTemplate/web-tpl (spec.workloadRef): " +
			"configward does not stamp PodTemplates, so this Rollout will not roll when its config changes. Reference a Deployment, or put the template in the Rollout."))
		Expect(rolloutState(ns, "web")()).To(Equal(templateState{Generation: 1}))
	})
})

var _ = Describe("custom workload kinds whose CRD is not served", func() {
	It("are logged and skipped at start instead of failing the process", func() {
		decls, err := workload.ParseDeclarations([]byte(`
- {group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts, podTemplatePath: spec.template}
- {group: widgets.example.com, version: v1, kind: Widget, resource: widgets, podTemplatePath: spec.template}
`))
		Expect(err).NotTo(HaveOccurred())
		reg, err := workload.NewRegistry(decls)
		Expect(err).NotTo(HaveOccurred())
		opts := inventory.CacheOptions()
		opts.Scheme = scheme.Scheme()
		c, err := cache.New(env.Config, opts)
		Expect(err).NotTo(HaveOccurred())
		inv, err := inventory.Start(context.Background(), c, reg, reg.Kinds())
		Expect(err).NotTo(HaveOccurred())
		var started []string
		for _, k := range inv.WatchedKinds() {
			started = append(started, k.GroupKind().String())
		}
		Expect(started).To(ContainElements("Rollout.argoproj.io", "Deployment.apps"))
		Expect(started).NotTo(ContainElement("Widget.widgets.example.com"))
		Expect(kindAvailable()).To(And(HaveKeyWithValue("Widget.widgets.example.com", 0.0), HaveKeyWithValue("Rollout.argoproj.io", 1.0)))
	})
})

// kindAvailable reads configward_workload_kind_available by kind.
func kindAvailable() map[string]float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() == "configward_workload_kind_available" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						out[l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	return out
}
