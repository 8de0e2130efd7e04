package peers

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/test/framework"
)

// Gatekeeper runs OPA Gatekeeper v3.23.1 (built by `make peers` from
// github.com/open-policy-agent/gatekeeper/v3) as its Helm chart deploys it
// for production, charts/gatekeeper in that module with its values.yaml
// defaults:
//
//   - the measured process is the chart's gatekeeper-controller-manager pod
//     (templates/gatekeeper-controller-manager-deployment.yaml): the
//     validating webhook (--operation=webhook) plus the mutation webhook
//     operation the chart enables by default (disableMutation: false), with
//     every flag that template renders from the default values (see
//     webhookArgs); audit is not in it;
//   - the singleton the chart runs as the separate gatekeeper-audit pod
//     (templates/gatekeeper-audit-deployment.yaml) is needed for one thing
//     here: its generate operation creates the constraint CRDs of the
//     ConstraintTemplates (the webhook pods do not). It runs as a second,
//     unmeasured process with the audit pod's flags but audit runs off
//     (--audit-interval=0, see generateArgs), so that no periodic audit of
//     every resource competes for the CPU with the webhook and the API
//     server. It replicates the synced ConfigMaps and Secrets too, as the
//     audit pod does, but does nothing while Deployments are reviewed.
//
// Gatekeeper reads its own Pod (POD_NAME) to own the per-pod status objects
// it writes, so Install creates a Pod object standing for each process in
// gatekeeper-system (no kubelet runs them).
//
// Its policy is in testdata/gatekeeper: one ConstraintTemplate in Rego v1
// with one Constraint per rule, matching apps/Deployment, and the Config
// that replicates ConfigMaps and Secrets into data.inventory for
// missing-config-ref. Its ValidatingWebhookConfiguration is the chart's
// validation.gatekeeper.sh webhook (failurePolicy Ignore, timeout 3s, the
// chart's namespace selector) with its rules narrowed to Deployments.
type Gatekeeper struct {
	// Env is added to the webhook process's environment (e.g. GOMAXPROCS=1).
	Env []string
	// Args are added to its flags.
	Args []string

	webhook, generate *framework.Component
	// crds are the CRDs Install created (not those already there).
	crds []string
	// policy are the objects Install created, in order.
	policy []*unstructured.Unstructured
	// constraintCRDs are the names of the constraint CRDs the templates
	// generate.
	constraintCRDs []string
}

const (
	gatekeeperNamespace = "gatekeeper-system"
	// The chart's names for its webhook configuration and the webhook in it.
	gatekeeperWebhookConfig = "gatekeeper-validating-webhook-configuration"
	gatekeeperWebhookName   = "validation.gatekeeper.sh"
	// Pod objects standing for the chart's pods.
	gatekeeperWebhookPod  = "gatekeeper-controller-manager-bench"
	gatekeeperGeneratePod = "gatekeeper-audit-bench"
	gatekeeperImage       = "openpolicyagent/gatekeeper:v3.23.1"
)

//go:embed testdata/gatekeeper
var gatekeeperPolicy embed.FS

func (g *Gatekeeper) Name() string { return "gatekeeper" }

func (g *Gatekeeper) PID() int {
	if g.webhook == nil {
		return 0
	}
	return g.webhook.PID()
}

// webhookArgs are the flags of the chart's gatekeeper-controller-manager
// container as templates/gatekeeper-controller-manager-deployment.yaml
// renders them with the default values.yaml, in the same order. Only the
// addresses, the certificate and the kubeconfig differ; each such flag says
// why.
func webhookArgs(port, healthPort, metricsPort int, certDir, kubeconfig string) []string {
	return []string{
		// Chart: --port=8443 (controllerManager.port). A free port here,
		// on the loopback interface (the chart leaves --host unset: all
		// interfaces of the pod), since the API server is on this machine.
		"--port=" + strconv.Itoa(port),
		"--host=127.0.0.1",
		// Chart: --health-addr=:9090, --prometheus-port=8888
		// (metricsBackends: [prometheus]): free ports here.
		"--health-addr=127.0.0.1:" + strconv.Itoa(healthPort),
		"--prometheus-port=" + strconv.Itoa(metricsPort),
		"--logtostderr",
		// logDenies: false: no log line per denied request.
		"--log-denies=false",
		// emitAdmissionEvents is unset in values.yaml, so the chart passes
		// no --emit-admission-events and the default (false) holds: no
		// Kubernetes Event per violation.
		"--admission-events-involved-namespace=false",
		// logLevel: INFO (JSON logs).
		"--log-level=INFO",
		// The release namespace may carry the ignore label.
		"--exempt-namespace=" + gatekeeperNamespace,
		// disableWebhookOperation: false; disableGenerateOperation: true
		// (the audit pod generates the constraint CRDs).
		"--operation=webhook",
		"--enable-external-data=true",
		"--enable-generator-resource-expansion=true",
		"--log-mutations=false",
		"--mutation-annotations=false",
		// Chart: --disable-cert-rotation=false: the chart lets Gatekeeper
		// issue its own certificate for gatekeeper-webhook-service.<ns>.svc
		// and write it into the webhook configurations. Here the serving
		// certificate comes from the test CA the API server trusts, as
		// with the chart's externalCertInjection (cert-manager).
		"--disable-cert-rotation=true",
		"--cert-dir=" + certDir,
		// maxServingThreads: -1: as many concurrent evaluations as
		// GOMAXPROCS (website/docs/performance-tuning.md).
		"--max-serving-threads=-1",
		"--tls-min-version=1.3",
		"--validating-webhook-configuration-name=" + gatekeeperWebhookConfig,
		"--mutating-webhook-configuration-name=gatekeeper-mutating-webhook-configuration",
		"--external-data-provider-response-cache-ttl=3m",
		"--enable-k8s-native-validation=true",
		"--metrics-backend=prometheus",
		// disableMutation: false: the chart runs the mutation webhook
		// operation in the same pods. The policy has no mutators, so the
		// chart's MutatingWebhookConfiguration is not installed: it would
		// only add a call that changes nothing.
		"--operation=mutation-webhook",
		// disabledBuiltins: ["{http.send}"], rendered verbatim.
		"--disable-opa-builtin={http.send}",
		// Not in the chart: the pod's in-cluster configuration is the
		// test API server's kubeconfig here.
		"--kubeconfig=" + kubeconfig,
		// Not in the chart (default 10s): the delay lets a Service drain
		// the pod's endpoint on termination. Nothing to drain here: the
		// webhook configuration is deleted before the process stops.
		"--shutdown-delay=0",
	}
}

// generateArgs are the flags of the chart's gatekeeper-audit container
// (templates/gatekeeper-audit-deployment.yaml, default values) with audit
// runs turned off: an audit every 60 s over every resource kind
// (auditMatchKindOnly is false) would compete for the 2 cores with the
// webhook and the API server, while in a cluster it runs on a node of its
// own. The audit operation itself stays assigned, with
// --audit-interval=0 ("0 to disable"): the generate operation alone starts
// no template controller, and status alone builds no policy client.
func generateArgs(port, healthPort, metricsPort int, certDir, kubeconfig string) []string {
	return []string{
		// Chart: --audit-interval=60.
		"--audit-interval=0",
		"--log-level=INFO",
		// The chart's other audit flags configure audit runs only.
		"--constraint-violations-limit=20",
		"--validating-webhook-configuration-name=" + gatekeeperWebhookConfig,
		"--mutating-webhook-configuration-name=gatekeeper-mutating-webhook-configuration",
		"--audit-from-cache=false",
		"--audit-chunk-size=500",
		"--audit-match-kind-only=false",
		"--audit-events-involved-namespace=false",
		"--operation=generate",
		"--operation=audit",
		"--operation=status",
		// Not rendered: --operation=mutation-status (disableMutation is
		// false in the chart): there are no mutators to report on.
		"--logtostderr",
		"--health-addr=127.0.0.1:" + strconv.Itoa(healthPort),
		"--prometheus-port=" + strconv.Itoa(metricsPort),
		"--enable-external-data=true",
		"--enable-generator-resource-expansion=true",
		"--metrics-backend=prometheus",
		"--disable-cert-rotation=true",
		"--external-data-provider-response-cache-ttl=3m",
		"--enable-k8s-native-validation=true",
		// It serves no webhook; its server still gets an address of its
		// own and the certificate.
		"--port=" + strconv.Itoa(port),
		"--host=127.0.0.1",
		"--cert-dir=" + certDir,
		"--kubeconfig=" + kubeconfig,
		"--shutdown-delay=0",
	}
}

func (g *Gatekeeper) Install(ctx context.Context, w *World, extra int) error {
	bin := filepath.Join(w.PeersDir, "gatekeeper")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("gatekeeper binary (run `make peers`): %w", err)
	}
	c, err := gatekeeperClient(w)
	if err != nil {
		return err
	}
	if err := createIfMissing(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gatekeeperNamespace}}); err != nil {
		return err
	}
	if err := g.installCRDs(ctx, w, c, filepath.Join(w.PeersDir, "gatekeeper-crds")); err != nil {
		return err
	}
	for _, pod := range []string{gatekeeperWebhookPod, gatekeeperGeneratePod} {
		if err := createIfMissing(ctx, c, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: gatekeeperNamespace, Labels: map[string]string{"gatekeeper.sh/system": "yes"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: gatekeeperImage}}},
		}); err != nil {
			return err
		}
	}

	// The serving certificate, as the kubelet mounts the chart's
	// gatekeeper-webhook-server-cert Secret at /certs.
	certDir := filepath.Join(w.Env.Dir, "gatekeeper-certs")
	certPEM, keyPEM, err := w.Env.CA.Issue()
	if err != nil {
		return err
	}
	if err := framework.WriteAtomic(certDir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}); err != nil {
		return err
	}
	ports, err := framework.FreePorts(6)
	if err != nil {
		return err
	}
	podEnv := func(pod string) []string {
		// The chart's env: the pod's namespace and name from the downward
		// API, and the container name.
		return []string{"POD_NAMESPACE=" + gatekeeperNamespace, "NAMESPACE=" + gatekeeperNamespace, "POD_NAME=" + pod, "CONTAINER_NAME=manager"}
	}
	if g.generate, err = w.Env.StartProcess("gatekeeper-generate", bin, podEnv(gatekeeperGeneratePod),
		generateArgs(ports[3], ports[4], ports[5], certDir, w.Env.Kubeconfig)...); err != nil {
		return err
	}
	if g.webhook, err = w.Env.StartProcess("gatekeeper", bin, append(podEnv(gatekeeperWebhookPod), g.Env...),
		append(webhookArgs(ports[0], ports[1], ports[2], certDir, w.Env.Kubeconfig), g.Args...)...); err != nil {
		return err
	}
	fail := func(err error) error {
		return errors.Join(err, g.logTails())
	}

	if err := g.installPolicy(ctx, w, c, extra); err != nil {
		return fail(err)
	}
	if err := c.Create(ctx, webhookConfiguration(w, ports[0])); err != nil {
		return fail(fmt.Errorf("creating the ValidatingWebhookConfiguration: %w", err))
	}
	if err := WaitInForce(ctx, w, extra, 5*time.Minute); err != nil {
		return fail(err)
	}
	// missing-config-ref answers from replicated data: until the
	// ConfigMaps and Secrets are synced it warns about every reference.
	if err := waitSynced(ctx, w, 2*time.Minute); err != nil {
		return fail(err)
	}
	return nil
}

func gatekeeperClient(w *World) (client.Client, error) {
	s := scheme.Scheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(w.Env.Config, client.Options{Scheme: s})
}

func createIfMissing(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return nil
}

// installCRDs creates the CRDs the chart installs (its crds folder) that
// are not there yet, and waits until they are served.
func (g *Gatekeeper) installCRDs(ctx context.Context, w *World, c client.Client, dir string) error {
	opts := envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true, MaxTime: time.Minute}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		return fmt.Errorf("reading Gatekeeper's CRDs (run `make peers`): %w", err)
	}
	var created []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range opts.CRDs {
		// One deleted by the last Uninstall may still be going.
		if err := waitGone(ctx, c, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}}, time.Minute, true); err != nil {
			return err
		}
		err := c.Create(ctx, crd.DeepCopy())
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		default:
			created = append(created, crd)
			g.crds = append(g.crds, crd.Name)
		}
	}
	return envtest.WaitForCRDs(w.Env.Config, created, opts)
}

// gatekeeperObjects decodes the YAML documents of a policy file.
func gatekeeperObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// policyObjects are the Config, then each rule's ConstraintTemplate and
// Constraint: secret-in-env, subpath-config, missing-config-ref and the
// extra rules 1..extra.
func policyObjects(extra int) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, name := range []string{"config.yaml", "secret-in-env.yaml", "subpath-config.yaml", "missing-config-ref.yaml"} {
		data, err := gatekeeperPolicy.ReadFile("testdata/gatekeeper/" + name)
		if err != nil {
			return nil, err
		}
		o, err := gatekeeperObjects(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, o...)
	}
	tmpl, err := template.ParseFS(gatekeeperPolicy, "testdata/gatekeeper/forbidden-env.yaml.tmpl")
	if err != nil {
		return nil, err
	}
	for i := 1; i <= extra; i++ {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, i); err != nil {
			return nil, err
		}
		o, err := gatekeeperObjects(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("extra rule %d: %w", i, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

const constraintsGroup = "constraints.gatekeeper.sh"

// installPolicy creates the Config and the templates, waits for the
// generate operation to create the constraint CRDs, then creates the
// constraints.
func (g *Gatekeeper) installPolicy(ctx context.Context, w *World, c client.Client, extra int) error {
	objs, err := policyObjects(extra)
	if err != nil {
		return err
	}
	var constraints []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().Group == constraintsGroup {
			constraints = append(constraints, o)
			continue
		}
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		g.policy = append(g.policy, o)
	}
	for _, o := range constraints {
		name := strings.ToLower(o.GetKind()) + "." + constraintsGroup
		g.constraintCRDs = append(g.constraintCRDs, name)
		if err := waitEstablished(ctx, c, name, 3*time.Minute); err != nil {
			return err
		}
	}
	// A fresh client: the first one's REST mapper has not seen the new
	// kinds.
	cc, err := gatekeeperClient(w)
	if err != nil {
		return err
	}
	for _, o := range constraints {
		if err := cc.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		g.policy = append(g.policy, o)
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		if err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("constraint CRD %s not established after %v (Gatekeeper's generate operation creates it)", name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// webhookConfiguration is the chart's validation.gatekeeper.sh webhook
// (templates/gatekeeper-validating-webhook-configuration-...yaml, default
// values) pointing at the process, with its rules narrowed from every
// resource to Deployments. The chart's second webhook,
// check-ignore-label.gatekeeper.sh on Namespaces, is left out: no
// Namespace is written while measuring.
func webhookConfiguration(w *World, port int) *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/v1/admit"
	ignore := admissionregistrationv1.Ignore
	exact := admissionregistrationv1.Exact
	none := admissionregistrationv1.SideEffectClassNone
	all := admissionregistrationv1.AllScopes
	timeout := int32(3)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: gatekeeperWebhookConfig, Labels: map[string]string{"gatekeeper.sh/system": "yes"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    gatekeeperWebhookName,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.Env.CA.CertPEM},
			FailurePolicy:           &ignore,
			MatchPolicy:             &exact,
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "admission.gatekeeper.sh/ignore", Operator: metav1.LabelSelectorOpDoesNotExist},
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{gatekeeperNamespace}},
			}},
			ObjectSelector: &metav1.LabelSelector{},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"apps"}, APIVersions: []string{"*"}, Resources: []string{"deployments"}, Scope: &all,
				},
			}},
			SideEffects:    &none,
			TimeoutSeconds: &timeout,
		}},
	}
}

// waitSynced waits until the clean Deployment, whose every reference
// exists, gets no missing-config-ref warning.
func waitSynced(ctx context.Context, w *World, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		o, err := DryRunCreate(ctx, w, Clean, 0)
		if err != nil {
			return err
		}
		missing := ""
		for _, s := range o.Warnings {
			if strings.HasPrefix(s, "[missing-config-ref]") {
				missing = s
			}
		}
		if missing == "" && !o.Denied {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ConfigMaps and Secrets not synced after %v: %s (denied=%v %s)", timeout, missing, o.Denied, o.Message)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (g *Gatekeeper) Uninstall(ctx context.Context, w *World) error {
	c, err := gatekeeperClient(w)
	if err != nil {
		return err
	}
	var errs []error
	del := func(c client.Client, obj client.Object) {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err))
		}
	}
	// The webhook first, so that admission is as before at once.
	del(c, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: gatekeeperWebhookConfig}})
	// Constraints, then templates, then the Config, while Gatekeeper runs
	// and cleans up after them.
	for i := len(g.policy) - 1; i >= 0; i-- {
		del(c, g.policy[i])
	}
	g.policy = nil
	for _, p := range []*framework.Component{g.webhook, g.generate} {
		if p != nil {
			if err := p.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	g.webhook, g.generate = nil, nil
	// What the garbage collector would do (envtest runs none): the
	// constraint CRDs are owned by their templates, the per-pod status
	// objects by the Pods.
	var gone []client.Object
	for _, name := range g.constraintCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		del(c, crd)
		gone = append(gone, crd)
	}
	g.constraintCRDs = nil
	for _, kind := range []string{"ConstraintPodStatus", "ConstraintTemplatePodStatus", "ConfigPodStatus", "MutatorPodStatus",
		"ExpansionTemplatePodStatus", "ProviderPodStatus", "ConnectionPodStatus"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "status.gatekeeper.sh", Version: "v1beta1", Kind: kind})
		if err := c.DeleteAllOf(ctx, u, client.InNamespace(gatekeeperNamespace)); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			errs = append(errs, fmt.Errorf("deleting %s objects: %w", kind, err))
		}
	}
	for _, pod := range []string{gatekeeperWebhookPod, gatekeeperGeneratePod} {
		del(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: gatekeeperNamespace}})
	}
	// The namespace stays: without kube-controller-manager a deleted
	// namespace is never finalized.
	for _, name := range g.crds {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		del(c, crd)
		gone = append(gone, crd)
	}
	g.crds = nil
	for _, o := range gone {
		if err := waitGone(ctx, c, o, time.Minute, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitGone waits until obj no longer exists; with onlyTerminating, it
// returns at once unless obj is being deleted.
func waitGone(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration, onlyTerminating bool) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if onlyTerminating && obj.GetDeletionTimestamp() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still there %v after its deletion", obj.GetName(), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logTails returns the end of both processes' logs, for errors.
func (g *Gatekeeper) logTails() error {
	var errs []error
	for _, p := range []*framework.Component{g.webhook, g.generate} {
		if p == nil {
			continue
		}
		b, err := os.ReadFile(p.Log)
		if err != nil {
			continue
		}
		s := string(b)
		if len(s) > 3000 {
			s = s[len(s)-3000:]
		}
		errs = append(errs, fmt.Errorf("%s log (%s) ends:\n%s", p.Name, p.Log, s))
	}
	return errors.Join(errs...)
}
