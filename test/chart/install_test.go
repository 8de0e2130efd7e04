package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
	"github.com/configward/configward/test/framework/certmanager"
)

func TestChart(t *testing.T) {
	defer framework.RemoveBuilds()
	framework.RequireControlPlane(t)
	framework.RequireHelm(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward Helm chart")
}

// The suite's failures, again at the end of `make test`'s output.
var _ = ReportAfterSuite("failure digest", framework.WriteFailureDigest)

const (
	release   = "configward"
	namespace = "configward"
)

// A Deployment the workload rules refuse whoever sends it: it mounts hot
// config with subPath.
func refusedDeployment(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: hot-flags, namespace: %[1]s, annotations: {configward.dev/reload: hot}}
data: {flags.yaml: "a: 1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: checkout, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: checkout}}
  template:
    metadata: {labels: {app: checkout}}
    spec:
      containers:
      - name: api
        image: registry.example/api:1
        volumeMounts: [{name: flags, mountPath: /etc/app/flags.yaml, subPath: flags.yaml}]
      volumes: [{name: flags, configMap: {name: hot-flags}}]
`, ns)
}

const refusal = `admission webhook "validate.configward.dev" denied the request: [subpath-config]`

// configwardCRDs are the CRDs the chart installs; chart010CRDs those
// chart 0.1.0 installed from crds/ (ConfigDelivery came later, as a
// template Helm owns from the start).
var (
	configwardCRDs = []string{"configschemas.configward.dev", "configpolicies.configward.dev", "configdeliveries.configward.dev"}
	chart010CRDs   = configwardCRDs[:2]
)

// adoptCRDs runs the commands of the chart README ("Upgrading", from chart 0.1.0)
// that hand CRDs an earlier chart version installed from crds/ to the
// release.
func adoptCRDs(env *framework.Env) {
	for _, crd := range chart010CRDs {
		res := env.Kubectl("", "label", "crd", crd, "app.kubernetes.io/managed-by=Helm")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		res = env.Kubectl("", "annotate", "crd", crd, "meta.helm.sh/release-name="+release, "meta.helm.sh/release-namespace="+namespace)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	}
}

// chartVariant copies the chart into a temporary directory for change to
// make to it (the next or the previous chart version).
func chartVariant(change func(dir string)) string {
	dir := filepath.Join(GinkgoT().TempDir(), "configward")
	Expect(os.CopyFS(dir, os.DirFS(chartDir))).To(Succeed())
	change(dir)
	return dir
}

var _ = Describe("helm install next to cert-manager", Ordered, func() {
	var (
		env     *framework.Env
		c       client.Client
		certDir string
		addr    string
		ctx     context.Context
		cancel  context.CancelFunc
		// webhookDone reports the end of the configward webhook process,
		// which serves every spec after the first; stopWebhook stops it.
		webhookDone chan error
		stopWebhook func()
	)

	AfterAll(func() {
		if webhookDone != nil {
			stopWebhook()
		}
		cancel()
	})

	// syncServingCertificate does what the kubelet does for the mounted
	// Secret: it swaps the issued files into the certificate directory
	// atomically.
	syncServingCertificate := func() []byte {
		var s corev1.Secret
		Eventually(func() []byte {
			_ = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-webhook-tls"}, &s)
			return s.Data["tls.crt"]
		}, 60*time.Second, 250*time.Millisecond).ShouldNot(BeEmpty(), "cert-manager did not issue the serving certificate")
		Expect(framework.WriteAtomic(certDir, map[string][]byte{"tls.crt": s.Data["tls.crt"], "tls.key": s.Data["tls.key"], "ca.crt": s.Data["ca.crt"]})).To(Succeed())
		return s.Data["tls.crt"]
	}
	servedCertificate := func() []byte {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads which certificate is served
		if err != nil {
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	caBundles := func() [][]byte {
		var m admissionregistrationv1.MutatingWebhookConfiguration
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		if c.Get(ctx, client.ObjectKey{Name: release}, &m) != nil || c.Get(ctx, client.ObjectKey{Name: release}, &v) != nil {
			return nil
		}
		var out [][]byte
		for _, w := range m.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		for _, w := range v.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		return out
	}
	// Change control is off in the flags: ConfigPolicies turn it on where
	// they name a pipeline.
	// The Report CRD and a declared workload kind (Argo Rollouts' Rollout)
	// are installed too, so that the processes' writes of Reports and
	// their reads of Rollouts run under the chart's RBAC.
	installArgs := func() []string {
		return []string{"-n", namespace, "--set", "webhook.externalURL=https://" + addr, "--set", "certificate.extraDNSNames={localhost}",
			"--set", "reports.installCRD=true", "--set-json", `workloadKinds=[{"group":"argoproj.io","version":"v1alpha1","kind":"Rollout","resource":"rollouts","podTemplatePath":"spec.template","templateRefPath":"spec.workloadRef"}]`}
	}
	// startWebhook runs `configward webhook` in-process on the chart's
	// external URL, serving the certificate cert-manager issued;
	// stopWebhook stops it (an outage, as far as the API server can tell).
	// mountWorkloadKinds does what the kubelet does for the chart's
	// workload-kinds ConfigMap: it writes the file the flag names, here
	// under the environment's directory.
	mountWorkloadKinds := func(flag *string) {
		if *flag == "" {
			return
		}
		var cm corev1.ConfigMap
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-workload-kinds"}, &cm)).To(Succeed())
		*flag = filepath.Join(env.Dir, "workload-kinds.yaml")
		Expect(os.WriteFile(*flag, []byte(cm.Data["workload-kinds.yaml"]), 0o600)).To(Succeed())
	}
	startWebhook := func() {
		// The flags the chart gives the webhook container, parsed by the
		// binary's own flag set; only where it listens and finds its
		// certificate differ in-process.
		var o manager.Webhook
		fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
		o.AddFlags(fs)
		Expect(fs.Parse(chartArgs("configward-webhook", installArgs()...))).To(Succeed())
		o.MetricsAddr, o.ProbeAddr, o.LogFormat = "0", "0", "console"
		mountWorkloadKinds(&o.WorkloadKindsFile)
		o.BindAddress, o.CertDir, o.CertPollInterval, o.ShutdownDelay = "127.0.0.1:"+addr[len("localhost:"):], certDir, time.Second, 0
		// The agents' port, in the pod :9444 of its own network, is any
		// free loopback port here: the node suite, which may run beside
		// this one, serves the same port number on the node's address.
		o.ReloadAgent.BindAddress = "127.0.0.1:0"
		Expect(o.Validate()).To(Succeed())
		p, err := manager.NewWebhook(asServiceAccount(env.Config, "webhook"), o)
		Expect(err).NotTo(HaveOccurred())
		wctx, wcancel := context.WithCancel(ctx)
		webhookDone = make(chan error, 1)
		go func() {
			err := p.Run(wctx)
			if err != nil {
				// Said at once: the spec that notices the outage comes later.
				fmt.Fprintf(GinkgoWriter, "configward webhook stopped: %v\n", err)
			}
			webhookDone <- err
		}()
		stopWebhook = func() {
			wcancel()
			Expect(<-webhookDone).To(Succeed())
			webhookDone = nil
		}
	}

	BeforeAll(func() {
		logger := zap.New(zap.WriteTo(io.MultiWriter(GinkgoWriter, &processLogs)))
		ctrl.SetLogger(logger)
		klog.SetLogger(logger.WithName("client-go"))
		crds, err := certmanager.CRDs()
		Expect(err).NotTo(HaveOccurred())
		argoCRDs, err := framework.ArgoRolloutCRDs()
		Expect(err).NotTo(HaveOccurred())
		// A cluster configward was never installed in: the chart creates
		// the CRDs. (Installing them and deleting them first, as this suite
		// did, waited on kube-apiserver's CRD cleanup: over 30 s, and once
		// over two minutes, under make test's load.)
		env, err = framework.Start(framework.Options{WithoutWebhook: true, WithoutConfigwardCRDs: true,
			ExtraCRDPaths: []string{crds, argoCRDs}, WithoutReports: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		Expect(cmscheme.AddToScheme(env.Client.Scheme())).To(Succeed())
		Expect(apiextensionsv1.AddToScheme(env.Client.Scheme())).To(Succeed())
		c = env.Client
		ctx, cancel = context.WithCancel(context.Background())
		DeferCleanup(cancel)
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager"}})).To(Succeed())
		// cert-manager acts as its own service account, the identity change
		// control lets write the Secrets cert-manager manages.
		certManagerKubeconfig, err := env.UserKubeconfig("system:serviceaccount:cert-manager:cert-manager", "system:masters")
		Expect(err).NotTo(HaveOccurred())
		Expect(certmanager.Start(ctx, env.Config, certManagerKubeconfig, "cert-manager")).To(Succeed())

		// The webhook will listen on localhost:<port>, the external URL the
		// chart puts into its webhook configurations.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr = fmt.Sprintf("localhost:%d", l.Addr().(*net.TCPAddr).Port)
		Expect(l.Close()).To(Succeed())
		certDir = filepath.Join(env.Dir, "issued-tls")
	})

	It("installs with the documented command; cert-manager issues the certificate and injects the CA", func() {
		res := env.Helm(append([]string{"install", release, chartDir, "--create-namespace"}, installArgs()...)...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)

		By("the CRDs, owned by the release and kept on uninstall, and the chart's PriorityClass")
		Eventually(liveCRDs, 30*time.Second, 250*time.Millisecond).WithArguments(ctx, c).Should(HaveLen(len(configwardCRDs)))
		for _, crd := range liveCRDs(ctx, c) {
			Expect(crd.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"), crd.Name)
			Expect(crd.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", release), crd.Name)
			Expect(crd.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), crd.Name)
		}
		Eventually(func() []string {
			var established []string
			for _, crd := range liveCRDs(ctx, c) {
				for _, cond := range crd.Status.Conditions {
					if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
						established = append(established, crd.Name)
					}
				}
			}
			return established
		}, 30*time.Second, 250*time.Millisecond).Should(ConsistOf(configwardCRDs))
		var pc schedulingv1.PriorityClass
		Expect(c.Get(ctx, client.ObjectKey{Name: release + "-critical"}, &pc)).To(Succeed())
		Expect(pc.Value).To(BeEquivalentTo(1000000000))

		syncServingCertificate()
		startWebhook()
		// The controller keeps the namespace labels the chart's fail-closed
		// webhook copies are scoped to.
		var co manager.Controller
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		co.AddFlags(fs)
		Expect(fs.Parse(chartArgs("configward-controller", installArgs()...))).To(Succeed())
		// Leader election as in the pod (only its namespace, which a pod
		// knows from its service account, is given): its Lease and Events
		// are writes the chart's RBAC must allow.
		co.MetricsAddr, co.ProbeAddr, co.LogFormat, co.Restartable = "0", "0", "console", true
		co.LeaderElectionNamespace = namespace
		mountWorkloadKinds(&co.WorkloadKindsFile)
		ctl, err := manager.NewController(asServiceAccount(env.Config, "controller"), co)
		Expect(err).NotTo(HaveOccurred())
		go func() { _ = ctl.Run(ctx) }()

		var ca corev1.Secret
		Eventually(func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-ca"}, &ca)
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		Eventually(caBundles, 60*time.Second, 250*time.Millisecond).Should(HaveEach(Equal(ca.Data["tls.crt"])),
			"cert-manager's CA injector did not put the chart's CA into every webhook")
		// Every webhook controller-gen generated, and the chart's copies.
		Expect(caBundles()).To(HaveLen(len(generatedWebhookFacts()) + len(chartCopies)))
	})

	It("enforces a rule end to end through kubectl, and lets through what the selectors and match conditions exclude", func() {
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})).To(Succeed())
		Eventually(func() string {
			return env.Kubectl(refusedDeployment("shop"), "apply", "-f", "-").Stderr
		}, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring(refusal))

		By("namespaces the chart excludes by name")
		for _, ns := range []string{"kube-system", namespace} {
			res := env.Kubectl(refusedDeployment(ns), "apply", "--dry-run=server", "-f", "-")
			Expect(res.ExitCode).To(Equal(0), "%s: %s", ns, res.Stderr)
		}
		By("the ignore label, which the default values do not honour")
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Labels: map[string]string{"configward.dev/ignore": "true"}}})).To(Succeed())
		Eventually(func() string {
			return env.Kubectl(refusedDeployment("legacy"), "apply", "-f", "-").Stderr
		}, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring(refusal))

		By("each match condition, with an identity it skips")
		Expect(c.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "chart-test-system-identities"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{
				{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:kube-controller-manager"},
				{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccount:kube-system:replicaset-controller"},
				{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:node:worker-1"},
				{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
				{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccount:kube-system:some-addon"},
			},
		})).To(Succeed())
		for _, tc := range []struct {
			condition string
			args      []string
		}{
			{"exclude-kubernetes-components", []string{"--as=system:kube-controller-manager"}},
			{"exclude-kubernetes-components", []string{"--as=system:serviceaccount:kube-system:replicaset-controller"}},
			{"exclude-nodes", []string{"--as=system:node:worker-1", "--as-group=system:nodes"}},
		} {
			res := env.Kubectl(refusedDeployment("shop"), append(tc.args, "apply", "--dry-run=server", "-f", "-")...)
			Expect(res.ExitCode).To(Equal(0), "%s: %s", tc.condition, res.Stderr)
		}
		res := env.Kubectl(refusedDeployment("shop"), "--as=alice", "apply", "--dry-run=server", "-f", "-")
		Expect(res.Stderr).To(ContainSubstring(refusal), "an ordinary user must still be judged")
		res = env.Kubectl(refusedDeployment("shop"), "--as=system:serviceaccount:kube-system:some-addon", "apply", "--dry-run=server", "-f", "-")
		Expect(res.Stderr).To(ContainSubstring(refusal), "an add-on in kube-system is judged: only Kubernetes' own components, each named, are skipped")
	})

	It("lets configward's controller change only the matchConditions of its webhook configurations", func() {
		controller := []string{"--as=system:serviceaccount:" + namespace + ":" + release + "-controller",
			"--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:" + namespace}
		patch := func(kind, jsonPatch string) framework.KubectlResult {
			return env.Kubectl("", append(controller, "patch", kind, release, "--type=json", "-p", jsonPatch, "--dry-run=server")...)
		}
		const refused = "configward's controller may change only the matchConditions"
		for _, tc := range []struct{ what, kind, patch string }{
			{"widen a rule", "validatingwebhookconfiguration", `[{"op":"add","path":"/webhooks/0/rules/0/operations/-","value":"DELETE"}]`},
			{"change a failure policy", "validatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`},
			{"change the CA bundle", "mutatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"` +
				base64.StdEncoding.EncodeToString([]byte("not a CA")) + `"}]`},
			{"point a webhook elsewhere", "mutatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/clientConfig/url","value":"https://attacker.example/"}]`},
			{"change its reinvocation", "mutatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/reinvocationPolicy","value":"Never"}]`},
			{"take a webhook away", "validatingwebhookconfiguration", `[{"op":"remove","path":"/webhooks/0"}]`},
			{"change the CA injection", "validatingwebhookconfiguration", `[{"op":"add","path":"/metadata/annotations/cert-manager.io~1inject-ca-from","value":"default/other"}]`},
		} {
			res := patch(tc.kind, tc.patch)
			Expect(res.ExitCode).NotTo(Equal(0), "the controller may %s: %s", tc.what, res.Stdout)
			Expect(res.Stderr).To(ContainSubstring(refused), tc.what)
		}
		By("what it owns: the matchConditions")
		res := patch("validatingwebhookconfiguration", `[{"op":"add","path":"/webhooks/0/matchConditions","value":[{"name":"probe","expression":"true"}]}]`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		By("anyone else, the installer here, is not held to it")
		res = env.Kubectl("", "patch", "validatingwebhookconfiguration", release, "--type=json", "--dry-run=server",
			"-p", `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	})

	It("shows zero counts in kubectl get configschemas, not blank columns", func() {
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "schemas"}})).To(Succeed())
		res := env.Kubectl(`apiVersion: configward.dev/v1alpha1
kind: ConfigSchema
metadata: {name: unused, namespace: schemas}
spec:
  configMapNames: [not-there-yet]
  keys:
  - name: app.yaml
    format: yaml
    schema: {type: object}
`, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() string {
			return env.Kubectl("", "get", "configschema", "unused", "-n", "schemas", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`).Stdout
		}, 30*time.Second, 250*time.Millisecond).Should(Equal("True"), "the controller did not reconcile the ConfigSchema")
		res = env.Kubectl("", "get", "configschemas", "-n", "schemas")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		Expect(lines).To(HaveLen(2), res.Stdout)
		Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "READY", "GOVERNED", "VIOLATIONS", "AGE"}))
		row := strings.Fields(lines[1])
		Expect(row).To(HaveLen(5), "a blank column:\n%s", res.Stdout)
		Expect(row[:4]).To(Equal([]string{"unused", "True", "0", "0"}), res.Stdout)
	})

	It("keeps serving through a renewal: the webhook loads the new certificate, the CA bundle stays, the API server keeps calling", func() {
		before := syncServingCertificate()
		bundles := caBundles()
		var cert cmapi.Certificate
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-webhook"}, &cert)).To(Succeed())
		// What `cmctl renew` does: ask cert-manager to issue again now.
		cert.Status.Conditions = append(cert.Status.Conditions, cmapi.CertificateCondition{
			Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
			Message: "renewal requested by the chart test", LastTransitionTime: ptrNow(),
		})
		Expect(c.Status().Update(ctx, &cert)).To(Succeed())

		var renewed []byte
		Eventually(func() bool {
			renewed = syncServingCertificate()
			return string(renewed) != string(before)
		}, 60*time.Second, 500*time.Millisecond).Should(BeTrue(), "cert-manager did not re-issue the certificate")
		block, _ := pemDecode(renewed)
		Eventually(servedCertificate, 30*time.Second, 250*time.Millisecond).Should(Equal(block), "the webhook did not load the renewed certificate")
		Expect(caBundles()).To(Equal(bundles), "the CA bundle must not change when the serving certificate renews")
		res := env.Kubectl(refusedDeployment("shop"), "apply", "-f", "-")
		Expect(res.Stderr).To(ContainSubstring(refusal))
	})

	It("while configward is down, refuses ConfigMap and Secret writes only where it enforces something, and recovers", func() {
		// The API server's view of "is configward answering" is the
		// webhook's listener: stopping the in-process webhook is an outage.
		waitForWebhook := func() {
			Eventually(func() string {
				return env.Kubectl(refusedDeployment("shop"), "apply", "--dry-run=server", "-f", "-").Stderr
			}, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring(refusal), "the webhook did not come back")
		}
		config := func(ns, name, v string) string {
			return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {level: %q}\n---\n"+
				"apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\nstringData: {password: %q}\n", name, ns, v, name, ns, v)
		}
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}})).To(Succeed())
		Expect(env.Kubectl(config("plain", "app", "1"), "apply", "-f", "-").ExitCode).To(Equal(0))

		By("change control off everywhere and no ConfigSchema: an outage blocks no ConfigMap or Secret write")
		stopWebhook()
		for _, args := range [][]string{{"apply", "-f", "-"}, {"create", "-f", "-"}} {
			name := "app"
			if args[0] == "create" {
				name = "new"
			}
			res := env.Kubectl(config("plain", name, "2"), args...)
			Expect(res.ExitCode).To(Equal(0), "%v during the outage: %s", args, res.Stderr)
		}
		Expect(env.Kubectl("", "delete", "configmap,secret", "new", "-n", "plain").ExitCode).To(Equal(0))
		startWebhook()
		waitForWebhook()

		By("a ConfigPolicy puts one namespace under change control; configward labels it")
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "governed"}})).To(Succeed())
		Expect(c.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "chart-test-pipeline"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"}},
		})).To(Succeed())
		res := env.Kubectl("apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: governed}\nspec:\n"+
			"  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: governed}}\n  pipeline: {serviceAccounts: [ci/deployer]}\n", "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() map[string]string {
			var ns corev1.Namespace
			_ = c.Get(ctx, client.ObjectKey{Name: "governed"}, &ns)
			return ns.Labels
		}, 30*time.Second, 250*time.Millisecond).Should(HaveKeyWithValue("configward.dev/change-control", "governed"))
		pipeline := "--as=system:serviceaccount:ci:deployer"
		Eventually(func() int {
			return env.Kubectl(config("governed", "app", "1"), pipeline, "apply", "-f", "-").ExitCode
		}, 30*time.Second, 250*time.Millisecond).Should(Equal(0))
		Eventually(func() string {
			return env.Kubectl(config("governed", "app", "x"), "apply", "--dry-run=server", "-f", "-").Stderr
		}, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring("[out-of-pipeline-edit]"), "change control never enforced")

		By("an outage: the governed namespace refuses every write, even the pipeline's; the others do not")
		stopWebhook()
		res = env.Kubectl(config("governed", "app", "2"), pipeline, "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring(`failed calling webhook "changes.validate.configward.dev"`))
		var cm corev1.ConfigMap
		Expect(c.Get(ctx, client.ObjectKey{Namespace: "governed", Name: "app"}, &cm)).To(Succeed())
		Expect(cm.Data).To(Equal(map[string]string{"level": "1"}), "a refused write leaves the object as it was")
		res = env.Kubectl(config("plain", "app", "3"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)

		By("recovery: configward answers again and the pipeline's write goes through")
		startWebhook()
		waitForWebhook()
		Eventually(func() int {
			return env.Kubectl(config("governed", "app", "2"), pipeline, "apply", "-f", "-").ExitCode
		}, 30*time.Second, 250*time.Millisecond).Should(Equal(0))

		By("cert-manager, as its own service account, issues into a Secret in the governed namespace")
		res = env.Kubectl(`apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: governed}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: internal, namespace: governed}
spec:
  secretName: internal-tls
  dnsNames: [internal.governed.svc]
  issuerRef: {name: selfsigned, kind: Issuer}
`, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() []byte {
			var s corev1.Secret
			_ = c.Get(ctx, client.ObjectKey{Namespace: "governed", Name: "internal-tls"}, &s)
			return s.Data["tls.crt"]
		}, 60*time.Second, 250*time.Millisecond).ShouldNot(BeEmpty(), "cert-manager could not issue into a governed namespace")
	})

	It("while configward is down, blocks exactly the writes the outage table of the operations page says, and the emergency steps of the chart README unblock them", func() {
		// Each write is one a webhook matches, sent as a server-side dry
		// run (webhooks are called for those too) so that it changes
		// nothing, and is clean: with configward up, every one passes.
		pipeline := "--as=system:serviceaccount:ci:deployer"
		writes := []outageWrite{
			{"`config-hash` + `validate` (Ignore + Fail)", "create a Deployment that reads a ConfigMap (namespace `shop`)", configuredDeployment("shop"), []string{"apply"}},
			{"`config-hash` + `validate` (Ignore + Fail)", "create a Pod that reads a ConfigMap (namespace `shop`)", configuredPod("shop"), []string{"apply"}},
			{"none (`configward-writes-with-config`)", "create a Deployment that reads no config (namespace `shop`)", plainDeployment("shop"), []string{"apply"}},
			{"none (`configward-writes-with-config`)", "create a Pod that reads no config (namespace `shop`)", plainPod("shop"), []string{"apply"}},
			{"`pod-config` (Ignore)", "create a pod of a revision (it names config snapshots) as the replicaset controller (namespace `shop`)",
				revisionPod("shop"), []string{"--as=system:serviceaccount:kube-system:replicaset-controller", "create"}},
			{"none (namespace excluded)", "create a Deployment in `kube-system`", plainDeployment("kube-system"), []string{"apply"}},
			{"`configmaps` (Fail)", "write a ConfigMap where a ConfigSchema is (`schemas`)", plainConfigMap("schemas"), []string{"apply"}},
			{"`configmaps-without-schemas` + `changes-ungoverned` (Ignore)", "write a ConfigMap or Secret elsewhere (`plain`)", plainConfigMap("plain"), []string{"apply"}},
			{"`changes-ungoverned` (Ignore)", "delete a ConfigMap elsewhere (`plain`)", "", []string{"delete", "configmap", "app", "-n", "plain"}},
			{"`changes` (Fail)", "write a ConfigMap in a governed namespace, as the pipeline", plainConfigMap("governed"), []string{pipeline, "apply"}},
			{"`configschemas` (Fail)", "create a ConfigSchema", "apiVersion: configward.dev/v1alpha1\nkind: ConfigSchema\nmetadata: {name: probe, namespace: schemas}\nspec:\n  configMapNames: [probe]\n  keys: [{name: a.json, format: json, schema: {type: object}}]\n", []string{"apply"}},
			{"`configpolicies` (Fail)", "create a ConfigPolicy", "apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: probe}\nspec:\n  namespaceSelector: {matchLabels: {probe: none}}\n", []string{"apply"}},
			{"`namespaces` (Ignore)", "label a Namespace", "", []string{"label", "namespace", "plain", "outage=probe", "--overwrite"}},
		}
		run := func(w outageWrite) string {
			args := append(append([]string{}, w.args...), "--dry-run=server")
			if w.manifest != "" {
				args = append(args, "-f", "-")
			}
			res := env.Kubectl(w.manifest, args...)
			if res.ExitCode == 0 {
				return "passes"
			}
			if m := failedWebhook.FindStringSubmatch(res.Stderr); m != nil {
				return "refused (`" + strings.TrimSuffix(m[1], ".configward.dev") + "`)"
			}
			Fail(fmt.Sprintf("%s: neither passed nor refused for the outage: %s", w.write, res.Stderr))
			return ""
		}
		outcomes := func() []string {
			out := make([]string, len(writes))
			for i, w := range writes {
				out[i] = run(w)
			}
			return out
		}
		failurePolicies := func(policy string) []string {
			args := []string{"upgrade", release, chartDir, "-n", namespace, "--reuse-values"}
			for _, w := range []string{"validateWorkloads", "validateConfigMaps", "validateConfigSchemas", "validateConfigPolicies", "validateConfigChanges"} {
				args = append(args, "--set", "webhooks."+w+".failurePolicy="+policy)
			}
			return args
		}

		By("configward up: every write passes")
		for _, w := range writes {
			Expect(run(w)).To(Equal("passes"), w.write)
		}
		By("configward down, as installed")
		stopWebhook()
		down := outcomes()
		By("emergency step 2, first way: the chart README's helm upgrade that sets the failure policies to Ignore")
		res := env.Helm(failurePolicies("Ignore")...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		ignored := outcomes()
		res = env.Helm(failurePolicies("Fail")...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(outcomes()).To(Equal(down), "setting the failure policies back restores the outage's behaviour")
		By("emergency step 2, second way: delete the validating configuration")
		res = env.Kubectl("", "delete", "validatingwebhookconfiguration", release)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		deleted := outcomes()

		By("recovery (step 3): configward back, helm upgrade with the normal values recreates the configuration")
		startWebhook()
		res = env.Helm(append([]string{"upgrade", release, chartDir}, installArgs()...)...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() string {
			return env.Kubectl(refusedDeployment("shop"), "apply", "--dry-run=server", "-f", "-").Stderr
		}, 60*time.Second, 250*time.Millisecond).Should(ContainSubstring(refusal), "the rules are not enforced again")
		for _, w := range writes {
			Expect(run(w)).To(Equal("passes"), w.write)
		}

		var table strings.Builder
		table.WriteString("| webhook (failure policy) | write | configward down | after `helm upgrade` to Ignore | after deleting the validating configuration |\n|---|---|---|---|---|\n")
		for i, w := range writes {
			fmt.Fprintf(&table, "| %s | %s | %s | %s | %s |\n", w.webhook, w.write, down[i], ignored[i], deleted[i])
		}
		AddReportEntry("outage table", table.String())
		page, err := os.ReadFile(filepath.Join(framework.RepoRoot(), filepath.FromSlash(outageTablePage)))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(page)).To(ContainSubstring(outageTableBegin+"\n"+table.String()+outageTableEnd),
			"the outage table of %s is not what this test found; replace it with:\n%s", outageTablePage, table.String())
	})

	It("upgrades with changed values", func() {
		res := env.Helm(append([]string{"upgrade", release, chartDir, "--set", "webhooks.validateWorkloads.failurePolicy=Ignore", "--set", "webhook.replicas=3",
			"--set", "webhooks.ignoreLabel.enabled=true"}, installArgs()...)...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		Expect(c.Get(ctx, client.ObjectKey{Name: release}, &v)).To(Succeed())
		for _, w := range v.Webhooks {
			if w.Name == "validate.configward.dev" {
				Expect(*w.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
			}
		}
		var d appsv1.Deployment
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-webhook"}, &d)).To(Succeed())
		Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
		Eventually(caBundles, 30*time.Second, 250*time.Millisecond).Should(HaveEach(Not(BeEmpty())), "the upgrade lost the injected CA")
		Expect(env.Kubectl(refusedDeployment("shop"), "apply", "-f", "-").Stderr).To(ContainSubstring(refusal))
		Eventually(func() int {
			return env.Kubectl(refusedDeployment("legacy"), "apply", "--dry-run=server", "-f", "-").ExitCode
		}, 30*time.Second, 250*time.Millisecond).Should(Equal(0), "with webhooks.ignoreLabel.enabled the label keeps the webhooks away")
	})

	It("upgrades the CRDs with the chart, and keeps the objects they hold", func() {
		// The next chart version: this one with one more printer column on
		// the ConfigSchema CRD.
		next := chartVariant(func(dir string) {
			file := filepath.Join(dir, "files", "crds", "configward.dev_configschemas.yaml")
			raw, err := os.ReadFile(file)
			Expect(err).NotTo(HaveOccurred())
			changed := strings.Replace(string(raw), "  - additionalPrinterColumns:\n",
				"  - additionalPrinterColumns:\n    - jsonPath: .status.observedGeneration\n      name: Observed\n      type: integer\n", 1)
			Expect(changed).NotTo(Equal(string(raw)))
			Expect(os.WriteFile(file, []byte(changed), 0o644)).To(Succeed())
		})
		res := env.Helm(append([]string{"upgrade", release, next, "--reuse-values"}, installArgs()...)...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)

		columns := func() []string {
			var crd apiextensionsv1.CustomResourceDefinition
			Expect(c.Get(ctx, client.ObjectKey{Name: "configschemas.configward.dev"}, &crd)).To(Succeed())
			var names []string
			for _, col := range crd.Spec.Versions[0].AdditionalPrinterColumns {
				names = append(names, col.Name)
			}
			return names
		}
		Expect(columns()).To(Equal([]string{"Observed", "Ready", "Governed", "Violations", "Age"}), "helm upgrade did not update the CRD")
		Eventually(func() string {
			return env.Kubectl("", "get", "configschemas", "-n", "schemas").Stdout
		}, 30*time.Second, 250*time.Millisecond).Should(MatchRegexp(`^NAME\s+OBSERVED\s+READY`), "the API server does not serve the new column")

		By("every ConfigSchema and ConfigPolicy is still there, and the upgrade kept the values")
		Expect(c.Get(ctx, client.ObjectKey{Namespace: "schemas", Name: "unused"}, &v1alpha1.ConfigSchema{})).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKey{Name: "governed"}, &v1alpha1.ConfigPolicy{})).To(Succeed())
		var d appsv1.Deployment
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-webhook"}, &d)).To(Succeed())
		Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))

		By("back to this chart version: the column goes again")
		res = env.Helm(append([]string{"upgrade", release, chartDir, "--reuse-values"}, installArgs()...)...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(columns()).To(Equal([]string{"Ready", "Governed", "Violations", "Age"}))
	})

	It("runs both processes as the chart's ServiceAccounts: nothing the specs above drove them to do was forbidden", func() {
		// Admission, namespace labels, the hash key's first creation,
		// Events and leader election have run by now; a rollout, here. The
		// processes act only with what the chart's RBAC grants.
		By("a rollout: a ConfigMap change re-stamps the Deployment that reads it")
		manifests := func(level string) string {
			return `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: chart-rbac}
data: {level: ` + level + `}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: chart-rbac}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: app:1, envFrom: [{configMapRef: {name: cfg}}]}
`
		}
		Expect(env.Kubectl("", "create", "namespace", "chart-rbac").ExitCode).To(Equal(0))
		hash := func() string {
			return env.Kubectl("", "get", "deployment", "web", "-n", "chart-rbac", "-o", `jsonpath={.spec.template.metadata.annotations.configward\.dev/config-hash}`).Stdout
		}
		Eventually(func() string {
			env.Kubectl(manifests("info"), "apply", "-f", "-")
			return hash()
		}, 30*time.Second, time.Second).ShouldNot(BeEmpty())
		first := hash()
		res := env.Kubectl(manifests("debug"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(hash, 30*time.Second, 250*time.Millisecond).ShouldNot(Equal(first), "the controller did not roll the Deployment")

		By("a declared kind: a Rollout is stamped and judged by the webhook, and the controller watches it")
		res = env.Kubectl(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: canary, namespace: chart-rbac}
spec:
  selector: {matchLabels: {app: canary}}
  template:
    metadata: {labels: {app: canary}}
    spec:
      containers:
      - {name: app, image: app:1, envFrom: [{configMapRef: {name: cfg}}]}
`, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(env.Kubectl("", "get", "rollout", "canary", "-n", "chart-rbac", "-o", `jsonpath={.spec.template.metadata.annotations.configward\.dev/config-hash}`).Stdout).NotTo(BeEmpty())

		By("Reports: the controller writes them where their CRD is served")
		Eventually(func() string {
			return env.Kubectl("", "get", "reports.openreports.io", "-n", "chart-rbac", "-o", "name").Stdout
		}, 30*time.Second, 250*time.Millisecond).ShouldNot(BeEmpty())

		Expect(processLogs.String()).NotTo(ContainSubstring("forbidden"))
		var lease coordinationv1.Lease
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: manager.DefaultLeaderElectionID}, &lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity).NotTo(BeNil(), "the controller never led")
	})

	It("says in a ConfigPolicy's status when the chart's RBAC does not let revisions work (installed without revisions.enabled)", func() {
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "wants-revisions"}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "chart-rbac"}},
			Revisions:         v1alpha1.RevisionSettings{Enabled: true, Secrets: true}}}
		Expect(c.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(c.Delete(ctx, policy)).To(Succeed()) })
		Eventually(func() string {
			Expect(c.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			cond := meta.FindStatusCondition(policy.Status.Conditions, v1alpha1.ConditionRevisionsReady)
			if cond == nil {
				return ""
			}
			return string(cond.Status) + " " + cond.Reason + ": " + cond.Message
		}, 30*time.Second, 250*time.Millisecond).Should(Equal("False SnapshotsForbidden: configward's controller may not create configmaps, delete configmaps, create secrets, delete secrets cluster-wide, " +
			"so no revision it turns on can be rolled out: install the chart with revisions.enabled=true and revisions.secrets=true"))
	})

	It("uninstalls without leaving a webhook configuration behind to block the cluster, and keeps the CRDs and what they hold", func() {
		res := env.Helm("uninstall", release, "-n", namespace, "--wait")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(ContainSubstring("These resources were kept due to the resource policy"))
		Expect(liveCRDs(ctx, c)).To(HaveLen(len(configwardCRDs)), "helm.sh/resource-policy: keep")
		Expect(c.Get(ctx, client.ObjectKey{Namespace: "schemas", Name: "unused"}, &v1alpha1.ConfigSchema{})).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKey{Name: "governed"}, &v1alpha1.ConfigPolicy{})).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKey{Name: release + "-critical"}, &schedulingv1.PriorityClass{})).To(
			Satisfy(apierrors.IsNotFound), "the chart's PriorityClass goes with the release")
		var m admissionregistrationv1.MutatingWebhookConfigurationList
		var v admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(c.List(ctx, &m)).To(Succeed())
		Expect(c.List(ctx, &v)).To(Succeed())
		Expect(m.Items).To(BeEmpty())
		Expect(v.Items).To(BeEmpty())
		res = env.Kubectl(refusedDeployment("shop"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	})

	It("takes over the CRDs an uninstalled release kept, and those an earlier chart version installed from crds/ with the commands of the chart README", func() {
		By("installing again under the same name and namespace takes over the kept CRDs")
		res := env.Helm(append([]string{"install", release, chartDir}, installArgs()...)...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		res = env.Helm("uninstall", release, "-n", namespace, "--wait")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)

		By("a release of chart 0.1.0, which had the CRDs in crds/: Helm created them without its ownership metadata")
		for _, crd := range chart010CRDs {
			res := env.Kubectl("", "label", "crd", crd, "app.kubernetes.io/managed-by-")
			Expect(res.ExitCode).To(Equal(0), res.Stderr)
			res = env.Kubectl("", "annotate", "crd", crd, "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-", "helm.sh/resource-policy-")
			Expect(res.ExitCode).To(Equal(0), res.Stderr)
		}
		// 0.1.0's layout, and its values: none of those this version added.
		previous := chartVariant(func(dir string) {
			Expect(os.Remove(filepath.Join(dir, "files", "crds", "configward.dev_configdeliveries.yaml"))).To(Succeed())
			Expect(os.Rename(filepath.Join(dir, "files", "crds"), filepath.Join(dir, "crds"))).To(Succeed())
			Expect(os.Remove(filepath.Join(dir, "templates", "crds.yaml"))).To(Succeed())
			Expect(os.Remove(filepath.Join(dir, "templates", "priorityclass.yaml"))).To(Succeed())
			raw, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
			Expect(err).NotTo(HaveOccurred())
			var values map[string]any
			Expect(sigsyaml.Unmarshal(raw, &values)).To(Succeed())
			delete(values, "crds")
			delete(values, "priorityClass")
			for _, component := range []string{"webhook", "controller"} {
				delete(values[component].(map[string]any), "extraArgs")
				delete(values[component].(map[string]any), "extraEnv")
			}
			raw, err = sigsyaml.Marshal(values)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(dir, "values.yaml"), raw, 0o644)).To(Succeed())
		})
		res = env.Helm(append([]string{"install", release, previous}, installArgs()...)...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)

		By("upgrading to this version: Helm refuses CRDs it does not own")
		// --reuse-values, as the README's commands: the templates then see
		// the previous chart's values, without the keys this version added.
		upgrade := append([]string{"upgrade", release, chartDir, "--reuse-values"}, installArgs()...)
		res = env.Helm(upgrade...)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("exists and cannot be imported into the current release: invalid ownership metadata"))

		By("after the README's commands, it takes them over")
		adoptCRDs(env)
		res = env.Helm(upgrade...)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(c.Get(ctx, client.ObjectKey{Name: release + "-critical"}, &schedulingv1.PriorityClass{})).To(Succeed())
		for _, crd := range liveCRDs(ctx, c) {
			Expect(crd.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"), crd.Name)
		}
		Expect(c.Get(ctx, client.ObjectKey{Name: "governed"}, &v1alpha1.ConfigPolicy{})).To(Succeed())
		res = env.Helm("uninstall", release, "-n", namespace, "--wait")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(liveCRDs(ctx, c)).To(HaveLen(len(configwardCRDs)))
	})
})

// liveCRDs lists configward's CRDs in the cluster.
func liveCRDs(ctx context.Context, c client.Client) []apiextensionsv1.CustomResourceDefinition {
	var l apiextensionsv1.CustomResourceDefinitionList
	Expect(c.List(ctx, &l)).To(Succeed())
	var out []apiextensionsv1.CustomResourceDefinition
	for _, crd := range l.Items {
		if slices.Contains(configwardCRDs, crd.Name) {
			out = append(out, crd)
		}
	}
	return out
}

// processLogs holds what configward's processes and client-go logged.
var processLogs lockedBuffer

// lockedBuffer is a bytes.Buffer several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// asServiceAccount is cfg acting as the chart's ServiceAccount of
// component, with the groups the API server gives a service account, so
// that what the process may do is what the chart's RBAC grants.
func asServiceAccount(cfg *rest.Config, component string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + release + "-" + component,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return out
}

// chartArgs renders the chart with the install's values and returns the
// arguments of a Deployment's container, without its subcommand.
func chartArgs(deployment string, installArgs ...string) []string {
	d := typed[appsv1.Deployment](render(installArgs[2:]...), "Deployment", deployment)
	return d.Spec.Template.Spec.Containers[0].Args[1:]
}

func ptrNow() *metav1.Time {
	t := metav1.Now()
	return &t
}

// pemDecode returns the DER of the first PEM block (the leaf).
func pemDecode(b []byte) ([]byte, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return block.Bytes, nil
}

// An outageWrite is one write a webhook matches, for the outage table.
type outageWrite struct {
	webhook, write string
	manifest       string   // stdin, if any
	args           []string // kubectl's
}

// failedWebhook finds the webhook an API server could not call.
var failedWebhook = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

// The outage table sits between these markers on the operations page
// ("What an outage blocks").
const (
	outageTablePage  = "docs/platform/operations.md"
	outageTableBegin = "<!-- outage table: test/chart, written by the spec that stops the webhook -->"
	outageTableEnd   = "<!-- end of outage table -->"
)

func plainDeployment(ns string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: outage-probe, namespace: %s}
spec:
  selector: {matchLabels: {app: outage-probe}}
  template:
    metadata: {labels: {app: outage-probe}}
    spec: {containers: [{name: app, image: registry.example/app:1}]}
`, ns)
}

// configuredDeployment and configuredPod read ConfigMap app through envFrom.
func configuredDeployment(ns string) string {
	return strings.Replace(plainDeployment(ns), "image: registry.example/app:1}", "image: registry.example/app:1, envFrom: [{configMapRef: {name: app}}]}", 1)
}

func configuredPod(ns string) string {
	return strings.Replace(plainPod(ns), "image: registry.example/app:1}", "image: registry.example/app:1, envFrom: [{configMapRef: {name: app}}]}", 1)
}

func plainPod(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: outage-probe, namespace: %s}\nspec: {containers: [{name: app, image: registry.example/app:1}]}\n", ns)
}

// revisionPod is a pod as a ReplicaSet of a workload with config
// revisions creates it, its template naming no snapshot (so it is clean).
func revisionPod(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: outage-revision, namespace: %s, annotations: {configward.dev/config-snapshots: \"\"}}\n"+
		"spec: {containers: [{name: app, image: registry.example/app:1}]}\n", ns)
}

func plainConfigMap(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: outage-probe, namespace: %s}\ndata: {level: info}\n", ns)
}
