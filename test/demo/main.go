// Command demo is `make demo`: it starts a whole cluster with the same
// harness as the e2e suites (test/framework): kube-apiserver and etcd,
// kube-controller-manager, kube-scheduler and two kwok nodes on which pods
// run. It runs configward's webhook and controller in-process with the
// generated webhook configurations installed, walks through the sample manifests in config/samples with the
// real kubectl, checking each outcome, and then stays up with a kubeconfig
// the user can point kubectl at until Ctrl-C.
package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

const (
	namespace = "demo"
	samples   = "config/samples"
	// hashJSONPath prints what step 02 and 08 show of Deployment checkout.
	hashJSONPath = `jsonpath=generation={.metadata.generation} configward.dev/config-hash={.spec.template.metadata.annotations.configward\.dev/config-hash}{"\n"}`
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Kubectl is given paths relative to the repository, as the user would type them.
	if err := os.Chdir(framework.RepoRoot()); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}

	// Logs go to a file in the environment's directory so the terminal shows
	// only the walkthrough. The directory exists only once Start returns, so
	// the log is buffered until then.
	logs := &lateFile{}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	klog.SetLogger(ctrl.Log.WithName("klog"))

	// The kubectl plugin step 08 runs during a rollout of about ten
	// seconds is a build of configward: built now, beside the control
	// plane's start, it cannot eat that window on a busy machine.
	go func() { _, _ = framework.Binary() }()

	fmt.Println("Starting kube-apiserver, etcd, kube-controller-manager, kube-scheduler and two kwok nodes (from $KUBEBUILDER_ASSETS), configward's webhook and controller ...")
	start := time.Now()
	env, err := framework.Start(framework.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: starting the control plane:", err)
		fmt.Fprintln(os.Stderr, "configward's logs so far:")
		os.Stderr.Write(logs.buf.Bytes())
		return 1
	}
	logPath := filepath.Join(env.Dir, "configward.log")
	cleanup := func() int {
		fmt.Println("\nStopping configward, kube-apiserver and etcd ...")
		logs.close()
		defer framework.RemoveBuilds() // the plugin binary step 08 ran
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping:", err)
			return 1
		}
		fmt.Println("stopped; cleaned up " + env.Dir)
		return 0
	}
	if err := logs.open(logPath); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		cleanup()
		return 1
	}
	if err := env.StartCluster(2); err != nil {
		fmt.Fprintln(os.Stderr, "demo: starting kube-controller-manager, kube-scheduler and kwok:", err)
		cleanup()
		return 1
	}
	if _, err := env.InstallWebhookConfigurations(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo: installing the webhook configurations:", err)
		cleanup()
		return 1
	}
	// Step 17's Prometheus, and the request counters it scrapes (the demo
	// plays the application kwok does not run), named to the controller as
	// the chart's analysis.prometheus.address names one.
	prom, err := newAnalysisPrometheus(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: starting Prometheus:", err)
		cleanup()
		return 1
	}
	defer prom.app.Close()
	if _, err := env.StartController(manager.Controller{RolloutBatchWindow: 2 * time.Second, RolloutRate: manager.DefaultRolloutRate, AnalysisPrometheus: prom.url(),
		CertExpiryWarning: manager.DefaultCertExpiryWarning, StaleCertGrace: demoStaleCertGrace, StaleCertEvictionsPerMinute: manager.DefaultStaleCertEvictionsPerMinute}); err != nil {
		fmt.Fprintln(os.Stderr, "demo: starting the controller:", err)
		cleanup()
		return 1
	}
	fmt.Printf("Up in %s. configward's logs: %s\n", time.Since(start).Round(100*time.Millisecond), logPath)

	w := &walkthrough{env: env, ctx: ctx, prom: prom}
	w.steps()
	if ctx.Err() != nil {
		return cleanup()
	}

	fmt.Println()
	if w.failed > 0 {
		fmt.Printf("✗ %d of %d steps did not go as expected (see above; logs in %s)\n", w.failed, w.total, logPath)
		keepLog(logPath)
		cleanup()
		return 1
	}
	fmt.Printf("✓ all %d steps went as expected\n", w.total)
	fmt.Println()
	fmt.Println("configward is running. Try your own manifests from another terminal:")
	fmt.Println()
	fmt.Println("    export KUBECONFIG=" + env.Kubeconfig)
	fmt.Println("    export PATH=" + filepath.Dir(framework.KubectlPath()) + ":$PATH   # kubectl matching the server")
	fmt.Println("    kubectl get configschemas -n " + namespace)
	fmt.Println("    kubectl get configdeliveries,configmaps -n " + wavesNamespace + "   # revisions and waves: change greeting and watch it go canary first")
	fmt.Println()
	fmt.Println("Press Ctrl-C to stop.")
	<-ctx.Done()
	return cleanup()
}

type walkthrough struct {
	env           *framework.Env
	ctx           context.Context
	total, failed int
	// prom is step 17's Prometheus and the request counters of its pods.
	prom *analysisPrometheus
}

func (w *walkthrough) steps() {
	if !w.setup() {
		return
	}
	w.step("01", "Config, flags, a Secret and a ConfigSchema", func() bool {
		return w.apply("01-checkout-config.yaml", 0)
	})
	w.waitForEnforcement()

	w.step("02", "Allowed: a Deployment mounting its config, stamped with configward.dev/config-hash", func() bool {
		ok := w.apply("02-checkout-deployment.yaml", 0)
		res := w.kubectl("get", "deployment", "checkout", "-n", namespace, "-o", hashJSONPath)
		ok = w.expect(res, 0, "configward.dev/config-hash=hmac-sha256:") && ok
		ok = w.expect(w.kubectl("rollout", "status", "deployment/checkout", "-n", namespace, "--timeout=60s"), 0, "successfully rolled out") && ok
		w.kubectl(podsWithHash...)
		return ok
	})
	w.step("03", "Deny subpath-config: a hot ConfigMap mounted with subPath", func() bool {
		return w.apply("03-deny-subpath-config.yaml", 1, `denied the request: [subpath-config]`)
	})
	w.step("04", "Deny hot-config-in-env: a hot ConfigMap read through envFrom", func() bool {
		return w.apply("04-deny-hot-config-in-env.yaml", 1, `denied the request: [hot-config-in-env]`)
	})
	w.step("05", "Warn secret-in-env: a Secret read through env is allowed, with a warning", func() bool {
		return w.apply("05-warn-secret-in-env.yaml", 0, `Warning: [secret-in-env]`)
	})
	w.step("06", "Deny config-schema: a value that breaks the ConfigSchema, with its line and column", func() bool {
		ok := w.apply("06-deny-config-schema.yaml", 1, `denied the request: [config-schema]`, `key "app.yaml" line 3 column`, `/server/port`)
		w.kubectl("get", "configschemas", "-n", namespace)
		return ok
	})
	w.step("07", "Deny config-schema: a ConfigMap naming a ConfigSchema that does not exist", func() bool {
		return w.apply("07-deny-missing-schema.yaml", 1, `denied the request: [config-schema]`, `does not exist`)
	})
	w.step("08", "Rollout: changing checkout-config rolls Deployment checkout", func() bool {
		fmt.Println("  " + firstComment(filepath.Join(samples, "08-rollout-checkout-config.yaml")))
		fmt.Println("  before:")
		before := w.kubectl("get", "deployment", "checkout", "-n", namespace, "-o", hashJSONPath)
		if !w.expect(w.kubectl("apply", "-f", filepath.Join(samples, "08-rollout-checkout-config.yaml")), 0) {
			return false
		}
		fmt.Println("  the controller waits for its 2 s batch window, then re-stamps the Deployment; after:")
		deadline := time.Now().Add(15 * time.Second)
		after := w.quietKubectl("get", "deployment", "checkout", "-n", namespace, "-o", hashJSONPath)
		for after.Stdout == before.Stdout && time.Now().Before(deadline) && w.ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			after = w.quietKubectl("get", "deployment", "checkout", "-n", namespace, "-o", hashJSONPath)
		}
		after = w.kubectl("get", "deployment", "checkout", "-n", namespace, "-o", hashJSONPath)
		if after.Stdout == before.Stdout || !strings.Contains(after.Stdout, "hmac-sha256:") {
			fmt.Println("  ✗ the config-hash did not change within 15 s")
			return false
		}
		var gb, ga int
		fmt.Sscanf(before.Stdout, "generation=%d", &gb)
		fmt.Sscanf(after.Stdout, "generation=%d", &ga)
		if ga <= gb {
			fmt.Printf("  ✗ generation did not go up (%d -> %d)\n", gb, ga)
			return false
		}
		w.kubectl("get", "events", "-n", namespace, "--field-selector", "reason=ConfigChanged", "-o", "custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message")
		fmt.Println("  the Deployment replaces its pods through its own rolling update, one every 5 s (minReadySeconds);")
		fmt.Println("  while it does, configward status counts the pods still on the old config (exit code 1: not all current):")
		inFlight := w.statusShows(1, "progressing", "ConfigMap/checkout-config")
		if !w.expect(w.kubectl("rollout", "status", "deployment/checkout", "-n", namespace, "--timeout=60s"), 0, "successfully rolled out") {
			return false
		}
		want := strings.TrimSpace(after.Stdout[strings.Index(after.Stdout, "hmac-sha256:"):])
		if !w.podsCarry(want) {
			return false
		}
		fmt.Println("  and once every pod runs the new config:")
		return w.statusShows(0, "done", "ConfigMap/checkout-config") && inFlight
	})
	w.step("09", "ConfigPolicy: secret-in-env becomes Deny in namespace demo, without a restart", func() bool {
		if !w.apply("09-configpolicy-demo.yaml", 0) {
			return false
		}
		// The webhooks load the policy from their informer; wait for it
		// quietly, then show the refusal.
		sample := filepath.Join(samples, "05-warn-secret-in-env.yaml")
		deadline := time.Now().Add(10 * time.Second)
		// create, not apply: apply sends nothing for an unchanged object.
		for w.quietKubectl("create", "--dry-run=server", "-f", sample).ExitCode == 0 && time.Now().Before(deadline) && w.ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		ok := w.expect(w.kubectl("create", "--dry-run=server", "-f", sample), 1, `denied the request: [secret-in-env]`)
		w.kubectl("get", "configpolicies")
		return ok
	})
	w.step("10", "Change control: a direct edit is refused; a break-glass edit goes through and is recorded", func() bool {
		ok := w.expect(w.kubectl("patch", "configmap", "checkout-config", "-n", namespace, "--type=merge", "-p", `{"data":{"app.yaml":"server: {host: 0.0.0.0, port: 8080}\nlog: {level: trace}\n"}}`),
			1, `denied the request: [out-of-pipeline-edit]`)
		ok = w.apply("10-break-glass-checkout-config.yaml", 0, `Warning: [out-of-pipeline-edit] break-glass by`) && ok
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(w.quietKubectl("get", "events", "-n", namespace, "--field-selector", "reason=BreakGlass").Stdout, "break-glass") && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		res := w.kubectl("get", "events", "-n", namespace, "--field-selector", "reason=BreakGlass", "-o", "custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message")
		return w.expect(res, 0, "INC-1042") && ok
	})
	w.step("11", "Revisions: every revision's pods read an immutable snapshot of its config", func() bool {
		if !w.apply("11-revisions-delivery.yaml", 0) {
			return false
		}
		w.waitUntilStampsSnapshots()
		if !w.apply("12-greeting.yaml", 0) {
			return false
		}
		ok := w.rolledOut("web-canary") && w.rolledOut("web")
		return w.podsRead("web", "hello") && ok
	})
	w.step("12", "Delivery in waves: a change reaches the canary wave first, then the rest", func() bool {
		old := w.snapshotOf("web")
		if !w.apply("13-greeting-change.yaml", 0) {
			return false
		}
		fmt.Println("  the controller starts a ConfigDelivery: wave canary (web-canary) first; web keeps reading its snapshot until the canary is healthy and soaked 3 s:")
		ok := w.waitFor(30*time.Second, func() bool { return w.deliveryAt("Progressing", "canary") || w.deliveryAt("Succeeded", "") }) && w.snapshotOf("web") == old
		w.kubectl("get", "configdeliveries", "-n", wavesNamespace)
		if !ok {
			fmt.Println("  ✗ the canary wave did not start before web moved")
		}
		if !w.waitFor(60*time.Second, func() bool { return w.deliveryAt("Succeeded", "") }) {
			fmt.Println("  ✗ the delivery did not succeed within 60 s")
			ok = false
		}
		w.kubectl("get", "configdeliveries", "-n", wavesNamespace)
		ok = w.rolledOut("web-canary") && w.rolledOut("web") && ok
		return w.podsRead("web", "hello, world") && w.podsRead("web-canary", "hello, world") && ok
	})
	w.step("13", "kubectl rollout undo brings the old config back with the old template", func() bool {
		ok := w.expect(w.kubectl("rollout", "undo", "deployment/web", "-n", wavesNamespace), 0, "[config-revision]", "rolled back")
		ok = w.rolledOut("web") && ok
		fmt.Println("  web's pods read the old snapshot again, while greeting keeps the new content:")
		ok = w.podsRead("web", "hello") && ok
		return w.expect(w.kubectl("get", "configmap", "greeting", "-n", wavesNamespace, "-o", `jsonpath=message.txt={.data.message\.txt}{"\n"}`), 0, "message.txt=hello, world") && ok
	})
	w.step("14", "Hot reload you can see: the reload agent reports which content each pod applied", func() bool {
		if !w.apply("14-reload-agent.yaml", 0) || !w.rolledOut("storefront") {
			return false
		}
		fmt.Println("  configward injected its agent into each pod, as a native sidecar:")
		ok := w.expect(w.kubectl("get", "pods", "-n", wavesNamespace, "-l", "app=storefront", "-o", "custom-columns=POD:.metadata.name,SIDECARS:.spec.initContainers[*].name"), 0, "configward-agent")
		fmt.Println("  kwok runs no containers, so the demo reports for each pod what its agent would, with the pod's own token: the app applied storefront-flags")
		ok = w.agentsReport(func(int) (string, string) { return reload.Applied, "reloaded" }) && ok
		ok = w.reloadStatus(0, "--wait", "--timeout", "30s") && ok
		if !w.apply("14-flags-rejected.yaml", 0) {
			return false
		}
		fmt.Println("  the app cannot parse the new flags: it keeps the ones it had, and its agent says so (the demo plays one pod's agent; the other pod's has not reported yet)")
		ok = w.agentsReport(func(i int) (string, string) {
			if i == 0 {
				return reload.Rejected, "the reload call answered 422: flags.yaml: yaml: line 1: did not find expected ',' or ']'"
			}
			return "", ""
		}) && ok
		ok = w.reloadStatus(3, "--wait", "--timeout", "30s") && ok
		w.waitFor(10*time.Second, func() bool {
			return strings.Contains(w.quietKubectl("get", "events", "-n", wavesNamespace, "--field-selector", "reason=ConfigReloadFailed").Stdout, "storefront")
		})
		return w.expect(w.kubectl("get", "events", "-n", wavesNamespace, "--field-selector", "reason=ConfigReloadFailed",
			"-o", "custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message"), 0, "rejected ConfigMap/storefront-flags") && ok
	})
	w.step("15", "A controller reference is no pass: a pod naming checkout's ReplicaSet as its controller is judged like any pod", func() bool {
		return w.forgedOwner("15-forged-owner.yaml")
	})
	w.step("16", "Hot config in waves: a change the pods reload in place reaches one canary pod first, then the rest once approved", func() bool {
		return w.hotWaves()
	})
	w.step("17", "Waves judged by what the application says: a typo that fails requests, not pods, is caught at the canary by its error ratio and rolled back", func() bool {
		return w.analysis()
	})
	w.step("18", "Config that must change together moves as one: a ConfigMap and the Secret it names, changed in one apply, reach the canary together and are promoted once", func() bool {
		return w.changeSet()
	})
	w.step("19", "A hot set in the pod: the reload agent reloads the app only once every member it mounts holds the set's content", func() bool {
		return w.hotSet()
	})
	w.step("20", "Served certificates: after a renewal, a pod still presenting the old certificate is reported and evicted", func() bool {
		return w.servedCerts()
	})
}

// keepLog copies configward's log, which cleanup deletes with the
// environment, into the failure digest's folder when `make test` names one
// (as demo-configward.log: the digest prints only its .txt files), so a
// step that failed in CI can be read about afterwards.
func keepLog(logPath string) {
	dir := os.Getenv(framework.FailureDigestEnv)
	if dir == "" {
		return
	}
	b, err := os.ReadFile(logPath)
	if err == nil && os.MkdirAll(dir, 0o755) == nil {
		err = os.WriteFile(filepath.Join(dir, "demo-configward.log"), b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: keeping the log:", err)
	}
}

// setsNamespace is where step 18 delivers a ConfigMap and a Secret as one.
const setsNamespace = "demo-sets"

// changeSet is step 18: payments' key-id and the Secret holding that key
// change in one apply and are delivered by one ConfigDelivery.
func (w *walkthrough) changeSet() bool {
	if !w.apply("18-payments.yaml", 0) {
		return false
	}
	rolled := func(name string) bool {
		return w.expect(w.quietKubectl("rollout", "status", "deployment/"+name, "-n", setsNamespace, "--timeout=60s"), 0, "successfully rolled out")
	}
	// Pods created before configward knows the namespace's revisions read
	// the originals: wait until a Deployment is stamped with snapshots.
	w.waitFor(30*time.Second, func() bool {
		res := w.env.Kubectl("", "create", "--dry-run=server", "-f", filepath.Join(samples, "18-payments.yaml"), "-o", `jsonpath={.items[*].spec.template.metadata.annotations}`)
		return strings.Contains(res.Stdout, "configward.dev/config-snapshots")
	})
	if !w.apply("18-payments.yaml", 0) || !rolled("payments-canary") || !rolled("payments") {
		return false
	}
	before := w.setReads("payments")
	if !w.apply("19-payments-change.yaml", 0) {
		return false
	}
	fmt.Println("  one ConfigDelivery carries both: the canary takes the new key-id and the new key at once; payments keeps both old ones until a person promotes:")
	ok := w.waitFor(60*time.Second, func() bool { return w.setDeliveryAt("WaitingForApproval/rest") })
	w.kubectl("get", "configdeliveries", "-n", setsNamespace)
	ok = rolled("payments-canary") && ok
	canary := w.setReads("payments-canary")
	was, now := strings.Fields(before), strings.Fields(canary)
	if len(was) != 2 || len(now) != 2 || was[0] == now[0] || was[1] == now[1] || w.setReads("payments") != before {
		fmt.Printf("  ✗ expected the canary on both new snapshots (%s) and payments on both old ones (%s)\n", canary, before)
		ok = false
	}
	fmt.Println("  one promote, asked through either member, moves both:")
	ok = w.expect(w.show(w.env.KubectlPlugin("delivery", "promote", "-n", setsNamespace, "secret/payments-keys")), 0) && ok
	ok = w.expect(w.show(w.env.KubectlPlugin("delivery", "wait", "-n", setsNamespace, "configmap/payments", "--timeout", "90s")), 0, "succeeded") && ok
	ok = rolled("payments") && ok
	if got := w.setReads("payments"); got != canary {
		fmt.Printf("  ✗ expected payments on the canary's snapshots (%s), not %s\n", canary, got)
		ok = false
	}
	return ok
}

// setReads is what every live pod of a Deployment of demo-sets reads,
// shown: "config=<snapshot> keys=<snapshot>" ("mixed" when its pods
// differ, "none" without pods).
func (w *walkthrough) setReads(deployment string) string {
	w.kubectl("get", "pods", "-n", setsNamespace, "-l", "app="+deployment,
		"-o", "custom-columns=POD:.metadata.name,CONFIG:.spec.volumes[0].configMap.name,KEYS:.spec.volumes[1].secret.secretName")
	var pods corev1.PodList
	if err := w.env.Client.List(w.ctx, &pods, client.InNamespace(setsNamespace), client.MatchingLabels{"app": deployment}); err != nil {
		return "unreadable"
	}
	var reads []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || len(p.Spec.Volumes) < 2 || p.Spec.Volumes[0].ConfigMap == nil || p.Spec.Volumes[1].Secret == nil {
			continue
		}
		reads = append(reads, "config="+p.Spec.Volumes[0].ConfigMap.Name+" keys="+p.Spec.Volumes[1].Secret.SecretName)
	}
	switch reads = slices.Compact(slices.Sorted(slices.Values(reads))); len(reads) {
	case 0:
		return "none"
	case 1:
		return reads[0]
	}
	return "mixed"
}

// setDeliveryAt says whether the newest ConfigDelivery of demo-sets is at
// "State/wave".
func (w *walkthrough) setDeliveryAt(stateWave string) bool {
	res := w.quietKubectl("get", "configdeliveries", "-n", setsNamespace, "--sort-by=.metadata.creationTimestamp",
		"-o", `jsonpath={range .items[*]}{.status.state}/{.status.currentWave}{"\n"}{end}`)
	lines := strings.Fields(res.Stdout)
	return len(lines) > 0 && lines[len(lines)-1] == stateWave
}

// analysisNamespace is where step 17 gates a delivery on Prometheus.
const analysisNamespace = "demo-analysis"

// prometheusBuildEnvVar names the background build of Prometheus that
// `make demo` starts when the binary is missing, so a cold first run reaches
// step 01 without waiting for it: the build writes PREFIX.log and, when it
// ends, its exit status to PREFIX.rc.
const prometheusBuildEnvVar = "CONFIGWARD_DEMO_PROMETHEUS_BUILD"

// analysisPrometheus is step 17's Prometheus and the request counters it
// scrapes. Its address is fixed before the controller starts (the
// controller is named it once, as the chart names one); the server itself
// starts then when it is built, or at step 17 once `make demo`'s
// background build is done.
type analysisPrometheus struct {
	env   *framework.Env
	app   *framework.AppMetrics
	addr  string
	build string
	srv   *framework.PrometheusServer
}

func newAnalysisPrometheus(env *framework.Env) (*analysisPrometheus, error) {
	app, err := framework.StartAppMetrics()
	if err != nil {
		return nil, err
	}
	p := &analysisPrometheus{env: env, app: app, build: os.Getenv(prometheusBuildEnvVar)}
	if _, err := framework.Prometheus(); err != nil && p.build != "" {
		ports, err := framework.FreePorts(1)
		if err != nil {
			_ = app.Close()
			return nil, err
		}
		p.addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
		fmt.Printf("Prometheus, for step 17, is still being built in the background (log: %s.log).\n", p.build)
		return p, nil
	}
	if err := p.start(); err != nil {
		_ = app.Close()
		return nil, err
	}
	return p, nil
}

func (p *analysisPrometheus) url() string {
	if p.srv != nil {
		return p.srv.URL
	}
	return "http://" + p.addr
}

func (p *analysisPrometheus) start() error {
	srv, err := p.env.StartPrometheus(framework.PrometheusOptions{Targets: []string{p.app.Address()}, Address: p.addr})
	if err != nil {
		return fmt.Errorf("%w (make demo builds it: make prometheus)", err)
	}
	p.srv = srv
	return nil
}

// ready starts Prometheus if it waited for its build, after waiting for
// the build to end; false (having said why) when the build failed or the
// demo is stopped.
func (p *analysisPrometheus) ready(ctx context.Context) bool {
	if p.srv != nil {
		return true
	}
	fmt.Printf("  waiting for the background build of Prometheus to finish (log: %s.log) ...\n", p.build)
	waited := time.Now()
	for {
		rc, err := os.ReadFile(p.build + ".rc")
		if err == nil {
			if strings.TrimSpace(string(rc)) != "0" {
				fmt.Printf("  ✗ building Prometheus failed (exit status %s); see %s.log\n", strings.TrimSpace(string(rc)), p.build)
				return false
			}
			break
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
	fmt.Printf("  built after %s more\n", time.Since(waited).Round(time.Second))
	if err := p.start(); err != nil {
		fmt.Println("  ✗ starting Prometheus:", err)
		return false
	}
	return true
}

// analysis walks through step 17: pricing's pods serve requests (the demo
// plays them), a typo raises the canary's error ratio, the check fails it
// against the rest and the canary goes back to its old snapshot.
func (w *walkthrough) analysis() bool {
	if !w.prom.ready(w.ctx) || !w.apply("17-analysis.yaml", 0) {
		return false
	}
	rolled := func(name string) bool {
		return w.expect(w.quietKubectl("rollout", "status", "deployment/"+name, "-n", analysisNamespace, "--timeout=60s"), 0, "successfully rolled out")
	}
	if !rolled("pricing-canary") || !rolled("pricing") {
		return false
	}
	go w.playPricing()
	if !w.apply("17-pricing-typo.yaml", 0) {
		return false
	}
	fmt.Println("  the canary's pods read the typo and fail half their requests, while pricing's do not; the check compares them and fails the wave:")
	at := func(want string) func() bool {
		return func() bool {
			res := w.quietKubectl("get", "configdeliveries", "-n", analysisNamespace, "--sort-by=.spec.sequence",
				"-o", `jsonpath={range .items[*]}{.status.state}/{.status.reason}{"\n"}{end}`)
			lines := strings.Fields(res.Stdout)
			return len(lines) > 0 && lines[len(lines)-1] == want
		}
	}
	ok := w.waitFor(90*time.Second, at("Halted/AnalysisFailed"))
	w.kubectl("get", "configdeliveries", "-n", analysisNamespace)
	ok = w.expect(w.kubectl("get", "configdeliveries", "-n", analysisNamespace, "-o", `jsonpath={.items[-1:].status.message}{"\n"}`), 0,
		"check error-ratio", "> rest", "rolled back") && ok
	fmt.Println("  rolled back: the canary's pods read the snapshot of discount 10 again; pricing never saw the typo:")
	reads := func(app string) string {
		return w.quietKubectl("get", "pods", "-n", analysisNamespace, "-l", "app="+app, "-o", `jsonpath={range .items[*]}{.spec.volumes[0].configMap.name}{"\n"}{end}`).Stdout
	}
	ok = w.waitFor(60*time.Second, func() bool {
		for _, app := range []string{"pricing-canary", "pricing"} {
			for _, cm := range strings.Fields(reads(app)) {
				if w.quietKubectl("get", "configmap", cm, "-n", analysisNamespace, "-o", "jsonpath={.data.discount}").Stdout != "10" {
					return false
				}
			}
		}
		return true
	}) && ok
	w.kubectl("get", "pods", "-n", analysisNamespace, "-o", "custom-columns=POD:.metadata.name,READS:.spec.volumes[0].configMap.name")
	return ok
}

// playPricing plays step 17's application until the demo stops: every
// running pod of demo-analysis serves 20 requests a second, and fails half
// of them when the pricing it reads says discount "100".
func (w *walkthrough) playPricing() {
	served := map[string]bool{}
	for w.ctx.Err() == nil {
		var pods corev1.PodList
		if w.env.Client.List(w.ctx, &pods, client.InNamespace(analysisNamespace)) == nil {
			live := map[string]bool{}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || len(p.Spec.Volumes) == 0 || p.Spec.Volumes[0].ConfigMap == nil {
					continue
				}
				var cm corev1.ConfigMap
				if w.env.Client.Get(w.ctx, client.ObjectKey{Namespace: analysisNamespace, Name: p.Spec.Volumes[0].ConfigMap.Name}, &cm) != nil {
					continue
				}
				errorRatio := 0.0
				if cm.Data["discount"] == "100" {
					errorRatio = 0.5
				}
				live[p.Name] = true
				w.prom.app.SetPod(analysisNamespace, p.Name, 20, errorRatio)
			}
			for name := range served {
				if !live[name] {
					w.prom.app.RemovePod(analysisNamespace, name)
				}
			}
			served = live
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hotNamespace is where step 16 delivers hot config in waves.
const hotNamespace = "demo-hot"

// hotWaves walks through step 16: banner's two pods mount the channels of
// their waves, a change reaches the canary pod's channel first, and the
// rest's once a person promotes it.
func (w *walkthrough) hotWaves() bool {
	if !w.apply("16-hot-waves.yaml", 0) {
		return false
	}
	// Pods created before configward knows the namespace's delivery mount
	// the original: wait until a pod would be pointed at a channel.
	probe := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe","namespace":"demo-hot"},"spec":{"containers":[{"name":"c","image":"x"}],"volumes":[{"name":"v","configMap":{"name":"banner-text"}}]}}`
	w.waitFor(30*time.Second, func() bool {
		return strings.Contains(w.env.Kubectl(probe, "create", "--dry-run=server", "-f", "-", "-o", "jsonpath={.spec.volumes[0].configMap.name}").Stdout, "-ch-")
	})
	if !w.apply("16-banner.yaml", 0) || !w.expect(w.quietKubectl("rollout", "status", "deployment/banner", "-n", hotNamespace, "--timeout=60s"), 0, "successfully rolled out") {
		return false
	}
	fmt.Println("  each pod mounts the channel of its wave, a copy only configward writes; the template still names banner-text:")
	ok := w.expect(w.kubectl("get", "pods", "-n", hotNamespace, "-l", "app=banner", "-o", "custom-columns=POD:.metadata.name,WAVE:.metadata.annotations.configward\\.dev/channel-wave,READS:.spec.volumes[0].configMap.name"),
		0, "banner-text-ch-canary", "banner-text-ch-rest")
	ok = w.agentsReportIn(hotNamespace, "banner", []string{"banner-text"}, func(int) (string, string) { return reload.Applied, "reloaded" }) && ok
	if !w.apply("16-banner-change.yaml", 0) {
		return false
	}
	fmt.Println("  the canary pod's channel takes the change first; its agent reports that the app applied it (the demo plays the agents), and the rest waits for a person:")
	ok = w.agentsReportIn(hotNamespace, "banner", []string{"banner-text"}, func(i int) (string, string) {
		if w.waveOf(i) == "canary" {
			return reload.Applied, "reloaded"
		}
		return "", ""
	}) && ok
	ok = w.waitFor(60*time.Second, func() bool { return w.hotDeliveryAt("WaitingForApproval/rest") }) && ok
	channels := []string{"get", "configmaps", "-n", hotNamespace, "-l", "configward.dev/channel=true", "-o", `custom-columns=CHANNEL:.metadata.name,TEXT:.data.text`}
	ok = w.expect(w.kubectl(channels...), 0, "Welcome back") && ok
	w.kubectl("get", "configdeliveries", "-n", hotNamespace)
	ok = w.expect(w.show(w.env.KubectlPlugin("delivery", "promote", "-n", hotNamespace, "configmap/banner-text")), 0) && ok
	ok = w.agentsReportIn(hotNamespace, "banner", []string{"banner-text"}, func(int) (string, string) { return reload.Applied, "reloaded" }) && ok
	ok = w.waitFor(60*time.Second, func() bool { return w.hotDeliveryAt("Succeeded/rest") }) && ok
	w.kubectl("get", "configdeliveries", "-n", hotNamespace)
	return w.expect(w.kubectl(channels...), 0, "banner-text-ch-rest") && ok
}

// hotSet walks through step 19: banner mounts its text and its style, both
// hot; a change of both is one delivery, and the canary pod's agent (played
// here: kwok runs none) asks configward before it reloads the app.
func (w *walkthrough) hotSet() bool {
	cms := []string{"banner-text", "banner-style"}
	if !w.apply("20-banner-style.yaml", 0) || !w.expect(w.quietKubectl("rollout", "status", "deployment/banner", "-n", hotNamespace, "--timeout=60s"), 0, "successfully rolled out") {
		return false
	}
	ok := w.agentsReportIn(hotNamespace, "banner", cms, func(int) (string, string) { return reload.Applied, "reloaded" })
	sample, err := os.ReadFile(filepath.Join(samples, "20-banner-style.yaml"))
	if err != nil {
		fmt.Println("  ✗", err)
		return false
	}
	watching := strings.Replace(string(sample), `configward.dev/reload-agent: "http://localhost:8080/-/reload"`, `configward.dev/reload-agent: watch`, 1)
	fmt.Println("  had banner's app watched its own files (a server-side dry run), the agent could not hold its reload back, and the write is warned:")
	warned := "[config-set] Deployment demo-hot/banner mounts hot ConfigMap/banner-text, ConfigMap/banner-style"
	w.waitFor(30*time.Second, func() bool {
		return strings.Contains(w.env.Kubectl(watching, "apply", "--dry-run=server", "-f", "-").Stderr, warned)
	})
	ok = w.expect(w.show(w.env.Kubectl(watching, "apply", "--dry-run=server", "-f", "-")), 0, warned) && ok
	if !w.apply("20-banner-set-change.yaml", 0) {
		return false
	}
	pods, listed := w.podsOf(hotNamespace, "banner")
	canary := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Annotations["configward.dev/channel-wave"] == "canary" })
	if !listed || canary < 0 {
		fmt.Println("  ✗ no canary pod of banner")
		return false
	}
	p := &pods[canary]
	held, found := w.mountedContent(p, cms)
	if !found {
		return false
	}
	fmt.Println("  one delivery writes the canary's channels of both, each with a note of what the set holds:")
	w.kubectl("get", "configmap", "banner-text-ch-canary", "-n", hotNamespace, "-o", `jsonpath={.metadata.annotations.configward\.dev/channel-set}{"\n"}`)
	token, err := w.env.PodToken(w.ctx, p, reload.Audience)
	if err != nil {
		fmt.Println("  ✗", err)
		return false
	}
	ask := func(configs map[string]map[string]string) reload.Answer {
		q := framework.AgentReportOf(token, configs, "", "")
		q.Ask = true
		var ans reload.Answer
		status, body, err := w.env.PostReport(token, q)
		if err == nil && status == http.StatusOK {
			err = json.Unmarshal([]byte(body), &ans)
		}
		if err != nil || status != http.StatusOK {
			fmt.Printf("  ✗ the question of pod %s: %d %s %v\n", p.Name, status, body, err)
		}
		return ans
	}
	mix := maps.Clone(held)
	mix["ConfigMap/banner-style-ch-canary"] = map[string]string{"style": "color: blue"}
	fmt.Println("  its kubelet has swapped in the new text, not yet the new style; the agent asks before it reloads the app:")
	ans := ask(mix)
	fmt.Printf("  holds=%v waitingFor=%v: the agent waits, the app keeps what it runs\n", ans.Holds, ans.WaitingFor)
	ok = !ans.Holds && slices.Equal(ans.WaitingFor, []string{"ConfigMap/banner-style-ch-canary"}) && ok
	fmt.Println("  the style arrives at the kubelet's next sync; the agent asks again:")
	ans = ask(held)
	fmt.Printf("  holds=%v sets=%v: the agent reloads the app once, on both\n", ans.Holds, ans.Sets)
	ok = ans.Holds && ans.Sets["ConfigMap/banner-text-ch-canary"] != "" && ok
	ok = w.agentsReportIn(hotNamespace, "banner", cms, func(i int) (string, string) {
		if i == canary {
			return reload.Applied, "reloaded"
		}
		return "", ""
	}) && ok
	ok = w.waitFor(60*time.Second, func() bool { return w.hotDeliveryAt("WaitingForApproval/rest") }) && ok
	w.kubectl("get", "configdeliveries", "-n", hotNamespace)
	ok = w.expect(w.show(w.env.KubectlPlugin("delivery", "promote", "-n", hotNamespace, "configmap/banner-style")), 0) && ok
	ok = w.agentsReportIn(hotNamespace, "banner", cms, func(int) (string, string) { return reload.Applied, "reloaded" }) && ok
	ok = w.waitFor(60*time.Second, func() bool { return w.hotDeliveryAt("Succeeded/rest") }) && ok
	w.kubectl("get", "configdeliveries", "-n", hotNamespace)
	return ok
}

const certsNamespace = "demo-certs"

// demoStaleCertGrace is the controller's --stale-cert-grace in the demo,
// which would otherwise wait the default 5 minutes to evict.
const demoStaleCertGrace = 20 * time.Second

// servedCerts walks through the served-certificate check: web's two pods
// present the certificate they mount; cert-manager (played by a sample)
// renews it; one pod's program reads it again, the other does not, is
// reported stale and, after the grace, evicted; its replacement is current.
func (w *walkthrough) servedCerts() bool {
	if !w.apply("21-web-tls.yaml", 0) ||
		!w.expect(w.quietKubectl("rollout", "status", "deployment/web", "-n", certsNamespace, "--timeout=60s"), 0, "successfully rolled out") {
		return false
	}
	fmt.Println("  configward injected its agent, with a volume of the certificate alone (never tls.key):")
	ok := w.expect(w.kubectl("get", "pods", "-n", certsNamespace, "-l", "app=web", "-o",
		`custom-columns=POD:.metadata.name,SIDECARS:.spec.initContainers[*].name,AGENT READS:.spec.volumes[?(@.name=="configward-cert-8443")].projected.sources[*].secret.items[*].key`), 0, "configward-agent")
	first, okFirst := w.secretCert()
	if !okFirst {
		return false
	}
	fmt.Println("  kwok runs no program, so the demo plays each pod's agent with the pod's own token: both present the certificate they mount")
	ok = w.certsReport(func(int) *x509.Certificate { return first.cert }) && ok
	ok = w.expect(w.show(w.env.KubectlPlugin("status", "-n", certsNamespace)), 0, "Served certificates") && ok
	if !w.apply("22-web-tls-renewed.yaml", 0) {
		return false
	}
	second, okSecond := w.secretCert()
	if !okSecond {
		return false
	}
	fmt.Println("  the renewal reaches both pods' files; the first pod's program reads it per handshake, the second loaded its certificate once:")
	ok = w.certsReport(func(i int) *x509.Certificate {
		if i == 0 {
			return second.cert
		}
		return first.cert
	}, first.cert) && ok
	ok = w.expect(w.show(w.env.KubectlPlugin("status", "-n", certsNamespace)), 0, "presents certificate serial "+reload.LeafOf(first.cert).Serial) && ok
	w.waitFor(10*time.Second, func() bool {
		return strings.Contains(w.quietKubectl("get", "events", "-n", certsNamespace, "--field-selector", "reason=ServedCertificateStale").Stdout, "web")
	})
	ok = w.expect(w.kubectl("get", "events", "-n", certsNamespace, "--field-selector", "reason=ServedCertificateStale", "-o", "custom-columns=OBJECT:.involvedObject.name,MESSAGE:.message"),
		0, "Certificate web") && ok
	fmt.Printf("  after the grace (%s in this demo; 5 minutes by default), configward evicts the stale pod, through the Eviction API, one at a time:\n", demoStaleCertGrace)
	ok = w.waitFor(2*time.Minute, func() bool {
		return strings.Contains(w.quietKubectl("get", "events", "-n", certsNamespace, "--field-selector", "reason=StaleCertificateEvicted").Stdout, "web")
	}) && ok
	ok = w.expect(w.kubectl("get", "events", "-n", certsNamespace, "--field-selector", "reason=StaleCertificateEvicted", "-o", "custom-columns=OBJECT:.involvedObject.name,MESSAGE:.message"),
		0, "evicted pod") && ok
	ok = w.waitFor(60*time.Second, func() bool {
		pods, listed := w.podsOf(certsNamespace, "web")
		return listed && len(pods) == 2 && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning })
	}) && ok
	fmt.Println("  its replacement started on the renewed certificate and presents it:")
	ok = w.certsReport(func(int) *x509.Certificate { return second.cert }, first.cert) && ok
	return w.expect(w.show(w.env.KubectlPlugin("status", "-n", certsNamespace)), 0, "Deployment/web  2        0") && ok
}

// storedCert is web-tls's certificate as stored, and its PEM.
type storedCert struct {
	pem  []byte
	cert *x509.Certificate
}

// secretCert reads web-tls's certificate.
func (w *walkthrough) secretCert() (storedCert, bool) {
	var s corev1.Secret
	if err := w.env.Client.Get(w.ctx, client.ObjectKey{Namespace: certsNamespace, Name: "web-tls"}, &s); err != nil {
		fmt.Println("  ✗", err)
		return storedCert{}, false
	}
	b, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if b == nil {
		fmt.Println("  ✗ web-tls holds no certificate")
		return storedCert{}, false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		fmt.Println("  ✗", err)
		return storedCert{}, false
	}
	return storedCert{pem: s.Data[corev1.TLSCertKey], cert: c}, true
}

// certsReport reports, for each pod of web (by name), what its agent would
// find port 8443 presents (presented(i)) against what it mounts (the
// Secret's certificate now); before are certificates mounted earlier.
func (w *walkthrough) certsReport(presented func(i int) *x509.Certificate, before ...*x509.Certificate) bool {
	mounted, ok := w.secretCert()
	if !ok {
		return false
	}
	pods, ok := w.podsOf(certsNamespace, "web")
	if !ok {
		return false
	}
	pods = slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	for i := range pods {
		p := &pods[i]
		token, err := w.env.PodToken(w.ctx, p, reload.Audience)
		var r reload.CertReport
		if err == nil {
			r, err = framework.CertReportOf(token, 8443, "web-tls", mounted.pem, presented(i), before...)
		}
		if err == nil {
			var status int
			var body string
			status, body, err = w.env.PostReport(token, reload.Report{Certificates: []reload.CertReport{r}})
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("%d %s", status, body)
			}
		}
		if err != nil {
			fmt.Printf("  ✗ the report of pod %s: %v\n", p.Name, err)
			return false
		}
		fmt.Printf("  pod %s port 8443: %s (presents %s, mounts %s)\n", p.Name, r.Result, r.Presented.Serial, r.Mounted.Serial)
	}
	return true
}

// waveOf is the wave of the i-th pod of banner, by name.
func (w *walkthrough) waveOf(i int) string {
	var pods corev1.PodList
	if w.env.Client.List(w.ctx, &pods, client.InNamespace(hotNamespace), client.MatchingLabels{"app": "banner"}) != nil || i >= len(pods.Items) {
		return ""
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items[i].Annotations["configward.dev/channel-wave"]
}

// hotDeliveryAt says whether the newest ConfigDelivery of demo-hot is at
// "State/wave": by creation, since sequences count per config and step 19's
// record is the first of banner-style.
func (w *walkthrough) hotDeliveryAt(stateWave string) bool {
	res := w.quietKubectl("get", "configdeliveries", "-n", hotNamespace, "--sort-by=.metadata.creationTimestamp",
		"-o", `jsonpath={range .items[*]}{.status.state}/{.status.currentWave}{"\n"}{end}`)
	lines := strings.Fields(res.Stdout)
	return len(lines) > 0 && lines[len(lines)-1] == stateWave
}

// forgedOwner creates the pod of sample file, claiming a ReplicaSet of
// Deployment checkout as its controller, as the sample's comment says to,
// and expects it refused.
func (w *walkthrough) forgedOwner(file string) bool {
	path := filepath.Join(samples, file)
	fmt.Println("  " + firstComment(path))
	rs := w.kubectl("get", "rs", "-n", namespace, "-l", "app=checkout", "-o", "jsonpath={.items[0].metadata.name} {.items[0].metadata.uid}")
	owner := strings.Fields(rs.Stdout)
	if rs.ExitCode != 0 || len(owner) != 2 {
		fmt.Println("  ✗ no ReplicaSet of checkout to name")
		return false
	}
	manifest, err := os.ReadFile(path)
	if err != nil {
		fmt.Printf("  ✗ %v\n", err)
		return false
	}
	pod := strings.NewReplacer("REPLICASET_NAME", owner[0], "REPLICASET_UID", owner[1]).Replace(string(manifest))
	fmt.Printf("  $ sed -e s/REPLICASET_NAME/%s/ -e s/REPLICASET_UID/%s/ %s | kubectl create -f -\n", owner[0], owner[1], path)
	return w.expect(w.show(w.env.Kubectl(pod, "create", "-f", "-")), 1, "denied the request: [subpath-config] Pod demo/checkout-forged")
}

// agentsReport reports, for each pod of storefront, what its agent would
// (kwok runs no agent): that the pod has storefront-flags as stored now,
// and what result says the app made of it (nothing, for "").
func (w *walkthrough) agentsReport(result func(i int) (string, string)) bool {
	return w.agentsReportIn(wavesNamespace, "storefront", []string{"storefront-flags"}, result)
}

// agentsReportIn reports, for each pod of app in ns, what its agent would
// (kwok runs no agent): that the pod has the content of what it mounts of
// each ConfigMap of cms (the ConfigMap itself, or the channel of its wave
// where delivery is on) once that holds its content as stored now, all in
// one report, and what result says the app made of it (nothing, for "").
func (w *walkthrough) agentsReportIn(ns, app string, cms []string, result func(i int) (string, string)) bool {
	pods, ok := w.podsOf(ns, app)
	if !ok {
		return false
	}
	for i := range pods {
		what, message := result(i)
		if what == "" {
			continue
		}
		p := &pods[i]
		held, ok := w.mountedContent(p, cms)
		if !ok {
			return false
		}
		token, err := w.env.PodToken(w.ctx, p, reload.Audience)
		if err == nil {
			var status int
			var body string
			status, body, err = w.env.PostReport(token, framework.AgentReportOf(token, held, what, message))
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("%d %s", status, body)
			}
		}
		if err != nil {
			fmt.Printf("  ✗ the report of pod %s: %v\n", p.Name, err)
			return false
		}
	}
	return true
}

// podsOf lists the pods of app in ns, by name.
func (w *walkthrough) podsOf(ns, app string) ([]corev1.Pod, bool) {
	var pods corev1.PodList
	if err := w.env.Client.List(w.ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		fmt.Println("  ✗", err)
		return nil, false
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, true
}

// mountedContent is what pod p has of each ConfigMap of cms, by what it
// mounts ("ConfigMap/<channel>"): the original's content as stored now,
// once the ConfigMap it mounts holds it.
func (w *walkthrough) mountedContent(p *corev1.Pod, cms []string) (map[string]map[string]string, bool) {
	out := map[string]map[string]string{}
	for _, cm := range cms {
		var original, held corev1.ConfigMap
		if err := w.env.Client.Get(w.ctx, client.ObjectKey{Namespace: p.Namespace, Name: cm}, &original); err != nil {
			fmt.Println("  ✗", err)
			return nil, false
		}
		mounted := mountedName(p, cm)
		if !w.waitFor(30*time.Second, func() bool {
			return w.env.Client.Get(w.ctx, client.ObjectKey{Namespace: p.Namespace, Name: mounted}, &held) == nil && maps.Equal(held.Data, original.Data)
		}) {
			fmt.Printf("  ✗ %s, which pod %s mounts, did not get the content of %s\n", mounted, p.Name, cm)
			return nil, false
		}
		out["ConfigMap/"+mounted] = held.Data
	}
	return out, true
}

func mountedName(pod *corev1.Pod, cm string) string {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && (v.ConfigMap.Name == cm || strings.HasPrefix(v.ConfigMap.Name, cm+"-ch-")) {
			return v.ConfigMap.Name
		}
	}
	return cm
}

// reloadStatus runs `kubectl configward status` on storefront with args
// and expects wantExit.
func (w *walkthrough) reloadStatus(wantExit int, args ...string) bool {
	args = append([]string{"status", "-n", wavesNamespace, "deployment/storefront"}, args...)
	fmt.Println("  $ kubectl configward " + shellJoin(args))
	return w.expect(w.show(w.env.KubectlPlugin(args...)), wantExit, "Hot config")
}

// wavesNamespace is where steps 11 to 14 show revisions, delivery and the
// reload agent.
const wavesNamespace = "demo-waves"

// waitUntilStampsSnapshots waits until configward's webhook has seen the
// ConfigPolicy of step 11 (a Deployment created before would start without
// snapshots), trying a Deployment of 12 with --dry-run=server.
func (w *walkthrough) waitUntilStampsSnapshots() {
	w.waitFor(30*time.Second, func() bool {
		res := w.env.Kubectl("", "create", "--dry-run=server", "-f", filepath.Join(samples, "12-greeting.yaml"), "-o", `jsonpath={.spec.template.metadata.annotations}`)
		return strings.Contains(res.Stdout, "configward.dev/config-snapshots")
	})
}

// waitFor polls done until it holds or timeout passes.
func (w *walkthrough) waitFor(timeout time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for w.ctx.Err() == nil {
		if done() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

// rolledOut waits for a Deployment of demo-waves to finish its rollout.
func (w *walkthrough) rolledOut(name string) bool {
	return w.expect(w.quietKubectl("rollout", "status", "deployment/"+name, "-n", wavesNamespace, "--timeout=60s"), 0, "successfully rolled out")
}

// deliveryAt says whether the newest ConfigDelivery of greeting is in state
// (and, when given, at wave).
func (w *walkthrough) deliveryAt(state, wave string) bool {
	res := w.quietKubectl("get", "configdeliveries", "-n", wavesNamespace, "--sort-by=.spec.sequence",
		"-o", `jsonpath={range .items[*]}{.status.state}/{.status.currentWave}{"\n"}{end}`)
	lines := strings.Fields(res.Stdout)
	if len(lines) == 0 {
		return false
	}
	got := lines[len(lines)-1]
	return strings.HasPrefix(got, state+"/") && (wave == "" || got == state+"/"+wave)
}

// snapshotOf is the ConfigMap the pods of a Deployment of demo-waves read
// (all of them, once its rollout is done): a snapshot of greeting.
func (w *walkthrough) snapshotOf(deployment string) string {
	res := w.quietKubectl("get", "pods", "-n", wavesNamespace, "-l", "app="+deployment, "-o", `jsonpath={range .items[*]}{.spec.volumes[0].configMap.name}{"\n"}{end}`)
	names := slices.Compact(slices.Sorted(slices.Values(strings.Fields(res.Stdout))))
	if len(names) != 1 {
		return strings.Join(names, ",")
	}
	return names[0]
}

// podsRead shows which ConfigMap the pods of a Deployment of demo-waves
// read and what it holds, and checks that they read one snapshot of
// greeting holding message.
func (w *walkthrough) podsRead(deployment, message string) bool {
	w.waitFor(30*time.Second, func() bool { return w.snapshotContent(w.snapshotOf(deployment)) == message })
	w.kubectl("get", "pods", "-n", wavesNamespace, "-l", "app="+deployment, "-o", "custom-columns=POD:.metadata.name,READS:.spec.volumes[0].configMap.name")
	snap := w.snapshotOf(deployment)
	w.kubectl("get", "configmap", snap, "-n", wavesNamespace, "-o", `jsonpath={.metadata.name}: message.txt={.data.message\.txt}{"\n"}`)
	if !regexp.MustCompile(`^greeting-[0-9a-f]{10}$`).MatchString(snap) || w.snapshotContent(snap) != message {
		fmt.Printf("  ✗ expected every pod of %s to read one snapshot of greeting holding %q\n", deployment, message)
		return false
	}
	return true
}

func (w *walkthrough) snapshotContent(name string) string {
	return w.quietKubectl("get", "configmap", name, "-n", wavesNamespace, "-o", `jsonpath={.data.message\.txt}`).Stdout
}

// podsWithHash lists the pods of Deployment checkout with the config hash
// each started with.
var (
	checkoutPods = []string{"get", "pods", "-n", namespace, "-l", "app=checkout"}
	podsWithHash = append(slices.Clip(checkoutPods),
		"-o", `custom-columns=POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,CONFIG-HASH:.metadata.annotations.configward\.dev/config-hash`)
)

// podsCarry waits until every pod of Deployment checkout carries hash (the
// old ones are deleted as the rollout goes on), then shows them.
func (w *walkthrough) podsCarry(hash string) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && w.ctx.Err() == nil {
		res := w.quietKubectl(append(slices.Clip(checkoutPods), "-o", `jsonpath={range .items[*]}{.metadata.annotations.configward\.dev/config-hash}{"\n"}{end}`)...)
		lines := strings.Fields(res.Stdout)
		if res.ExitCode == 0 && len(lines) > 0 && !slices.ContainsFunc(lines, func(l string) bool { return l != hash }) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	res := w.kubectl(podsWithHash...)
	if strings.Count(res.Stdout, hash) == 0 || strings.Count(res.Stdout, "hmac-sha256:") != strings.Count(res.Stdout, hash) {
		fmt.Println("  ✗ not every pod carries " + hash)
		return false
	}
	return true
}

// setup creates the namespace the samples live in.
func (w *walkthrough) setup() bool {
	fmt.Println()
	res := w.kubectl("create", "namespace", namespace)
	if res.ExitCode != 0 {
		w.total, w.failed = 1, 1
		return false
	}
	return true
}

// waitForEnforcement waits until the webhook's caches know the objects of
// step 01 (the rejections of 03, 04 and 06 depend on them), trying the
// samples with --dry-run=server, which stores nothing.
func (w *walkthrough) waitForEnforcement() {
	fmt.Print("\n(waiting until configward's webhook has seen the objects of 01 ... ")
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for time.Now().Before(deadline) && w.ctx.Err() == nil {
		all := true
		for _, f := range []string{"03-deny-subpath-config.yaml", "04-deny-hot-config-in-env.yaml", "06-deny-config-schema.yaml"} {
			if w.env.Kubectl("", "apply", "--dry-run=server", "-f", filepath.Join(samples, f)).ExitCode == 0 {
				all = false
				break
			}
		}
		if all {
			fmt.Printf("ready after %s)\n", time.Since(start).Round(100*time.Millisecond))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Println("still not enforcing after 60 s; going on)")
}

func (w *walkthrough) step(num, title string, f func() bool) {
	if w.ctx.Err() != nil {
		return
	}
	w.total++
	fmt.Printf("\n── %s  %s\n", num, title)
	if f() {
		fmt.Printf("  ✓ %s as expected\n", num)
	} else {
		w.failed++
		fmt.Printf("  ✗ %s NOT as expected\n", num)
	}
}

// apply runs `kubectl apply -f config/samples/<file>` and checks its exit
// code and that its output holds each of want.
func (w *walkthrough) apply(file string, wantExit int, want ...string) bool {
	path := filepath.Join(samples, file)
	fmt.Println("  " + firstComment(path))
	res := w.kubectl("apply", "-f", path)
	return w.expect(res, wantExit, want...)
}

func (w *walkthrough) expect(res framework.KubectlResult, wantExit int, want ...string) bool {
	ok := true
	if res.ExitCode != wantExit {
		fmt.Printf("  ✗ kubectl exited %d, expected %d\n", res.ExitCode, wantExit)
		ok = false
	}
	out := res.Stdout + res.Stderr
	for _, s := range want {
		if !strings.Contains(out, s) {
			fmt.Printf("  ✗ expected the output to contain %q\n", s)
			ok = false
		}
	}
	return ok
}

// statusShows waits up to 20 s until `kubectl configward status` shows
// Deployment checkout in state with the change that rolled it, then shows
// it, and checks the exit code. The state shows as soon as the pods do;
// the change only once the controller's Report names it, which on a busy
// machine comes seconds later: a newcomer is shown the row that says why.
func (w *walkthrough) statusShows(wantExit int, state, change string) bool {
	args := []string{"status", "-n", namespace}
	row := regexp.MustCompile(`(?m)^Deployment/checkout\s.*\s` + state + `\s+` + regexp.QuoteMeta(change) + `\s`)
	deadline := time.Now().Add(20 * time.Second)
	for !row.MatchString(w.env.KubectlPlugin(args...).Stdout) && time.Now().Before(deadline) && w.ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Println("  $ kubectl configward " + shellJoin(args))
	res := w.show(w.env.KubectlPlugin(args...))
	if !row.MatchString(res.Stdout) {
		fmt.Printf("  ✗ expected Deployment/checkout to be %s after a change of %s\n", state, change)
		return false
	}
	return w.expect(res, wantExit)
}

// kubectl runs kubectl, printing the command and what kubectl printed.
func (w *walkthrough) kubectl(args ...string) framework.KubectlResult {
	fmt.Println("  $ kubectl " + shellJoin(args))
	return w.show(w.env.Kubectl("", args...))
}

// show prints what a command printed, and its exit code when not 0.
func (w *walkthrough) show(res framework.KubectlResult) framework.KubectlResult {
	for _, out := range []string{res.Stderr, res.Stdout} {
		out = strings.TrimRight(out, "\n")
		if out == "" {
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			fmt.Println("    " + line)
		}
	}
	if res.ExitCode != 0 {
		fmt.Printf("    (exit code %d)\n", res.ExitCode)
	}
	return res
}

func (w *walkthrough) quietKubectl(args ...string) framework.KubectlResult {
	return w.env.Kubectl("", args...)
}

// firstComment returns the first line of a sample's leading comment.
func firstComment(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	return strings.TrimSpace(strings.TrimPrefix(line, "#"))
}

func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'{}[]$\\*?|&;<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// lateFile buffers writes until open is called, then writes to the file.
type lateFile struct {
	mu  sync.Mutex
	buf bytes.Buffer
	f   io.WriteCloser
}

func (l *lateFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		return l.f.Write(p)
	}
	if l.buf.Len() > 16<<20 {
		return 0, errors.New("log buffer full")
	}
	return l.buf.Write(p)
}

func (l *lateFile) open(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f = f
	_, err = f.Write(l.buf.Bytes())
	l.buf.Reset()
	return err
}

// close stops writing to the file (it is removed with the environment's
// directory); later log lines are dropped.
func (l *lateFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
	}
	l.f = nopCloser{}
}

type nopCloser struct{}

func (nopCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopCloser) Close() error                { return nil }
