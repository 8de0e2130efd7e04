package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// These specs gate waves on what the application says: a real Prometheus
// server (built from its module by `make prometheus`) scrapes the request
// counters the test serves for each pod kwok runs, as the application
// would, with an error ratio that depends on the config the pod reads
// (servedApp); the checks query it.

// errorRatioQuery is the check's query: the share of 5xx answers of the
// group measured, over the last 10 s.
const errorRatioQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",code="500",pod=~"{{ .Pods }}"}[10s])) / sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[10s]))`

// analysisWaves: app-0 is the canary, then half of the three others, then
// the last.
const analysisWaves = `waves:
- name: canary
  selector: {matchLabels: {configward.dev/wave: canary}}
- name: early
  percent: 50
- name: rest
progressDeadlineSeconds: 120
soakSeconds: 4
`

// errorCheck is a check of errorRatioQuery at most max, every 3 s, with
// more settings (YAML lines of the check).
func errorCheck(prometheus string, max float64, more ...string) string {
	return fmt.Sprintf("analysis:\n  prometheus: {address: %q}\n  checks:\n  - name: error-ratio\n    query: '%s'\n    max: %g\n    interval: 3s\n%s",
		prometheus, errorRatioQuery, max, indent(strings.Join(more, "\n"), 4))
}

// analysisNamespace returns a namespace with revisions and the delivery
// settings given, labels more, and n one-pod Deployments app-0 (the
// canary) to app-<n-1> reading ConfigMap cfg (level=info), rolled out;
// write writes the ConfigMap (the pipeline, where change control governs).
func analysisNamespace(tag, settings string, n int, labels map[string]string, write func(...string)) string {
	ns := newNamespace("analysis", labels)
	applyPolicy(policyYAML("analysis-"+tag, tag, "revisions: {enabled: true}\ndelivery:\n"+indent(settings, 2)))
	Eventually(policyReady("analysis-"+tag), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
	var deployments []string
	for i := range n {
		deployments = append(deployments, waveDeployment(ns, fmt.Sprintf("app-%d", i), i == 0, "cfg"))
	}
	write(configMap(ns, "cfg", map[string]string{"level": "info"}, nil))
	apply(deployments...)
	for i := range n {
		rolloutStatus(ns, fmt.Sprintf("deployment/app-%d", i))
	}
	return ns
}

func applyAll(manifests ...string) { apply(manifests...) }

// servedApp plays the application of every pod of ns: each serves 20
// requests a second, and errorRatio (of the level its ConfigMap holds, and
// whether a shared dependency fails) says which share of them fail. The
// counters stop with the spec.
func servedApp(app *framework.AppMetrics, ns string, errorRatio func(level string) float64) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		served := map[string]bool{}
		for ctx.Err() == nil {
			var pods corev1.PodList
			if env.Client.List(ctx, &pods, client.InNamespace(ns)) == nil {
				live := map[string]bool{}
				for _, p := range pods.Items {
					if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
						continue
					}
					live[p.Name] = true
					app.SetPod(ns, p.Name, 20, errorRatio(levelOf(ctx, &p)))
				}
				for name := range served {
					if !live[name] {
						app.RemovePod(ns, name)
					}
				}
				served = live
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	DeferCleanup(func() { cancel(); wg.Wait() })
}

// levelOf is what the ConfigMap a pod mounts (its revision's snapshot)
// holds under level.
func levelOf(ctx context.Context, p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		var cm corev1.ConfigMap
		if v.ConfigMap != nil && env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: v.ConfigMap.Name}, &cm) == nil {
			return cm.Data["level"]
		}
	}
	return ""
}

// brokenFails: pods reading level=broken fail half their requests.
func brokenFails(level string) float64 {
	if level == "broken" {
		return 0.5
	}
	return 0
}

// checksOf is the checks of wave i of the newest delivery of cfg in ns.
func checksOf(ns string, i int) []v1alpha1.CheckStatus {
	d := deliveries(ns, "cfg")
	return d[len(d)-1].Status.Waves[i].Checks
}

var _ = Describe("analysis of deliveries", Ordered, ContinueOnFailure, func() {
	var (
		app  *framework.AppMetrics
		prom *framework.PrometheusServer
	)
	BeforeAll(func() {
		framework.RequirePrometheus(GinkgoT())
		var err error
		app, err = framework.StartAppMetrics()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(app.Close)
		prom, err = env.StartPrometheus(framework.PrometheusOptions{Targets: []string{app.Address()}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(prom.Stop)
	})

	It("halts and rolls back a canary whose error ratio rises, the others untouched; the same check passes a good change", func() {
		ns := analysisNamespace("metric", analysisWaves+"onFailure: Rollback\n"+errorCheck(prom.URL, 0.05), 4,
			map[string]string{policyLabel: "metric"}, applyAll)
		servedApp(app, ns, brokenFails)
		before := snapshotOfCfg(ns, "app-0")
		apply(configMap(ns, "cfg", map[string]string{"level": "broken"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisFailed@canary"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.Message).To(And(ContainSubstring("check error-ratio"), ContainSubstring(`http_requests_total`), ContainSubstring("> max 0.05"),
			ContainSubstring("rolled back")))
		Expect(d.Status.History).To(ContainElement(And(HaveField("What", v1alpha1.HistoryCheckFailed), HaveField("Message", ContainSubstring("> max 0.05")))))
		Expect(d.Status.Waves[0].Checks).To(ConsistOf(And(HaveField("Result", "Failed"), HaveField("Failures", BeNumerically("==", 1)), HaveField("Value", HavePrefix("0.")))))
		Eventually(func() string { return snapshotOfCfg(ns, "app-0") }, rolloutTimeout).Should(Equal(before))
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-0", "level")()) }, rolloutTimeout).Should(ConsistOf("info"))
		Consistently(func() []string { return patched(deploymentPatches(ns)) }, 3*time.Second).Should(ConsistOf("app-0"), "only the canary was moved")
		Eventually(func() []string { return eventsFor(ns, "cfg", "DeliveryHalted") }, 10*time.Second).Should(ContainElement(ContainSubstring("> max 0.05")))
		Expect(status("-n", ns)().Table).To(ContainSubstring("failed its analysis: check error-ratio"))
		Eventually(func() string { return env.Kubectl("", "get", "reports", "-n", ns, "-o", "yaml").Stdout }, 30*time.Second, time.Second).
			Should(And(ContainSubstring("> max 0.05"), ContainSubstring("check/error-ratio")), "the canary's Report says why")

		By("a good change: the check measures each wave below its threshold and the delivery completes")
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 4*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		for i := range 3 {
			Expect(checksOf(ns, i)).To(ConsistOf(And(HaveField("Result", "Passed"), HaveField("Failures", BeNumerically("==", 0)),
				HaveField("Measurements", BeNumerically(">=", 1)))), "wave %d", i)
		}
	})

	It("compares the canary with the consumers not reached yet: errors everyone has pass, errors only the canary has fail", func() {
		var dependencyDown atomic.Bool
		ns := analysisNamespace("control", analysisWaves+"onFailure: Halt\n"+errorCheck(prom.URL, 0.05, "compareTo: rest", "tolerance: 0.05"), 4,
			map[string]string{policyLabel: "control"}, applyAll)
		servedApp(app, ns, func(level string) float64 {
			if dependencyDown.Load() {
				return 0.5
			}
			return brokenFails(level)
		})
		By("a shared dependency fails for every pod: the canary and early waves pass against the rest; the last wave, with no one left to compare with, is judged by max")
		dependencyDown.Store(true)
		Eventually(func() (float64, error) {
			v, _, err := prom.Query(context.Background(), fmt.Sprintf(`min(rate(http_requests_total{namespace=%q,code="500"}[10s]))`, ns))
			return v, err
		}, 30*time.Second, time.Second).
			Should(BeNumerically(">", 1))
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 4*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisFailed@rest"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.History).To(ContainElements(
			And(HaveField("What", v1alpha1.HistoryWaveCompleted), HaveField("Wave", "canary")),
			And(HaveField("What", v1alpha1.HistoryWaveCompleted), HaveField("Wave", "early"))))
		Expect(d.Status.Waves[0].Checks[0].Control).NotTo(BeEmpty(), "the canary was measured against the rest")
		Expect(d.Status.Message).To(ContainSubstring("no consumer left to compare with"))

		By("the dependency is back and a bad change raises errors on the canary alone: it fails against the rest")
		dependencyDown.Store(false)
		apply(configMap(ns, "cfg", map[string]string{"level": "broken"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisFailed@canary"))
		Expect(deliveries(ns, "cfg")[1].Status.Message).To(ContainSubstring("> rest"))
	})

	It("keeps checking through the bake after the last wave and rolls every wave back when it fails", func() {
		var latent atomic.Bool
		ns := analysisNamespace("bake", analysisWaves+"onFailure: Rollback\nbakeSeconds: 30\n"+errorCheck(prom.URL, 0.05), 4,
			map[string]string{policyLabel: "bake"}, applyAll)
		servedApp(app, ns, func(level string) float64 {
			if level == "latent" && latent.Load() {
				return 0.5
			}
			return 0
		})
		before := map[string]string{}
		for i := range 4 {
			before[fmt.Sprintf("app-%d", i)] = snapshotOfCfg(ns, fmt.Sprintf("app-%d", i))
		}
		apply(configMap(ns, "cfg", map[string]string{"level": "latent"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 4*rolloutTimeout, time.Second).Should(Equal("Progressing/Baking@rest"))
		latent.Store(true)
		Eventually(latestDelivery(ns, "cfg"), 60*time.Second, time.Second).Should(Equal("Halted/AnalysisFailed@rest"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.RolledBack).To(BeTrue())
		Expect(d.Status.Message).To(ContainSubstring("the bake after the last wave failed its analysis"))
		Expect(d.Status.Bake.Checks).To(ContainElement(HaveField("Result", "Failed")))
		for name, snap := range before {
			Eventually(func() string { return snapshotOfCfg(ns, name) }, rolloutTimeout).Should(Equal(snap), name)
			Eventually(func() []string { return valuesOf(readsOf(ns, name, "level")()) }, rolloutTimeout).Should(ConsistOf("info"), name)
		}
	})

	It("does what each check says with no data, an unreachable Prometheus and a query error, and records it", func() {
		two := "waves:\n- name: canary\n  selector: {matchLabels: {configward.dev/wave: canary}}\n- name: rest\nsoakSeconds: 2\n"
		noData := `analysis:
  prometheus: {address: %q}
  checks:
  - {name: traffic, query: 'sum(rate(nothing_total{pod=~"{{ .Pods }}"}[10s]))', min: 1, interval: 2s}
`
		ns := analysisNamespace("nodata", two+fmt.Sprintf(noData, prom.URL), 2, map[string]string{policyLabel: "nodata"}, applyAll)
		By("no data, inconclusive by default: halted for a person, nothing rolled back; promote moves it on")
		apply(configMap(ns, "cfg", map[string]string{"level": "a"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisInconclusive@canary"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.Message).To(ContainSubstring("NoData"))
		Expect(d.Status.RolledBack).To(BeFalse())
		Expect(env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/cfg").ExitCode).To(Equal(0))
		Eventually(latestDelivery(ns, "cfg"), rolloutTimeout, time.Second).Should(HaveSuffix("@rest"))

		By("an unreachable Prometheus with onError: Fail fails the wave")
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		unreachable := "http://" + closed.Addr().String()
		Expect(closed.Close()).To(Succeed())
		applyPolicy(policyYAML("analysis-nodata", "nodata", "revisions: {enabled: true}\ndelivery:\n"+indent(two+errorCheck(unreachable, 0.05, "onError: Fail"), 2)))
		apply(configMap(ns, "cfg", map[string]string{"level": "b"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisFailed@canary"))
		Expect(deliveries(ns, "cfg")[1].Status.Message).To(And(ContainSubstring("Error"), ContainSubstring(closed.Addr().String())))

		By("a query Prometheus refuses, inconclusive: halted, with Prometheus's own error")
		bad := "analysis:\n  prometheus: {address: %q}\n  checks:\n  - {name: typo, query: 'sum(rate(http_requests_total{pod=~\"{{ .Pods }}\"}[10s]', max: 1, interval: 2s}\n"
		applyPolicy(policyYAML("analysis-nodata", "nodata", "revisions: {enabled: true}\ndelivery:\n"+indent(two+fmt.Sprintf(bad, prom.URL), 2)))
		apply(configMap(ns, "cfg", map[string]string{"level": "c"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisInconclusive@canary"))
		Expect(deliveries(ns, "cfg")[2].Status.Message).To(And(ContainSubstring("check typo"), ContainSubstring("Error"), ContainSubstring("parse")))
	})

	It("asks a Prometheus over TLS with the credentials of a Secret in configward's namespace, and reads no other Secret", func() {
		const password = "pw-never-shown-4711"
		secure, err := env.StartPrometheus(framework.PrometheusOptions{Targets: []string{app.Address()}, TLS: true,
			BasicAuth: &framework.BasicAuth{Username: "configward", Password: password}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(secure.Stop)
		creds := func(ns, name, labelled string) string {
			return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s, labels: {configward.dev/analysis-credentials: %q}}\nstringData:\n  username: configward\n  password: %s\n  ca.crt: |\n%s",
				name, ns, labelled, password, indent(string(secure.CA), 4))
		}
		apply(creds(framework.Namespace, "e2e-prometheus-creds", "true"), creds(framework.Namespace, "e2e-unlabelled-creds", "no"))
		DeferCleanup(func() {
			env.Kubectl("", "delete", "secret", "e2e-prometheus-creds", "e2e-unlabelled-creds", "-n", framework.Namespace, "--ignore-not-found")
		})
		two := "waves:\n- name: canary\n  selector: {matchLabels: {configward.dev/wave: canary}}\n- name: rest\nsoakSeconds: 2\n"
		check := func(secret string) string {
			return fmt.Sprintf("analysis:\n  prometheus: {address: %q, secretRef: {name: %s}}\n  checks:\n  - name: error-ratio\n    query: '%s'\n    max: 0.05\n    interval: 2s\n",
				secure.URL, secret, errorRatioQuery)
		}
		ns := analysisNamespace("tls", two+check("e2e-prometheus-creds"), 2, map[string]string{policyLabel: "tls"}, applyAll)
		servedApp(app, ns, brokenFails)
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		Expect(checksOf(ns, 0)).To(ConsistOf(HaveField("Result", "Passed")))

		By("a Secret of the same keys in the workload's namespace is not read: the check cannot ask, and says why")
		apply(creds(ns, "prometheus-creds-here", "true"))
		applyPolicy(policyYAML("analysis-tls", "tls", "revisions: {enabled: true}\ndelivery:\n"+indent(two+check("prometheus-creds-here"), 2)))
		apply(configMap(ns, "cfg", map[string]string{"level": "trace"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisInconclusive@canary"))
		d := deliveries(ns, "cfg")[1]
		Expect(d.Status.Message).To(ContainSubstring(fmt.Sprintf("Secret %s/prometheus-creds-here", framework.Namespace)))

		By("a Secret in configward's namespace its owner did not label for Prometheus is not sent anywhere")
		applyPolicy(policyYAML("analysis-tls", "tls", "revisions: {enabled: true}\ndelivery:\n"+indent(two+check("e2e-unlabelled-creds"), 2)))
		apply(configMap(ns, "cfg", map[string]string{"level": "warn"}, nil))
		// The delivery before ended the same way: wait for the new one first.
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 30*time.Second).Should(Equal(3))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisInconclusive@canary"))
		Expect(deliveries(ns, "cfg")[2].Status.Message).To(ContainSubstring("is not labelled configward.dev/analysis-credentials=true"))
		raw := env.Kubectl("", "get", "configdeliveries,events", "-n", ns, "-o", "yaml")
		Expect(raw.Stdout).NotTo(ContainSubstring(password))
	})

	It("calls a webhook check with the wave, and fails the wave after its timeout and retries", func() {
		var (
			mu    sync.Mutex
			calls []map[string]any
			slow  atomic.Bool
		)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var call map[string]any
			_ = json.NewDecoder(r.Body).Decode(&call)
			mu.Lock()
			calls = append(calls, call)
			mu.Unlock()
			if slow.Load() {
				time.Sleep(2 * time.Second)
			}
			_, _ = w.Write([]byte(`{"pass": true, "message": "synthetic checkout works"}`))
		})}
		go func() { _ = srv.Serve(l) }()
		DeferCleanup(srv.Close)
		settings := fmt.Sprintf("waves:\n- name: canary\n  selector: {matchLabels: {configward.dev/wave: canary}}\n- name: rest\nsoakSeconds: 2\n"+
			"analysis:\n  checks:\n  - {name: app-says, webhook: {url: %q, timeoutSeconds: 1}, interval: 2s, onError: Fail}\n", "http://"+l.Addr().String()+"/verify")
		ns := analysisNamespace("webhook", settings, 2, map[string]string{policyLabel: "webhook"}, applyAll)
		apply(configMap(ns, "cfg", map[string]string{"level": "a"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		Expect(checksOf(ns, 0)).To(ConsistOf(And(HaveField("Result", "Passed"), HaveField("Message", ContainSubstring("synthetic checkout works")))))
		mu.Lock()
		first := calls[0]
		mu.Unlock()
		Expect(first).To(And(HaveKeyWithValue("namespace", ns), HaveKeyWithValue("check", "app-says"), HaveKeyWithValue("wave", "canary"),
			HaveKeyWithValue("workloads", ConsistOf(HaveKeyWithValue("name", "app-0"))), HaveKeyWithValue("pods", ConsistOf(HavePrefix("app-0-")))))

		By("a webhook slower than its timeout: three attempts, then the wave fails")
		slow.Store(true)
		mu.Lock()
		calls = nil
		mu.Unlock()
		apply(configMap(ns, "cfg", map[string]string{"level": "b"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisFailed@canary"))
		Expect(deliveries(ns, "cfg")[1].Status.Message).To(ContainSubstring("check app-says (webhook http://"))
		mu.Lock()
		defer mu.Unlock()
		Expect(calls).To(HaveLen(3), "one measurement: three attempts")
	})

	It("lets a break-glass write skip approvals but not the waves and their checks, unless it asks for an immediate delivery", func() {
		tag := "breakglass"
		ns := analysisNamespace(tag, "waves:\n- name: canary\n  selector: {matchLabels: {configward.dev/wave: canary}}\n  approval: true\n- name: rest\n  approval: true\nsoakSeconds: 2\n"+
			errorCheck(prom.URL, 0.05), 2, map[string]string{policyLabel: tag, changeControlLabel: "on"}, asPipeline)
		servedApp(app, ns, brokenFails)
		Eventually(func() int {
			return as(human, "", "-n", ns, "patch", "configmap", "cfg", "--dry-run=server", "--type=merge", "-p", `{"data":{"level":"x"}}`).ExitCode
		}, 30*time.Second, 200*time.Millisecond).Should(Equal(1), "the change-control webhook never enforced")

		By("a break-glass write: no approval, but the canary's check fails it")
		res := as(human, "", "-n", ns, "patch", "configmap", "cfg", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-9 hotfix"}},"data":{"level":"broken"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/AnalysisFailed@canary"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Spec.BreakGlass).To(Equal(&v1alpha1.BreakGlassDelivery{Reason: "INC-9 hotfix"}))
		Expect(d.Status.History).To(ContainElement(And(HaveField("What", v1alpha1.HistoryApprovalSkipped), HaveField("Wave", "canary"))))
		Expect(patched(deploymentPatches(ns))).To(ConsistOf("app-0"))

		By("nobody but configward changes what a record saw")
		res = env.Kubectl("", "-n", ns, "annotate", "configdelivery", d.Name, "--overwrite", "configward.dev/break-glass-seen=other")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("only spec.request may be changed"))

		By("asking for an immediate delivery needs a new break-glass reason")
		res = as(human, "", "-n", ns, "annotate", "configmap", "cfg", "configward.dev/break-glass-delivery=Immediate")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("outside the pipeline"))

		By("with a new reason and the immediate request: every wave at once, no checks, recorded")
		res = as(human, "", "-n", ns, "patch", "configmap", "cfg", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-10 revert","configward.dev/break-glass-delivery":"Immediate"}},"data":{"level":"debug"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("immediate delivery asked for"))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		d = deliveries(ns, "cfg")[1]
		Expect(d.Spec.BreakGlass).To(Equal(&v1alpha1.BreakGlassDelivery{Reason: "INC-10 revert", Immediate: true}))
		Expect(d.Status.Waves[0].StartedAt.Time).To(Equal(d.Status.Waves[1].StartedAt.Time), "every wave started at once")
		Expect(d.Status.Waves[0].Checks).To(BeEmpty())
		Expect(d.Status.Waves[1].Checks).To(BeEmpty())

		By("the pipeline's next change, the annotations left on the object, waits for approval again")
		asPipeline(configMap(ns, "cfg", map[string]string{"level": "trace"},
			map[string]string{"configward.dev/break-glass": "INC-10 revert", "configward.dev/break-glass-delivery": "Immediate"}))
		Eventually(latestDelivery(ns, "cfg"), rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@canary"))
		Expect(deliveries(ns, "cfg")[2].Spec.BreakGlass).To(BeNil())
	})
})

// patched lists the Deployments deploymentPatches found patched.
func patched(m map[string][]time.Time) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
