package peers

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/configward/configward/test/framework"
)

// Kyverno runs Kyverno's admission controller (github.com/kyverno/kyverno
// cmd/kyverno, built by `make peers` into PeersDir/kyverno) as a real
// process against the test API server, configured as its Helm chart
// configures it by default (see kyvernoArgs and testdata/kyverno/config.yaml),
// with the benchmark's policy as one ClusterPolicy
// (testdata/kyverno/policy.yaml) or, with CEL, as ValidatingPolicies
// (testdata/kyverno/validatingpolicy.yaml). Either reads ConfigMaps and
// Secrets for missing-config-ref from Kyverno's global context
// (testdata/kyverno/globalcontext.yaml). Kyverno generates its own CA and
// serving certificate and registers its own webhook configurations; run out
// of a cluster (--serverIP) they call https://127.0.0.1:<port> instead of
// its Service.
//
// Where this differs from the chart's pod: one process (the chart's default
// replicas; its README asks for 3 in production, each serving its share of
// requests with a full cache of its own); no container limits (the chart
// sets memory 384Mi, from which Kyverno derives GOMEMLIMIT; CPU is not
// limited there either); no init container (kyverno-pre deletes policy
// reports an earlier install left; there are none); authenticated as its
// service account but authorized as system:masters instead of the chart's
// ClusterRoles.
type Kyverno struct {
	// CEL writes the policy as ValidatingPolicies (CEL, policies.kyverno.io,
	// testdata/kyverno/validatingpolicy.yaml), the policy type Kyverno 1.19
	// recommends, instead of the ClusterPolicy (JMESPath) it deprecates.
	CEL bool
	// Env is added to the process's environment (e.g. GOMAXPROCS=1).
	Env []string
	// Args are added to its flags (a later flag wins).
	Args []string

	proc *framework.Component
	// Addr is where the webhook server listens, once installed.
	Addr string
}

//go:embed testdata/kyverno/*.yaml
var kyvernoFiles embed.FS

const (
	// kyvernoNamespace is the chart's release namespace, where Kyverno keeps
	// its certificates, leases and ConfigMaps.
	kyvernoNamespace = "kyverno"
	// kyvernoServiceAccount is the admission controller's service account
	// in the chart; the process authenticates as it.
	kyvernoServiceAccount = "kyverno-admission-controller"
	// kyvernoWebhookLabel marks every webhook configuration Kyverno
	// registers.
	kyvernoWebhookLabel = "webhook.kyverno.io/managed-by"
)

func (k *Kyverno) Name() string {
	if k.CEL {
		return "kyverno-cel"
	}
	return "kyverno"
}

func (k *Kyverno) PID() int {
	if k.proc == nil {
		return 0
	}
	return k.proc.PID()
}

// Process is the running admission controller (its log), once installed.
func (k *Kyverno) Process() *framework.Component { return k.proc }

func (k *Kyverno) Install(ctx context.Context, w *World, extra int) error {
	bin := filepath.Join(w.PeersDir, "kyverno")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kyverno not built (run `make peers`): %w", err)
	}
	// The CRDs the chart installs (kyverno.io, policies.kyverno.io,
	// reports.kyverno.io, wgpolicyk8s.io); the admission controller refuses
	// to start without ClusterPolicy and Policy and watches the others.
	if _, err := envtest.InstallCRDs(w.Env.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(w.PeersDir, "kyverno-crds")}, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute,
	}); err != nil {
		return fmt.Errorf("installing Kyverno's CRDs: %w", err)
	}
	c := w.Env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kyvernoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	config, err := kyvernoObjects("config.yaml")
	if err != nil {
		return err
	}
	for _, o := range config {
		if err := kyvernoApply(ctx, c, o); err != nil {
			return fmt.Errorf("creating Kyverno's ConfigMap %s: %w", o.GetName(), err)
		}
	}
	// Kyverno authenticates as its service account (so requests it makes
	// itself are recognised as its own); system:masters stands in for the
	// chart's ClusterRoles.
	kubeconfig, err := w.Env.UserKubeconfig("system:serviceaccount:"+kyvernoNamespace+":"+kyvernoServiceAccount,
		"system:serviceaccounts", "system:serviceaccounts:"+kyvernoNamespace, "system:masters")
	if err != nil {
		return err
	}
	ports, err := framework.FreePorts(3)
	if err != nil {
		return err
	}
	k.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	dir := filepath.Join(w.Env.Dir, "kyverno")
	if err := os.MkdirAll(filepath.Join(dir, "sigstore"), 0o700); err != nil {
		return err
	}
	args := append(kyvernoArgs(kubeconfig, ports[0], ports[1], ports[2]), k.Args...)
	proc, err := w.Env.StartProcess("kyverno", bin, append(kyvernoEnv(dir), k.Env...), args...)
	if err != nil {
		return err
	}
	k.proc = proc

	deadline := time.Now().Add(5 * time.Minute)
	// Kyverno validates (and defaults) policies and global context entries
	// with webhooks of its own: create them through those, once registered.
	if err := k.waitFor(ctx, deadline, "its policy webhooks", func() error {
		for _, name := range []string{"kyverno-policy-validating-webhook-cfg", "kyverno-global-context-validating-webhook-cfg"} {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	gctx, err := kyvernoObjects("globalcontext.yaml")
	if err != nil {
		return err
	}
	policies, err := kyvernoPolicies(k.CEL, extra)
	if err != nil {
		return err
	}
	for _, o := range append(gctx, policies...) {
		var refused error
		if err := k.waitFor(ctx, deadline, fmt.Sprintf("%s %s created", o.GetKind(), o.GetName()), func() error {
			err := kyvernoApply(ctx, c, o.DeepCopy())
			if err != nil && strings.Contains(err.Error(), "denied the request") {
				// Kyverno's validation refused it: no use retrying.
				refused = err
				return nil
			}
			return err
		}); err != nil {
			return err
		}
		if refused != nil {
			return fmt.Errorf("kyverno refused %s %s: %w", o.GetKind(), o.GetName(), refused)
		}
	}
	if err := WaitInForce(ctx, w, extra, time.Until(deadline)); err != nil {
		return fmt.Errorf("%w\n%s", err, k.logTail())
	}
	// WaitInForce does not look at missing-config-ref: the clean Deployment
	// (every reference exists) passes it only once the global context
	// entries have loaded (Kyverno gives those of kind kubernetesResource no
	// status to wait on); until then the rule errs, which Kyverno reports as
	// a warning.
	if err := k.waitFor(ctx, deadline, "the clean Deployment allowed without warnings", func() error {
		o, err := DryRunCreate(ctx, w, Clean, 0)
		if err != nil {
			return err
		}
		if o.Denied || len(o.Warnings) > 0 {
			return fmt.Errorf("denied=%v message=%q warnings=%q", o.Denied, o.Message, o.Warnings)
		}
		return nil
	}); err != nil {
		return err
	}
	// Kyverno recomputes a global context entry's projection over every
	// cached object on each informer event, initial list included: with
	// 10,000 ConfigMaps that is 10,000 passes of ~20 ms after the entry is
	// already served. Measure once that work is done.
	return k.settle(ctx, 15*time.Minute)
}

// settle waits until the process uses less than a tenth of a core over two
// seconds.
func (k *Kyverno) settle(ctx context.Context, timeout time.Duration) error {
	const window, idle = 2 * time.Second, 200 * time.Millisecond
	deadline := time.Now().Add(timeout)
	last, err := CPUTime(k.PID())
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(window):
		}
		now, err := CPUTime(k.PID())
		if err != nil {
			return fmt.Errorf("kyverno: %w\n%s", err, k.logTail())
		}
		if now-last < idle {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kyverno still busy after %v (%v of CPU in the last %v)", timeout, now-last, window)
		}
		last = now
	}
}

// kyvernoArgs are the admission controller's flags: those the chart's
// templates/admission-controller/deployment.yaml passes with the default
// values.yaml (chart 3.9.1, `helm template`), in its order, plus what running
// outside a cluster needs.
func kyvernoArgs(kubeconfig string, webhookPort, metricsPort, runtimeMetricsPort int) []string {
	return []string{
		// Out of a cluster: the API server reaches the webhook server at
		// https://127.0.0.1:<port>/... (webhook configurations get a URL
		// instead of a Service reference) and the serving certificate Kyverno
		// issues itself carries that IP. The chart's pod listens on
		// 0.0.0.0:9443 behind Service port 443 (--servicePort, unused with
		// --serverIP); here it listens on loopback at a free port.
		"--kubeconfig=" + kubeconfig,
		"--serverIP=127.0.0.1:" + strconv.Itoa(webhookPort),
		"--webhookServerHost=127.0.0.1",
		// The chart's flags, with its defaults.
		"--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca",
		"--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair",
		"--tlsKeyAlgorithm=RSA",
		"--backgroundServiceAccountName=system:serviceaccount:kyverno:kyverno-background-controller",
		"--reportsServiceAccountName=system:serviceaccount:kyverno:kyverno-reports-controller",
		"--servicePort=443",
		"--webhookServerPort=" + strconv.Itoa(webhookPort), // chart: 9443
		"--resyncPeriod=15m",
		"--crdWatcher=false",
		"--disableMetrics=false",
		"--otelConfig=prometheus",
		"--metricsHost=127.0.0.1",
		"--metricsPort=" + strconv.Itoa(metricsPort), // chart: 8000
		"--admissionReports=true",
		"--maxAdmissionReports=1000",
		"--autoUpdateWebhooks=true",
		"--excludeBootstrapResources=false",
		"--enableConfigMapCaching=true",
		"--controllerRuntimeMetricsAddress=127.0.0.1:" + strconv.Itoa(runtimeMetricsPort), // chart: :8080
		"--enableDeferredLoading=true",
		"--dumpPayload=false",
		"--forceFailurePolicyIgnore=false",
		"--generateValidatingAdmissionPolicy=true",
		"--generateMutatingAdmissionPolicy=false",
		"--dumpPatches=false",
		"--maxAPICallResponseLength=2000000",
		"--apiCallTimeout=30s",
		"--maxGlobalContextEntries=0",
		"--loggingFormat=text",
		"--v=2", // the chart's default verbosity
		"--omitEvents=PolicyApplied,PolicySkipped",
		"--enablePolicyException=false",
		"--protectManagedResources=false",
		"--allowInsecureRegistry=false",
		"--registryCredentialHelpers=default,google,amazon,azure,github",
		"--enableReporting=validate,mutate,mutateExisting,imageVerify,generate",
	}
}

// kyvernoEnv is the chart's environment of the kyverno container; the pod
// name (a fieldRef there) is fixed, so a restarted process takes over its
// predecessor's leader-election lease at once.
func kyvernoEnv(dir string) []string {
	return []string{
		"INIT_CONFIG=kyverno",
		"METRICS_CONFIG=kyverno-metrics",
		"KYVERNO_NAMESPACE=" + kyvernoNamespace,
		"KYVERNO_POD_NAME=kyverno-admission-controller-0",
		"KYVERNO_SERVICEACCOUNT_NAME=" + kyvernoServiceAccount,
		"KYVERNO_ROLE_NAME=kyverno:admission-controller",
		"KYVERNO_SVC=kyverno-svc",
		"TUF_ROOT=" + filepath.Join(dir, "sigstore"), // chart: /.sigstore, an emptyDir
		"KYVERNO_DEPLOYMENT=kyverno-admission-controller",
	}
}

// kyvernoPolicies are the policy's objects: the ClusterPolicy or the
// ValidatingPolicies (cel) with extra rules, rule forbidden-<i> denying a
// Deployment with a container setting the env var FORBIDDEN_<i>.
func kyvernoPolicies(cel bool, extra int) ([]*unstructured.Unstructured, error) {
	if !cel {
		p, err := kyvernoClusterPolicy(extra)
		if err != nil {
			return nil, err
		}
		return []*unstructured.Unstructured{p}, nil
	}
	objs, err := kyvernoObjects("validatingpolicy.yaml")
	if err != nil {
		return nil, err
	}
	for _, p := range objs {
		if p.GetName() != "configward-bench-deny" {
			continue
		}
		validations, _, err := unstructured.NestedSlice(p.Object, "spec", "validations")
		if err != nil {
			return nil, err
		}
		for i := 1; i <= extra; i++ {
			validations = append(validations, map[string]any{
				"expression": fmt.Sprintf("!object.spec.template.spec.containers.exists(c, c.?env.orValue([]).exists(e, e.name == 'FORBIDDEN_%d'))", i),
				"message":    fmt.Sprintf("forbidden-%d: a container sets the env var FORBIDDEN_%d", i, i),
			})
		}
		if err := unstructured.SetNestedSlice(p.Object, validations, "spec", "validations"); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// kyvernoClusterPolicy is policy.yaml plus the extra rules.
func kyvernoClusterPolicy(extra int) (*unstructured.Unstructured, error) {
	objs, err := kyvernoObjects("policy.yaml")
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("policy.yaml holds %d objects, want 1", len(objs))
	}
	p := objs[0]
	rules, _, err := unstructured.NestedSlice(p.Object, "spec", "rules")
	if err != nil {
		return nil, err
	}
	for i := 1; i <= extra; i++ {
		env := fmt.Sprintf("FORBIDDEN_%d", i)
		rules = append(rules, map[string]any{
			"name": fmt.Sprintf("forbidden-%d", i),
			"match": map[string]any{"any": []any{map[string]any{"resources": map[string]any{
				"kinds": []any{"Deployment"}, "operations": []any{"CREATE", "UPDATE"},
			}}}},
			"validate": map[string]any{
				"failureAction": "Enforce",
				"message":       "a container of Deployment {{ request.object.metadata.name }} sets the env var " + env,
				"deny": map[string]any{"conditions": map[string]any{"any": []any{map[string]any{
					"key": env, "operator": "AnyIn", "value": "{{ request.object.spec.template.spec.containers[].env[].name }}",
				}}}},
			},
		})
	}
	if err := unstructured.SetNestedSlice(p.Object, rules, "spec", "rules"); err != nil {
		return nil, err
	}
	return p, nil
}

func kyvernoObjects(file string) ([]*unstructured.Unstructured, error) {
	b, err := kyvernoFiles.ReadFile("testdata/kyverno/" + file)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// kyvernoApply creates o, or replaces the object of its name.
func kyvernoApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	err := c.Create(ctx, o)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old := &unstructured.Unstructured{}
	old.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), old); err != nil {
		return err
	}
	o.SetResourceVersion(old.GetResourceVersion())
	return c.Update(ctx, o)
}

// waitFor polls f until it succeeds, the process exits, or the deadline.
func (k *Kyverno) waitFor(ctx context.Context, deadline time.Time, what string, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		if k.proc != nil && unix.Kill(k.proc.PID(), 0) != nil {
			return fmt.Errorf("kyverno exited while waiting for %s: %w\n%s", what, err, k.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kyverno: timed out waiting for %s: %w\n%s", what, err, k.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (k *Kyverno) logTail() string {
	if k.proc == nil {
		return ""
	}
	b, err := os.ReadFile(k.proc.Log)
	if err != nil {
		return err.Error()
	}
	const n = 4000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return "kyverno log (" + k.proc.Log + "), last lines:\n" + string(b)
}

func (k *Kyverno) Uninstall(ctx context.Context, w *World) error {
	c := w.Env.Client
	var errs []error
	// The policies and the global context entries first, while Kyverno runs.
	cpol, err := kyvernoPolicies(false, 0)
	if err != nil {
		return err
	}
	vpol, err := kyvernoPolicies(true, 0)
	if err != nil {
		return err
	}
	gctx, err := kyvernoObjects("globalcontext.yaml")
	if err != nil {
		return err
	}
	for _, o := range append(append(cpol, vpol...), gctx...) {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			errs = append(errs, err)
		}
	}
	if k.proc != nil {
		errs = append(errs, k.proc.Stop())
	}
	// Run out of a cluster Kyverno leaves its webhook configurations behind
	// on shutdown (it removes them only when its Deployment is going away):
	// remove every one it registered, and any admission policy it
	// generated.
	errs = append(errs,
		c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}, client.HasLabels{kyvernoWebhookLabel}),
		c.DeleteAllOf(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}, client.HasLabels{kyvernoWebhookLabel}),
		c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, client.MatchingLabels{"app.kubernetes.io/managed-by": "kyverno"}),
		c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{}, client.MatchingLabels{"app.kubernetes.io/managed-by": "kyverno"}),
	)
	// Its state in its namespace (certificates, leases, ConfigMaps), so the
	// next Install starts as the first did. The namespace stays (without a
	// namespace controller it would never finish terminating), and so do
	// Kyverno's CRDs, inert without it: deleting them right after Kyverno
	// ran leaves some stuck terminating ("could not list instances: storage
	// is (re)initializing"), and Install updates them in place.
	errs = append(errs,
		c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kyvernoNamespace)),
		c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kyvernoNamespace)),
		c.DeleteAllOf(ctx, &coordinationv1.Lease{}, client.InNamespace(kyvernoNamespace)),
	)
	k.proc = nil
	return errors.Join(errs...)
}
