package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/changecontrol"
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
			"ClusterRole/configward-controller", "ClusterRole/configward-webhook",
			"ClusterRoleBinding/configward-controller", "ClusterRoleBinding/configward-webhook",
			"Deployment/configward-controller", "Deployment/configward-webhook",
			"Issuer/configward-ca", "Issuer/configward-selfsigned",
			"MutatingWebhookConfiguration/configward",
			"PodDisruptionBudget/configward-webhook",
			"Role/configward-hash-key", "Role/configward-leader-election", "RoleBinding/configward-hash-key", "RoleBinding/configward-leader-election",
			"Service/configward-controller-metrics", "Service/configward-webhook",
			"ServiceAccount/configward-controller", "ServiceAccount/configward-webhook",
			"ValidatingWebhookConfiguration/configward",
		}))

		web := typed[appsv1.Deployment](objs, "Deployment", "configward-webhook")
		ctl := typed[appsv1.Deployment](objs, "Deployment", "configward-controller")
		Expect(*web.Spec.Replicas).To(BeEquivalentTo(2))
		Expect(web.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(Equal(0))
		Expect(web.Spec.Template.Spec.Affinity.PodAntiAffinity).NotTo(BeNil())
		Expect(web.Spec.Template.Spec.Containers[0].Args).To(ContainElements("webhook", "--shutdown-delay=5s",
			"--configward-service-accounts=configward/configward-webhook,configward/configward-controller"))
		Expect(ctl.Spec.Template.Spec.Containers[0].Args).To(ContainElements("controller", "--leader-elect=true", "--leader-election-namespace=configward"))
		for _, d := range []*appsv1.Deployment{web, ctl} {
			pod := d.Spec.Template.Spec
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
			case "changes.validate.configward.dev", "changes-ungoverned.validate.configward.dev", "namespaces.record.configward.dev":
				Expect(w.MatchConditions).To(HaveLen(1), w.Name)
				Expect(w.MatchConditions[0].Expression).To(Equal(want), "%s: the chart's list and internal/changecontrol's differ", w.Name)
			default:
				// Workload and schema webhooks skip every kube-system service
				// account: the ReplicaSet controller creating pods must never
				// wait on configward.
				Expect(w.MatchConditions).To(HaveLen(3), w.Name)
			}
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
		for _, name := range []string{"configward-webhook", "configward-controller"} {
			Expect(typed[appsv1.Deployment](objs, "Deployment", name).Spec.Template.Spec.Containers[0].Args).To(
				ContainElements("--pipeline-service-accounts=ci/deployer", "--change-control-namespace-selector=team=payments"), name)
		}
	})

	It("can require the API server's client certificate, admit only the API server's addresses, and bound work in flight", func() {
		web := typed[appsv1.Deployment](render(), "Deployment", "configward-webhook")
		Expect(web.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--max-in-flight=64", "--max-in-flight-bytes=33554432", "--idle-timeout=30s"))
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

	It("refuses wrong values at install time, from values.schema.json", func() {
		for _, tc := range []struct{ set, want string }{
			{"webhooks.configHash.failurePolicy=Never", "value must be one of 'Fail', 'Ignore'"},
			{"webhook.replicaz=3", "additional properties 'replicaz' not allowed"},
			{"changeControl.pipelineServiceAccounts={deployer}", "pipelineServiceAccounts/0"},
			{"webhook.shutdownDelay=5", "shutdownDelay"},
		} {
			res := helm("template", "configward", chartDir, "--kube-version", "1.37.2", "--set", tc.set)
			Expect(res.ExitCode).NotTo(Equal(0), tc.set)
			Expect(res.Stderr).To(ContainSubstring(tc.want), tc.set)
		}
	})

	It("stays in step with config/: the same CRDs, webhook rules and RBAC", func() {
		generated, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "config", "crd", "bases", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		inChart, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(inChart)).To(Equal(len(generated)), "run make manifests")
		for _, g := range generated {
			want, _ := os.ReadFile(g)
			got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(g)))
			Expect(err).NotTo(HaveOccurred(), "run make manifests")
			Expect(bytes.Equal(got, want)).To(BeTrue(), "%s differs from config/crd: run make manifests", filepath.Base(g))
		}

		objs := render()
		Expect(foldCopies(webhookFacts(
			typed[admissionregistrationv1.MutatingWebhookConfiguration](objs, "MutatingWebhookConfiguration", "configward"),
			typed[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", "configward"),
		))).To(Equal(generatedWebhookFacts()), "the chart's webhooks and config/webhook (from the handlers' markers) differ")

		// Every permission the code's markers ask for is granted to one of
		// the chart's two roles.
		roleObjs, err := framework.DecodeManifests(filepath.Join(framework.RepoRoot(), "config", "rbac", "role.yaml"))
		Expect(err).NotTo(HaveOccurred())
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
