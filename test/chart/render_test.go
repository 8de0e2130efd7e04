package chart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/webhookscope"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

var chartDir = filepath.Join(framework.RepoRoot(), "charts", "configward")

// helm runs helm offline (lint, template).
func helm(args ...string) framework.KubectlResult { return framework.HelmOffline(args...) }

// render runs `helm template` and splits the output into objects.
func render(args ...string) []*unstructured.Unstructured {
	res := helm(append([]string{"template", "configward", chartDir, "-n", "configward", "--kube-version", "1.37.2"}, args...)...)
	Expect(res.ExitCode).To(Equal(0), res.Stderr)
	return splitYAML(res.Stdout)
}

func splitYAML(s string) []*unstructured.Unstructured {
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out []*unstructured.Unstructured
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			Expect(err).NotTo(HaveOccurred())
		}
		if len(doc) > 0 {
			out = append(out, &unstructured.Unstructured{Object: doc})
		}
	}
}

// typed finds the one object of kind (and name, when given) and converts it.
func typed[T any](objs []*unstructured.Unstructured, kind, name string) *T {
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			found = append(found, o)
		}
	}
	Expect(found).To(HaveLen(1), "%s %s", kind, name)
	var t T
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, &t)).To(Succeed())
	return &t
}

// promrules runs test/tools/promrules, Prometheus' own rule and PromQL
// parsers, on input, and returns the metric names the expressions select.
func promrules(mode string, input []byte) []string {
	cmd := exec.Command(goTool(), "run", ".", mode)
	cmd.Dir = filepath.Join(framework.RepoRoot(), "test", "tools", "promrules")
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), stderr.String())
	return strings.Fields(string(out))
}

// goTool is the go command building this test, else go on $PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(out)
	return out
}

// webhook is what the chart must keep as controller-gen generated it: the
// rest (selectors, match conditions, clientConfig) the chart adds.
type webhook struct {
	Path                    string
	Rules                   []admissionregistrationv1.RuleWithOperations
	SideEffects             *admissionregistrationv1.SideEffectClass
	FailurePolicy           *admissionregistrationv1.FailurePolicyType
	ReinvocationPolicy      *admissionregistrationv1.ReinvocationPolicyType
	AdmissionReviewVersions []string
}

// webhookFacts indexes the webhooks of the configurations by name.
func webhookFacts(objs ...client.Object) map[string]webhook {
	out := map[string]webhook{}
	for _, o := range objs {
		switch c := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, w := range c.Webhooks {
				out[w.Name] = webhook{*w.ClientConfig.Service.Path, w.Rules, w.SideEffects, w.FailurePolicy, w.ReinvocationPolicy, w.AdmissionReviewVersions}
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, w := range c.Webhooks {
				out[w.Name] = webhook{*w.ClientConfig.Service.Path, w.Rules, w.SideEffects, w.FailurePolicy, nil, w.AdmissionReviewVersions}
			}
		}
	}
	return out
}

// chartCopies names, for each webhook the chart runs in two copies, the
// copy for the namespaces where configward enforces nothing: it may fail
// open where the generated webhook fails closed, and differs in nothing
// else.
var chartCopies = map[string]string{
	"configmaps-without-schemas.validate.configward.dev": "configmaps.validate.configward.dev",
	"changes-ungoverned.validate.configward.dev":         "changes.validate.configward.dev",
}

// foldCopies checks the chart's second copies against their originals and
// drops them, so the rest compares with what controller-gen generated.
func foldCopies(facts map[string]webhook) map[string]webhook {
	for copyName, original := range chartCopies {
		c, ok := facts[copyName]
		Expect(ok).To(BeTrue(), "the chart lacks %s", copyName)
		Expect(*c.FailurePolicy).To(Equal(admissionregistrationv1.Ignore), copyName)
		c.FailurePolicy = facts[original].FailurePolicy
		Expect(c).To(Equal(facts[original]), "%s must differ from %s only in its failure policy", copyName, original)
		delete(facts, copyName)
	}
	return facts
}

// generatedWebhookFacts reads controller-gen's webhook manifests.
func generatedWebhookFacts() map[string]webhook {
	objs, err := framework.DecodeManifests(filepath.Join(framework.RepoRoot(), "config", "webhook", "manifests.yaml"))
	Expect(err).NotTo(HaveOccurred())
	return webhookFacts(objs...)
}

var _ = Describe("the chart, rendered", func() {
	It("renders its CRDs as templates, kept on uninstall, so that helm upgrade updates them", func() {
		_, err := os.Stat(filepath.Join(chartDir, "crds"))
		Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "Helm installs crds/ once and never upgrades it: the CRDs live in files/crds, rendered by templates/crds.yaml")
		Expect(kinds(render())).To(ContainElements("CustomResourceDefinition/configpolicies.configward.dev", "CustomResourceDefinition/configschemas.configward.dev"))

		Expect(kinds(render("--set", "crds.install=false"))).NotTo(ContainElement(HavePrefix("CustomResourceDefinition/")))
		for _, crd := range render("--set", "crds.keep=false") {
			if crd.GetKind() == "CustomResourceDefinition" {
				Expect(crd.GetAnnotations()).NotTo(HaveKey("helm.sh/resource-policy"), crd.GetName())
			}
		}
	})

	It("installs the OpenReports Report CRD only when asked, kept on uninstall, and lets viewers read Reports, ConfigDeliveries and ConfigSets", func() {
		Expect(kinds(render())).NotTo(ContainElement("CustomResourceDefinition/reports.openreports.io"))
		objs := render("--set", "reports.installCRD=true", "--set", "reports.mode=off")
		Expect(kinds(objs)).To(ContainElement("CustomResourceDefinition/reports.openreports.io"))
		for _, o := range objs {
			if o.GetName() == "reports.openreports.io" {
				Expect(o.GetAnnotations()).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
				Expect(o.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"))
			}
		}
		ctl := typed[appsv1.Deployment](objs, "Deployment", "configward-controller")
		Expect(ctl.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--reports=off"))
		view := typed[rbacv1.ClusterRole](objs, "ClusterRole", "configward-reports-view")
		Expect(view.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-view", "true"))
		Expect(view.Rules).To(Equal([]rbacv1.PolicyRule{
			{APIGroups: []string{"openreports.io"}, Resources: []string{"reports"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"configward.dev"}, Resources: []string{"configdeliveries", "configsets"}, Verbs: []string{"get", "list", "watch"}},
		}))

		res := helm("template", "configward", chartDir, "--kube-version", "1.37.2", "--set", "reports.mode=always")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("/reports/mode"))
	})

	It("renders and lints without --kube-version, as with a released helm: the project's helm assumes the Kubernetes of its client-go, not 1.20", func() {
		res := helm("template", "configward", chartDir, "-n", "configward")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(ContainSubstring("kind: MutatingWebhookConfiguration"))
		res = helm("lint", chartDir, "--strict")
		Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr)
	})

	It("ships the alerts as a PrometheusRule and a dashboard for Grafana's sidecar, off by default; Prometheus parses every rule and query, and each configward metric they query exists", func() {
		Expect(kinds(render())).NotTo(ContainElements("PrometheusRule/configward", "ConfigMap/configward-dashboard"))
		objs := render("--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.prometheusRule.labels.release=prom")
		var rule, dashboard *unstructured.Unstructured
		for _, o := range objs {
			switch o.GetKind() + "/" + o.GetName() {
			case "PrometheusRule/configward":
				rule = o
			case "ConfigMap/configward-dashboard":
				dashboard = o
			}
		}
		Expect(rule).NotTo(BeNil())
		Expect(rule.GetLabels()).To(HaveKeyWithValue("release", "prom"))
		Expect(dashboard).NotTo(BeNil())
		Expect(dashboard.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))

		spec, err := sigsyaml.Marshal(rule.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		queried := promrules("rules", spec)

		raw, _, _ := unstructured.NestedString(dashboard.Object, "data", "configward.json")
		var board struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		Expect(json.Unmarshal([]byte(raw), &board)).To(Succeed())
		var exprs []string
		for _, p := range board.Panels {
			Expect(p.Targets).NotTo(BeEmpty(), p.Title)
			for _, t := range p.Targets {
				exprs = append(exprs, t.Expr)
			}
		}
		js, err := json.Marshal(exprs)
		Expect(err).NotTo(HaveOccurred())
		queried = append(queried, promrules("exprs", js)...)

		registered, err := framework.RegisteredMetrics()
		Expect(err).NotTo(HaveOccurred())
		for _, name := range queried {
			if strings.HasPrefix(name, "apiserver_") {
				continue // the API server's view of configward
			}
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			Expect(registered).To(ContainElement(base), "%s is queried but configward has no such metric", name)
		}
	})

	It("fires the served-certificate alerts on the certificate pods present, evaluated by Prometheus' engine over recorded samples", func() {
		objs := render("--set", "metrics.prometheusRule.enabled=true")
		var rules []byte
		for _, o := range objs {
			if o.GetKind() == "PrometheusRule" {
				var err error
				rules, err = sigsyaml.Marshal(o.Object["spec"])
				Expect(err).NotTo(HaveOccurred())
			}
		}
		now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
		firing := func(expiresIn time.Duration, stalePods float64) []string {
			labels := func(name string) map[string]string {
				return map[string]string{"__name__": name, "namespace": "shop", "workload": "Deployment/web"}
			}
			input, err := json.Marshal(map[string]any{"rules": string(rules), "time": now.Unix(), "samples": []map[string]any{
				{"labels": labels("configward_served_certificate_expiry_timestamp_seconds"), "value": float64(now.Add(expiresIn).Unix())},
				{"labels": labels("configward_served_certificate_stale_pods"), "value": stalePods},
			}})
			Expect(err).NotTo(HaveOccurred())
			return slices.DeleteFunc(promrules("fires", input), func(a string) bool { return !strings.HasPrefix(a, "ConfigwardServedCertificate") })
		}
		By("presented far from its end, every pod current: none")
		Expect(firing(60*24*time.Hour, 0)).To(BeEmpty())
		By("presented ending in three days, whatever the Secret holds: expiring")
		Expect(firing(72*time.Hour, 0)).To(ConsistOf("ConfigwardServedCertificateExpiring"))
		By("presented expired an hour ago: expired (and expiring)")
		Expect(firing(-time.Hour, 0)).To(ConsistOf("ConfigwardServedCertificateExpiring", "ConfigwardServedCertificateExpired"))
		By("a pod presenting an older certificate than it mounts: stale")
		Expect(firing(60*24*time.Hour, 1)).To(ConsistOf("ConfigwardServedCertificateStale"))
	})

	It("passes helm lint with default and non-default values", func() {
		for _, args := range [][]string{
			nil,
			{"--set", "certificate.issuerRef.name=corp-ca", "--set", "certificate.issuerRef.kind=ClusterIssuer",
				"--set", "metrics.serviceMonitor.enabled=true", "--set", "changeControl.pipelineServiceAccounts={argocd/argocd-application-controller}"},
		} {
			res := helm(append([]string{"lint", chartDir, "--strict", "--kube-version", "1.37.2"}, args...)...)
			Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr)
		}
	})

	It("renders the documented defaults", func() {
		objs := render()
		Expect(kinds(objs)).To(Equal([]string{
			"Certificate/configward-ca", "Certificate/configward-webhook",
			"ClusterRole/configward-configsets-edit", "ClusterRole/configward-controller", "ClusterRole/configward-delivery-operator", "ClusterRole/configward-reports-view", "ClusterRole/configward-webhook",
			"ClusterRoleBinding/configward-controller", "ClusterRoleBinding/configward-webhook",
			"CustomResourceDefinition/configdeliveries.configward.dev", "CustomResourceDefinition/configpolicies.configward.dev", "CustomResourceDefinition/configschemas.configward.dev",
			"CustomResourceDefinition/configsets.configward.dev",
			"Deployment/configward-controller", "Deployment/configward-webhook",
			"Issuer/configward-ca", "Issuer/configward-selfsigned",
			"MutatingWebhookConfiguration/configward",
			"PodDisruptionBudget/configward-webhook",
			"PriorityClass/configward-critical",
			"Role/configward-config-changes", "Role/configward-hash-key", "Role/configward-leader-election",
			"RoleBinding/configward-config-changes", "RoleBinding/configward-hash-key", "RoleBinding/configward-leader-election",
			"Service/configward-controller-metrics", "Service/configward-webhook",
			"ServiceAccount/configward-controller", "ServiceAccount/configward-webhook",
			"ValidatingAdmissionPolicy/configward-controller-reach-mutating", "ValidatingAdmissionPolicy/configward-controller-reach-validating",
			"ValidatingAdmissionPolicyBinding/configward-controller-reach-mutating", "ValidatingAdmissionPolicyBinding/configward-controller-reach-validating",
			"ValidatingWebhookConfiguration/configward",
		}))

		web := typed[appsv1.Deployment](objs, "Deployment", "configward-webhook")
		ctl := typed[appsv1.Deployment](objs, "Deployment", "configward-controller")
		Expect(*web.Spec.Replicas).To(BeEquivalentTo(2))
		Expect(web.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(Equal(0))
		Expect(web.Spec.Template.Spec.Affinity.PodAntiAffinity).NotTo(BeNil())
		Expect(web.Spec.Template.Spec.Containers[0].Args).To(ContainElements("webhook", "--shutdown-delay=5s",
			"--configward-service-accounts=configward/configward-webhook,configward/configward-controller"))
		Expect(ctl.Spec.Template.Spec.Containers[0].Args).To(ContainElements("controller", "--leader-elect=true", "--leader-election-namespace=configward", "--reports=auto"))
		// A stopping replica waits for the API server to close its idle
		// connections (up to the idle timeout, above the API server's 90 s),
		// then a last review and the stop: the kubelet must not kill it first.
		Expect(web.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--idle-timeout=2m"))
		Expect(*web.Spec.Template.Spec.TerminationGracePeriodSeconds).To(BeNumerically(">", 5+120+30+30))
		pdb := typed[policyv1.PodDisruptionBudget](objs, "PodDisruptionBudget", "configward-webhook")
		Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(1))
		for _, d := range []*appsv1.Deployment{web, ctl} {
			pod := d.Spec.Template.Spec
			Expect(pod.PriorityClassName).To(Equal("configward-critical"), d.Name)
			Expect(pod.Containers[0].Args).To(ContainElement("--cert-manager-service-accounts=cert-manager/cert-manager"), d.Name)
			Expect(pod.Containers[0].Env).To(BeEmpty(), d.Name)
			Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue(), d.Name)
			Expect(string(pod.SecurityContext.SeccompProfile.Type)).To(Equal("RuntimeDefault"), d.Name)
			c := pod.Containers[0]
			Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse(), d.Name)
			Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue(), d.Name)
			Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(BeEquivalentTo("ALL")), d.Name)
			Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"), d.Name)
			Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"), d.Name)
			Expect(c.Resources.Requests).NotTo(BeEmpty(), d.Name)
			Expect(c.Resources.Limits).NotTo(BeEmpty(), d.Name)
			for _, m := range c.VolumeMounts {
				Expect(m.SubPath).To(BeEmpty(), "the certificate must be mounted as a directory so renewals arrive")
			}
		}

		vwc := typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward")
		Expect(vwc.Annotations).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", "configward/configward-webhook"))
		scopes := map[string]string{}
		for _, w := range vwc.Webhooks {
			switch w.Name {
			case "configpolicies.validate.configward.dev":
				Expect(w.NamespaceSelector).To(BeNil(), "ConfigPolicies are cluster-scoped")
				continue
			case "agent-tokens.validate.configward.dev":
				Expect(w.NamespaceSelector).To(BeNil(), "only the kubelet mints the agent's token, in every namespace")
				Expect(string(*w.FailurePolicy)).To(Equal("Fail"))
				continue
			case "namespaces.record.configward.dev":
				Expect(w.NamespaceSelector.MatchExpressions).To(HaveLen(1), "a namespace getting the ignore label must still be seen")
				Expect(w.NamespaceSelector.MatchExpressions[0].Values).To(ConsistOf("kube-system", "kube-node-lease", "kube-public", "configward", "cert-manager"))
				Expect(string(*w.FailurePolicy)).To(Equal("Ignore"), "it only records")
				continue
			}
			Expect(w.NamespaceSelector.MatchExpressions[0].Values).To(ConsistOf("kube-system", "kube-node-lease", "kube-public", "configward", "cert-manager"), w.Name)
			for _, e := range w.NamespaceSelector.MatchExpressions[1:] {
				Expect(e.Key).NotTo(Equal("configward.dev/ignore"), "the ignore label is off by default")
				scopes[w.Name] = e.Key + " " + string(e.Operator) + " " + strings.Join(e.Values, ",") + " " + string(*w.FailurePolicy)
			}
			Expect(*w.ClientConfig.Service.Path).To(HavePrefix("/validate-"))
		}
		Expect(scopes).To(Equal(map[string]string{
			"configmaps.validate.configward.dev":                 "configward.dev/config-schemas In present Fail",
			"configmaps-without-schemas.validate.configward.dev": "configward.dev/config-schemas NotIn present Ignore",
			"changes.validate.configward.dev":                    "configward.dev/change-control In governed Fail",
			"changes-ungoverned.validate.configward.dev":         "configward.dev/change-control NotIn governed Ignore",
			"schema-changes.validate.configward.dev":             "configward.dev/change-control In governed Fail",
		}), "fail-closed copies only where configward enforces something")
	})

	It("skips, on change control, exactly the Kubernetes writers the handler never blocks, and no one else", func() {
		vwc := typed[admissionregistrationv1.ValidatingWebhookConfiguration](render(), "ValidatingWebhookConfiguration", "configward")
		var quoted []string
		for _, u := range changecontrol.KubernetesWriters() {
			quoted = append(quoted, "'"+u+"'")
		}
		want := "!(request.userInfo.username in [" + strings.Join(quoted, ", ") + "])"
		for _, w := range vwc.Webhooks {
			switch w.Name {
			case "agent-tokens.validate.configward.dev":
				// Tokens of the agent's audience only, whoever asks: the
				// handler decides who may mint them.
				Expect(w.MatchConditions).To(ConsistOf(HaveField("Name", "reload-agent-audience")))
			case "configset-members.validate.configward.dev":
				// The Kubernetes components as the others, then only writes of
				// config carrying a set version: the handler's own condition.
				Expect(w.MatchConditions).To(Equal(append(webhookscope.UnjudgedConditions(),
					admissionregistrationv1.MatchCondition{Name: "configset-members", Expression: admission.ConfigSetMembersMatchCondition})), w.Name)
			case "changes.validate.configward.dev", "changes-ungoverned.validate.configward.dev", "schema-changes.validate.configward.dev", "namespaces.record.configward.dev":
				Expect(w.MatchConditions).To(HaveLen(1), w.Name)
				Expect(w.MatchConditions[0].Expression).To(Equal(want), "%s: the chart's list and internal/changecontrol's differ", w.Name)
			default:
				// Workload and schema webhooks skip the Kubernetes components
				// named one by one in internal/webhookscope, and no one else:
				// the ReplicaSet controller creating pods must never wait on
				// configward, and an add-on in kube-system is judged.
				Expect(w.MatchConditions).To(Equal(webhookscope.UnjudgedConditions()), "%s: the chart's list and internal/webhookscope's differ", w.Name)
			}
		}
	})

	It("puts on every webhook the matchConditions make demo and every test install put there", func() {
		objs := render()
		want := framework.MatchConditionsOf("system:serviceaccount:configward:configward-controller")
		// The chart's second copies of a webhook (where it fails open) carry
		// the same conditions as the first.
		copyOf := map[string]string{
			"configmaps-without-schemas.validate.configward.dev": "configmaps.validate.configward.dev",
			"changes-ungoverned.validate.configward.dev":         "changes.validate.configward.dev",
		}
		got := map[string][]admissionregistrationv1.MatchCondition{}
		for _, w := range typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward").Webhooks {
			got[w.Name] = w.MatchConditions
		}
		for _, w := range typed[admissionregistrationv1.MutatingWebhookConfiguration](objs, "MutatingWebhookConfiguration", "configward").Webhooks {
			got[w.Name] = w.MatchConditions
		}
		for name, conditions := range got {
			if original, ok := copyOf[name]; ok {
				name = original
			}
			Expect(conditions).To(Equal(want[name]), "%s: the chart and the installs of make demo and the tests differ", name)
		}
		for name := range want {
			Expect(got).To(HaveKey(name), "a webhook the installs know and the chart does not")
		}
	})

	It("honours the ignore label only when asked, in the webhooks and in both processes", func() {
		for _, enabled := range []bool{false, true} {
			objs := render("--set", fmt.Sprintf("webhooks.ignoreLabel.enabled=%t", enabled))
			vwc := typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward")
			for _, w := range vwc.Webhooks {
				if w.NamespaceSelector == nil {
					continue
				}
				keys := []string{}
				for _, e := range w.NamespaceSelector.MatchExpressions {
					keys = append(keys, e.Key)
				}
				if enabled && w.Name != "namespaces.record.configward.dev" {
					Expect(keys).To(ContainElement("configward.dev/ignore"), w.Name)
				} else {
					Expect(keys).NotTo(ContainElement("configward.dev/ignore"), w.Name)
				}
			}
			for _, name := range []string{"configward-webhook", "configward-controller"} {
				args := typed[appsv1.Deployment](objs, "Deployment", name).Spec.Template.Spec.Containers[0].Args
				if enabled {
					Expect(args).To(ContainElement("--ignore-namespace-label=configward.dev/ignore"), name)
				} else {
					Expect(args).NotTo(ContainElement(HavePrefix("--ignore-namespace-label")), name)
				}
			}
		}
	})

	It("renders non-default values: the user's issuer, an external URL, failure policies, a ServiceMonitor", func() {
		objs := render("--set", "certificate.issuerRef.name=corp-ca", "--set", "certificate.issuerRef.kind=ClusterIssuer",
			"--set", "webhook.externalURL=https://localhost:9443", "--set", "webhooks.validateWorkloads.failurePolicy=Ignore",
			"--set", "webhooks.excludedNamespaces={legacy}", "--set", "metrics.serviceMonitor.enabled=true",
			"--set", "webhook.replicas=3", "--set", "priorityClassName=system-cluster-critical",
			"--set", "changeControl.pipelineServiceAccounts={ci/deployer}", "--set", "changeControl.namespaceSelector=team=payments")
		Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("Issuer/")), "with a user's issuer the chart makes none")
		cert := typed[unstructured.Unstructured](objs, "Certificate", "configward-webhook")
		Expect(cert.Object["spec"].(map[string]any)["issuerRef"]).To(Equal(map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}))
		Expect(kinds(objs)).To(ContainElements("ServiceMonitor/configward-webhook", "ServiceMonitor/configward-controller"))

		vwc := typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward")
		for _, w := range vwc.Webhooks {
			Expect(*w.ClientConfig.URL).To(HavePrefix("https://localhost:9443/"))
			Expect(w.ClientConfig.Service).To(BeNil())
			if w.NamespaceSelector != nil {
				Expect(w.NamespaceSelector.MatchExpressions[0].Values).To(ContainElement("legacy"))
			}
			if w.Name == "validate.configward.dev" {
				Expect(string(*w.FailurePolicy)).To(Equal("Ignore"))
			}
		}
		web := typed[appsv1.Deployment](objs, "Deployment", "configward-webhook")
		Expect(*web.Spec.Replicas).To(BeEquivalentTo(3))
		Expect(web.Spec.Template.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
		Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("PriorityClass/")), "with the user's class the chart makes none")
		for _, name := range []string{"configward-webhook", "configward-controller"} {
			Expect(typed[appsv1.Deployment](objs, "Deployment", name).Spec.Template.Spec.Containers[0].Args).To(
				ContainElements("--pipeline-service-accounts=ci/deployer", "--change-control-namespace-selector=team=payments"), name)
		}
	})

	It("can require the API server's client certificate, admit only the API server's addresses, and bound work in flight", func() {
		web := typed[appsv1.Deployment](render(), "Deployment", "configward-webhook")
		Expect(web.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--max-in-flight=64", "--max-in-flight-bytes=33554432", "--idle-timeout=2m"))
		Expect(web.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--client-ca-file")), "client certificates are opt-in")

		objs := render("--set", "webhook.clientCA.configMap=apiserver-client-ca", "--set", "webhook.maxInFlightBytes=67108864",
			"--set", "webhook.networkPolicy.enabled=true", "--set", "webhook.networkPolicy.apiServerCIDRs={172.16.0.0/28}")
		web = typed[appsv1.Deployment](objs, "Deployment", "configward-webhook")
		pod := web.Spec.Template.Spec
		Expect(pod.Containers[0].Args).To(ContainElements("--client-ca-file=/etc/configward/client-ca/ca.crt", "--max-in-flight-bytes=67108864"))
		Expect(pod.Containers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", "/etc/configward/client-ca")))
		Expect(pod.Volumes).To(ContainElement(HaveField("ConfigMap.Name", "apiserver-client-ca")))

		np := typed[networkingv1.NetworkPolicy](objs, "NetworkPolicy", "configward-webhook")
		Expect(np.Spec.PodSelector.MatchLabels).To(Equal(web.Spec.Selector.MatchLabels))
		Expect(np.Spec.Ingress[0].Ports[0].Port.IntValue()).To(Equal(9443))
		Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "172.16.0.0/28"}}}))

		res := helm("template", "configward", chartDir, "--kube-version", "1.37.2", "--set", "webhook.networkPolicy.enabled=true")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("webhook.networkPolicy.enabled needs webhook.networkPolicy.apiServerCIDRs"))
	})

	It("runs the reload agent's report endpoint: injection flags, its own port on the Service, its peers in the NetworkPolicy, the RBAC it needs, and the Pod path's matchCondition", func() {
		objs := render("--set", "webhook.networkPolicy.enabled=true", "--set", "webhook.networkPolicy.apiServerCIDRs={172.16.0.0/28}")
		web := typed[appsv1.Deployment](objs, "Deployment", "configward-webhook")
		c := web.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(ContainElement(HavePrefix("--reload-agent-image=ghcr.io/configward/configward:")))
		Expect(c.Args).To(ContainElements("--reload-agent-report-url=https://configward-webhook.configward.svc:9444", "--reload-agent-ca-file=/etc/configward/tls/ca.crt",
			"--reload-agent-bind-address=:9444"))
		Expect(c.Ports).To(ContainElement(And(HaveField("Name", "agents"), HaveField("ContainerPort", int32(9444)))))
		svc := typed[corev1.Service](objs, "Service", "configward-webhook")
		Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Name", "agents"), HaveField("Port", int32(9444)))))
		np := typed[networkingv1.NetworkPolicy](objs, "NetworkPolicy", "configward-webhook")
		Expect(np.Spec.Ingress).To(ContainElement(And(HaveField("Ports", ContainElement(HaveField("Port.IntVal", int32(9444)))), HaveField("From", BeEmpty()))),
			"agents run in any namespace: any pod may report, and the token says which pod it is")
		role := typed[rbacv1.ClusterRole](objs, "ClusterRole", "configward-webhook")
		Expect(role.Rules).To(ContainElements(
			rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}}))
		mutating := typed[admissionregistrationv1.MutatingWebhookConfiguration](objs, "MutatingWebhookConfiguration", "configward")
		var podConfig, podChannels []admissionregistrationv1.MatchCondition
		var channelsScope *metav1.LabelSelector
		for _, w := range mutating.Webhooks {
			switch w.Name {
			case "pod-config.configward.dev":
				podConfig = w.MatchConditions
			case "pod-channels.configward.dev":
				podChannels, channelsScope = w.MatchConditions, w.NamespaceSelector
				Expect(*w.ClientConfig.Service.Path).To(Equal(admission.PodConfigPath))
			}
		}
		Expect(podConfig).To(ContainElement(admissionregistrationv1.MatchCondition{Name: "pod-config-annotations", Expression: admission.PodConfigMatchCondition}),
			"the chart sends the Pod path what the handler expects, and no other pod")
		Expect(podChannels).To(ContainElement(admissionregistrationv1.MatchCondition{Name: "pod-channels-not-annotated", Expression: admission.PodChannelsMatchCondition}),
			"the second entry takes the pods the first does not, so each pod reaches the Pod path once")
		Expect(channelsScope.MatchExpressions).To(ContainElement(metav1.LabelSelectorRequirement{Key: v1alpha1.HotChannelsLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}}),
			"only the pods of namespaces where delivery is on")
		validating := typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward")
		Expect(validating.Webhooks).To(ContainElement(And(HaveField("Name", "agent-tokens.validate.configward.dev"),
			HaveField("MatchConditions", ConsistOf(admissionregistrationv1.MatchCondition{Name: "reload-agent-audience", Expression: admission.AgentTokensMatchCondition})),
			HaveField("ClientConfig.Service.Path", HaveValue(Equal(admission.AgentTokensPath))))),
			"only token requests of the agent's audience reach configward, the ones the handler judges")

		objs = render("--set", "reloadAgent.enabled=false")
		web = typed[appsv1.Deployment](objs, "Deployment", "configward-webhook")
		Expect(web.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--reload-agent")))
		Expect(typed[corev1.Service](objs, "Service", "configward-webhook").Spec.Ports).NotTo(ContainElement(HaveField("Name", "agents")))
		Expect(typed[rbacv1.ClusterRole](objs, "ClusterRole", "configward-webhook").Rules).NotTo(ContainElement(HaveField("Resources", ContainElement("tokenreviews"))))

		web = typed[appsv1.Deployment](render("--set", "reloadAgent.reportURL=https://10.96.0.20:9444", "--set", "reloadAgent.serverName=configward-webhook.configward.svc"), "Deployment", "configward-webhook")
		Expect(web.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--reload-agent-report-url=https://10.96.0.20:9444", "--reload-agent-server-name=configward-webhook.configward.svc"))
	})

	It("refuses one webhook replica under a PodDisruptionBudget, which would block every node drain", func() {
		for _, args := range [][]string{
			{"--set", "webhook.replicas=1"},
			{"--set", "webhook.replicas=1", "--set", "webhook.podDisruptionBudget.minAvailable=50%"},
		} {
			res := helm(append([]string{"template", "configward", chartDir, "--kube-version", "1.37.2"}, args...)...)
			Expect(res.ExitCode).NotTo(Equal(0), "%v", args)
			Expect(res.Stderr).To(ContainSubstring("at '/webhook/replicas'"), "%v", args)
			Expect(res.Stderr).To(ContainSubstring("a single replica under a budget of minAvailable above 0 can never be evicted, so it blocks every node drain. "+
				"Set webhook.replicas to 2 or more, or webhook.podDisruptionBudget.enabled=false"), "%v", args)
		}
		// One replica is allowed when nothing blocks its eviction.
		objs := render("--set", "webhook.replicas=1", "--set", "webhook.podDisruptionBudget.enabled=false")
		Expect(*typed[appsv1.Deployment](objs, "Deployment", "configward-webhook").Spec.Replicas).To(BeEquivalentTo(1))
		Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("PodDisruptionBudget/")))
		render("--set", "webhook.replicas=1", "--set", "webhook.podDisruptionBudget.minAvailable=0")
	})

	It("runs both pods under the chart's own PriorityClass, the user's class, or none", func() {
		objs := render()
		pc := typed[schedulingv1.PriorityClass](objs, "PriorityClass", "configward-critical")
		Expect(pc.Value).To(BeEquivalentTo(1000000000), "the highest value a non-system class may have")
		Expect(pc.GlobalDefault).To(BeFalse())
		Expect(*pc.PreemptionPolicy).To(Equal(corev1.PreemptLowerPriority))

		for _, tc := range []struct {
			args      []string
			wantClass string
			wantOwn   bool
		}{
			{[]string{"--set", "priorityClassName=system-cluster-critical"}, "system-cluster-critical", false},
			{[]string{"--set", "priorityClass.create=false"}, "", false},
			{[]string{"--set", "priorityClass.value=1000"}, "configward-critical", true},
		} {
			objs := render(tc.args...)
			for _, name := range []string{"configward-webhook", "configward-controller"} {
				Expect(typed[appsv1.Deployment](objs, "Deployment", name).Spec.Template.Spec.PriorityClassName).To(Equal(tc.wantClass), "%v %s", tc.args, name)
			}
			if tc.wantOwn {
				Expect(typed[schedulingv1.PriorityClass](objs, "PriorityClass", "configward-critical").Value).To(BeEquivalentTo(1000))
			} else {
				Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("PriorityClass/")), "%v", tc.args)
			}
		}
		res := helm("template", "configward", chartDir, "--kube-version", "1.37.2", "--set", "priorityClass.value=2000000000")
		Expect(res.ExitCode).NotTo(Equal(0), "values above 1000000000 are reserved for system classes")
	})

	It("adds extraArgs and extraEnv to each container, after the chart's own arguments", func() {
		objs := render("--set", "webhook.extraArgs={--memory-limit-ratio=0.8,--enable-http2}",
			"--set-json", `webhook.extraEnv=[{"name":"GOMEMLIMIT","value":"400MiB"}]`,
			"--set", "controller.extraArgs={--rollout-rate=5}",
			"--set-json", `controller.extraEnv=[{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]`)
		web := typed[appsv1.Deployment](objs, "Deployment", "configward-webhook").Spec.Template.Spec.Containers[0]
		ctl := typed[appsv1.Deployment](objs, "Deployment", "configward-controller").Spec.Template.Spec.Containers[0]
		Expect(web.Args[len(web.Args)-2:]).To(Equal([]string{"--memory-limit-ratio=0.8", "--enable-http2"}))
		Expect(web.Env).To(Equal([]corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "400MiB"}}))
		Expect(ctl.Args[len(ctl.Args)-1]).To(Equal("--rollout-rate=5"), "last, so it wins over the chart's --rollout-rate")
		Expect(ctl.Env).To(Equal([]corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}))
		Expect(web.Args).NotTo(ContainElement("--rollout-rate=5"))
		Expect(ctl.Args).NotTo(ContainElement("--enable-http2"))

		// The binary takes them: the chart's flags and the extra ones parse.
		var o manager.Controller
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		o.AddFlags(fs)
		Expect(fs.Parse(ctl.Args[1:])).To(Succeed())
		Expect(o.RolloutRate).To(BeEquivalentTo(5))

		res := helm("template", "configward", chartDir, "--kube-version", "1.37.2", "--set-json", `webhook.extraEnv=[{"value":"x"}]`)
		Expect(res.ExitCode).NotTo(Equal(0), "an env var without a name")
		Expect(res.Stderr).To(ContainSubstring("missing property 'name'"))
	})

	It("exempts no cert-manager identity in either process when certManager.serviceAccounts is empty", func() {
		certManagerIdentities := func(objs []*unstructured.Unstructured, deployment string) []string {
			args := typed[appsv1.Deployment](objs, "Deployment", deployment).Spec.Template.Spec.Containers[0].Args[1:]
			var cc *manager.ChangeControl
			fs := pflag.NewFlagSet(deployment, pflag.ContinueOnError)
			if deployment == "configward-webhook" {
				var o manager.Webhook
				o.AddFlags(fs)
				cc = &o.ChangeControl
			} else {
				var o manager.Controller
				o.AddFlags(fs)
				cc = &o.ChangeControl
			}
			Expect(fs.Parse(args)).To(Succeed())
			settings, err := cc.Settings()
			Expect(err).NotTo(HaveOccurred())
			return settings(nil).CertManager.ServiceAccounts
		}
		for _, name := range []string{"configward-webhook", "configward-controller"} {
			Expect(certManagerIdentities(render(), name)).To(Equal([]string{"system:serviceaccount:cert-manager:cert-manager"}), name)

			objs := render("--set-json", "certManager.serviceAccounts=[]")
			Expect(typed[appsv1.Deployment](objs, "Deployment", name).Spec.Template.Spec.Containers[0].Args).To(
				ContainElement("--cert-manager-service-accounts="), "%s: said explicitly, or the binary's default applies", name)
			Expect(certManagerIdentities(objs, name)).To(BeEmpty(), name)

			objs = render("--set", "certManager.serviceAccounts={certs/issuer}")
			Expect(certManagerIdentities(objs, name)).To(Equal([]string{"system:serviceaccount:certs:issuer"}), name)
		}
	})

	It("accepts global values, which Helm passes to every subchart", func() {
		render("--set", "global.foo=bar", "--set", "global.imageRegistry=registry.example")
		res := helm("lint", chartDir, "--strict", "--kube-version", "1.37.2", "--set", "global.foo=bar")
		Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr)
	})

	It("holds the controller to the matchConditions only while it has the grant to write them", func() {
		withGrant, without := kinds(render()), kinds(render("--set", "webhooks.skipWritesWithoutConfig=false"))
		Expect(withGrant).To(ContainElements("ValidatingAdmissionPolicy/configward-controller-reach-mutating", "ValidatingAdmissionPolicyBinding/configward-controller-reach-validating"))
		Expect(without).NotTo(ContainElement(HavePrefix("ValidatingAdmissionPolicy")))
		policy := typed[admissionregistrationv1.ValidatingAdmissionPolicy](render(), "ValidatingAdmissionPolicy", "configward-controller-reach-validating")
		Expect(policy.Spec.MatchConditions).To(ConsistOf(HaveField("Expression", "request.userInfo.username == 'system:serviceaccount:configward:configward-controller'")))
		Expect(policy.Spec.MatchConstraints.ResourceRules).To(ConsistOf(HaveField("ResourceNames", ConsistOf("configward"))))
	})

	It("refuses wrong values at install time, from values.schema.json", func() {
		for _, tc := range []struct{ set, want string }{
			{"webhooks.configHash.failurePolicy=Never", "value must be one of 'Fail', 'Ignore'"},
			{"webhook.replicaz=3", "additional properties 'replicaz' not allowed"},
			{"changeControl.pipelineServiceAccounts={deployer}", "pipelineServiceAccounts/0"},
			{"webhook.shutdownDelay=5", "shutdownDelay"},
			{"workloadKinds[0].group=argoproj.io,workloadKinds[0].version=v1alpha1,workloadKinds[0].kind=Rollout,workloadKinds[0].podTemplatePath=spec.template",
				"at '/workloadKinds/0': missing property 'resource'"},
			{"workloadKinds[0].group=argoproj.io,workloadKinds[0].version=v1alpha1,workloadKinds[0].kind=Rollout,workloadKinds[0].resource=rollouts,workloadKinds[0].podTemplatePath=",
				"/workloadKinds/0/podTemplatePath"},
			{"workloadKinds[0].group=argoproj.io,workloadKinds[0].version=v1alpha1,workloadKinds[0].kind=Rollout,workloadKinds[0].resource=rollouts,workloadKinds[0].podTemplatePath=spec.template,workloadKinds[0].notRolledWhn=x",
				"additional properties 'notRolledWhn' not allowed"},
			{"workloadKinds[0].group=argoproj.io,workloadKinds[0].version=v1alpha1,workloadKinds[0].kind=Rollout,workloadKinds[0].resource=rollouts,workloadKinds[0].podTemplatePath=spec.template,workloadKinds[0].controllers={system:kube-controller-manager}",
				"/workloadKinds/0/controllers/0"},
		} {
			res := helm("template", "configward", chartDir, "--kube-version", "1.37.2", "--set", tc.set)
			Expect(res.ExitCode).NotTo(Equal(0), tc.set)
			Expect(res.Stderr).To(ContainSubstring(tc.want), tc.set)
		}
	})

	It("renders declared workload kinds: the file both processes read, the flag, a restart on change, webhook rules and RBAC", func() {
		values := filepath.Join(GinkgoT().TempDir(), "values.yaml")
		Expect(os.WriteFile(values, []byte(workloadKindsValues), 0o600)).To(Succeed())
		objs := render("-f", values)

		By("a ConfigMap holding the declaration, which configward itself parses")
		cm := typed[corev1.ConfigMap](objs, "ConfigMap", "configward-workload-kinds")
		decls, err := workload.ParseDeclarations([]byte(cm.Data["workload-kinds.yaml"]))
		Expect(err).NotTo(HaveOccurred())
		Expect(decls).To(HaveLen(2))
		Expect(decls[0]).To(Equal(workload.Declaration{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout", Resource: "rollouts",
			PodTemplatePath: "spec.template", TemplateRefPath: "spec.workloadRef",
			NotRolledWhen: []workload.Condition{{Path: "spec.paused", Equals: "true", Why: "the Rollout is paused", Until: "it is resumed"}}}))

		By("mounted into both pods, passed with --workload-kinds, with a checksum that restarts them on change")
		changed := render("-f", values, "--set", "workloadKinds[1].resource=clonesetz")
		for _, name := range []string{"configward-webhook", "configward-controller"} {
			pod := typed[appsv1.Deployment](objs, "Deployment", name).Spec.Template
			Expect(pod.Spec.Containers[0].Args).To(ContainElement("--workload-kinds=/etc/configward/workload-kinds/workload-kinds.yaml"), name)
			Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "workload-kinds", MountPath: "/etc/configward/workload-kinds", ReadOnly: true}), name)
			Expect(pod.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.ConfigMap.Name", "configward-workload-kinds")), name)
			sum := pod.Annotations["checksum/workload-kinds"]
			Expect(sum).To(HaveLen(64), name)
			Expect(typed[appsv1.Deployment](changed, "Deployment", name).Spec.Template.Annotations["checksum/workload-kinds"]).NotTo(Equal(sum), name)
		}

		By("one more rule per declared kind in the config-hash and validate webhooks, and nothing else changed")
		want := generatedWebhookFacts()
		for _, name := range []string{"config-hash.configward.dev", "validate.configward.dev"} {
			w := want[name]
			for _, gvr := range [][3]string{{"argoproj.io", "v1alpha1", "rollouts"}, {"apps.kruise.io", "v1alpha1", "clonesets"}} {
				w.Rules = append(w.Rules, admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{gvr[0]}, APIVersions: []string{gvr[1]}, Resources: []string{gvr[2]}},
				})
			}
			want[name] = w
		}
		Expect(foldCopies(webhookFacts(
			typed[admissionregistrationv1.MutatingWebhookConfiguration](objs, "MutatingWebhookConfiguration", "configward"),
			typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward"),
		))).To(Equal(want))

		By("the webhook reads the declared kinds; the controller also patches them")
		for name, verbs := range map[string][]string{"configward-webhook": {"get", "list", "watch"}, "configward-controller": {"get", "list", "watch", "patch"}} {
			rules := typed[rbacv1.ClusterRole](objs, "ClusterRole", name).Rules
			Expect(rules).To(ContainElement(rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"rollouts"}, Verbs: verbs}), name)
			Expect(rules).To(ContainElement(rbacv1.PolicyRule{APIGroups: []string{"apps.kruise.io"}, Resources: []string{"clonesets"}, Verbs: verbs}), name)
		}

		By("nothing of it without declared kinds")
		Expect(kinds(render())).NotTo(ContainElement("ConfigMap/configward-workload-kinds"))
	})

	It("stays in step with config/: the same CRDs, webhook rules and RBAC", func() {
		generated, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "config", "crd", "bases", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		inChart, err := filepath.Glob(filepath.Join(chartDir, "files", "crds", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(inChart)).To(Equal(len(generated)), "run make manifests")
		for _, g := range generated {
			want, _ := os.ReadFile(g)
			got, err := os.ReadFile(filepath.Join(chartDir, "files", "crds", filepath.Base(g)))
			Expect(err).NotTo(HaveOccurred(), "run make manifests")
			Expect(bytes.Equal(got, want)).To(BeTrue(), "%s differs from config/crd: run make manifests", filepath.Base(g))
		}

		objs := render()
		// What Helm installs and upgrades is the template: the generated
		// CRD plus the chart's labels and the keep policy.
		for _, g := range generated {
			raw, err := os.ReadFile(g)
			Expect(err).NotTo(HaveOccurred())
			want := typed[apiextensionsv1.CustomResourceDefinition](splitYAML(string(raw)), "CustomResourceDefinition", "")
			got := typed[apiextensionsv1.CustomResourceDefinition](objs, "CustomResourceDefinition", want.Name)
			Expect(got.Spec).To(Equal(want.Spec), "%s: the chart's template changed the generated CRD", want.Name)
			Expect(got.Annotations).To(Equal(map[string]string{
				"controller-gen.kubebuilder.io/version": want.Annotations["controller-gen.kubebuilder.io/version"],
				"helm.sh/resource-policy":               "keep",
			}), want.Name)
			Expect(got.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), want.Name)
		}
		Expect(foldCopies(webhookFacts(
			typed[admissionregistrationv1.MutatingWebhookConfiguration](objs, "MutatingWebhookConfiguration", "configward"),
			typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward"),
		))).To(Equal(generatedWebhookFacts()), "the chart's webhooks and config/webhook (from the handlers' markers) differ")

		// Every permission the code's markers ask for is granted to one of
		// the chart's two roles (the snapshots' writes with revisions on).
		roleObjs, err := framework.DecodeManifests(filepath.Join(framework.RepoRoot(), "config", "rbac", "role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		objs = render("--set", "revisions.enabled=true", "--set", "revisions.secrets=true")
		granted := map[string]bool{}
		for _, name := range []string{"configward-webhook", "configward-controller"} {
			for _, r := range typed[rbacv1.ClusterRole](objs, "ClusterRole", name).Rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							granted[g+"/"+res+"/"+v] = true
						}
					}
				}
			}
		}
		for _, r := range roleObjs[0].(*rbacv1.ClusterRole).Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						Expect(granted).To(HaveKey(g+"/"+res+"/"+v), "config/rbac asks for it; the chart does not grant it")
					}
				}
			}
		}
	})
})

// workloadKindsValues declares Argo Rollouts' Rollout and OpenKruise's
// CloneSet, as a platform team would.
const workloadKindsValues = `workloadKinds:
- group: argoproj.io
  version: v1alpha1
  kind: Rollout
  resource: rollouts
  podTemplatePath: spec.template
  templateRefPath: spec.workloadRef
  notRolledWhen:
  - {path: spec.paused, equals: "true", why: the Rollout is paused, until: it is resumed}
- {group: apps.kruise.io, version: v1alpha1, kind: CloneSet, resource: clonesets, podTemplatePath: spec.template}
`
