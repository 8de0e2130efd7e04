package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/test/framework"
)

// These specs gate waves on what the application says: a real Prometheus
// server (built from its module by `make prometheus`) scrapes the request
// counters the test serves for each pod cluster runs, as the application
// would, with an error ratio that depends on the content the pod reads
// (served); the checks query it.

// errorRatioQuery is the check's query: the share of 5xx answers of the
// group measured, over the last 5 s.
const errorRatioQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",code="500",pod=~"{{ .Pods }}"}[5s])) / sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[5s]))`

// analysisWaves: app-0 is the canary, then half of the three others, then
// the last, each checked with analysis.
func analysisWaves(onFailure v1alpha1.FailurePolicy, analysis *v1alpha1.Analysis) v1alpha1.DeliverySettings {
	return v1alpha1.DeliverySettings{
		Waves:                   []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "early", Percent: new(int32(50))}, {Name: "rest"}},
		ProgressDeadlineSeconds: 120, SoakSeconds: new(int32(1)), OnFailure: onFailure, Analysis: analysis,
	}
}

// twoWaves: app-0 is the canary, the other the rest, each checked with
// analysis.
func twoWaves(analysis *v1alpha1.Analysis) v1alpha1.DeliverySettings {
	return v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "rest"}}, SoakSeconds: new(int32(1)), Analysis: analysis}
}

// analysisNamespace is a deliveryNamespace of n Deployments, app-0 the
// canary, whose pods count as available once ready for 3 s, as in the
// whole-cluster specs, so that Prometheus has scraped a new pod a few
// times before its checks measure it; more sets more of the policy.
func analysisNamespace(name string, settings v1alpha1.DeliverySettings, n int, more ...func(*v1alpha1.ConfigPolicySpec)) (string, *corev1.ConfigMap) {
	return deliveryNamespace(name, settings, world{n: n, app: runs, minReadySeconds: 3, policy: func(s *v1alpha1.ConfigPolicySpec) {
		for _, f := range more {
			f(s)
		}
	}})
}

// manyChanges lets a spec change its config more often than a ConfigMap
// may before it counts as flapping (3 changes in 10 minutes by default):
// each step of it is a delivery of its own.
func manyChanges(s *v1alpha1.ConfigPolicySpec) {
	s.Rollouts.Flapping = &v1alpha1.FlappingSettings{Changes: 20, Window: metav1.Duration{Duration: 10 * time.Minute}}
}

// errorCheck is a check of errorRatioQuery at most max, every 3 s, asking
// the Prometheus at address; with adds to it. A new pod's first
// measurement is then 6 s after it is ready (3 s to be available, 3 s to
// the first measurement): Prometheus has a rate of it about 4 s after it
// first serves.
func errorCheck(address string, max float64, with ...func(*v1alpha1.AnalysisCheck)) *v1alpha1.Analysis {
	c := v1alpha1.AnalysisCheck{Name: "error-ratio", Query: errorRatioQuery, Max: &max, Interval: metav1.Duration{Duration: 3 * time.Second}}
	for _, f := range with {
		f(&c)
	}
	return &v1alpha1.Analysis{Prometheus: &v1alpha1.PrometheusSource{Address: address}, Checks: []v1alpha1.AnalysisCheck{c}}
}

// served plays the application of every running pod of ns for
// Prometheus: each serves 20 requests a second, and errorRatio (of the
// content it reads) says which share of them fail. The counters stop with
// the spec.
func served(m *framework.AppMetrics, ns string, errorRatio func(content string) float64) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		serving := map[string]bool{}
		for ctx.Err() == nil {
			var pods corev1.PodList
			config, read := readConfig(ctx, ns)
			if read && env.Client.List(ctx, &pods, client.InNamespace(ns)) == nil {
				live := map[string]bool{}
				for i := range pods.Items {
					p := &pods.Items[i]
					content, ok := config.contentOf(p)
					if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || !ok {
						continue
					}
					live[p.Name] = true
					m.SetPod(ns, p.Name, 20, errorRatio(content))
				}
				for name := range serving {
					if !live[name] {
						m.RemovePod(ns, name)
					}
				}
				serving = live
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	DeferCleanup(func() { cancel(); wg.Wait() })
}

// brokenFails: pods reading "broken" fail half their requests.
func brokenFails(content string) float64 {
	if content == "broken" {
		return 0.5
	}
	return 0
}

// checksOf is the checks of wave i of the newest delivery of cfg in ns.
func checksOf(ns string, i int) []v1alpha1.CheckStatus {
	d := deliveries(ns, "cfg")
	return d[len(d)-1].Status.Waves[i].Checks
}

// asYAML is the objects of ns of the lists given, as `kubectl get -o yaml`
// shows them.
func asYAML(ns string, lists ...client.ObjectList) string {
	out := ""
	for _, l := range lists {
		Expect(env.Client.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		y, err := yaml.Marshal(l)
		Expect(err).NotTo(HaveOccurred())
		out += string(y)
	}
	return out
}

var _ = Describe("analysis of deliveries", Ordered, ContinueOnFailure, func() {
	var (
		metrics *framework.AppMetrics
		prom    *framework.PrometheusServer
	)
	BeforeAll(func() {
		framework.RequirePrometheus(GinkgoT())
		var err error
		metrics, err = framework.StartAppMetrics()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(metrics.Close)
		prom, err = env.StartPrometheus(framework.PrometheusOptions{Targets: []string{metrics.Address()}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(prom.Stop)
	})

	It("halts and rolls back a canary whose error ratio rises, the others untouched; the same check passes a good change", func() {
		ns, cm := analysisNamespace("analysis-metric", analysisWaves(v1alpha1.FailureRollback, errorCheck(prom.URL, 0.05)), 4)
		served(metrics, ns, brokenFails)
		before := snapshotsNamed(ns, "app-0")()
		setValue(cm, "broken")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisFailed@canary"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.Message).To(And(ContainSubstring("check error-ratio"), ContainSubstring(`http_requests_total`), ContainSubstring("> max 0.05"),
			ContainSubstring("rolled back")))
		Expect(d.Status.History).To(ContainElement(And(HaveField("What", v1alpha1.HistoryCheckFailed), HaveField("Message", ContainSubstring("> max 0.05")))))
		Expect(d.Status.Waves[0].Checks).To(ConsistOf(And(HaveField("Result", "Failed"), HaveField("Failures", BeNumerically("==", 1)), HaveField("Value", HavePrefix("0.")))))
		Eventually(snapshotsNamed(ns, "app-0"), 10*time.Second).Should(Equal(before))
		Eventually(reads(ns, "app-0"), 10*time.Second).Should(ConsistOf("info"))
		Consistently(patched(ns), 2*time.Second, 500*time.Millisecond).Should(ConsistOf("app-0"), "only the canary was moved")
		Eventually(events(ns, "cfg", "DeliveryHalted"), 10*time.Second).Should(ContainElement(ContainSubstring("> max 0.05")))
		Expect(statusTable(ns)).To(ContainSubstring("failed its analysis: check error-ratio"))
		Eventually(func() string { return asYAML(ns, &openreports.ReportList{}) }, 10*time.Second, 200*time.Millisecond).
			Should(And(ContainSubstring("> max 0.05"), ContainSubstring("check/error-ratio")), "the canary's Report says why")

		By("a good change: the check measures each wave below its threshold and the delivery completes")
		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "cfg"), 90*time.Second, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		for i := range 3 {
			Expect(checksOf(ns, i)).To(ConsistOf(And(HaveField("Result", "Passed"), HaveField("Failures", BeNumerically("==", 0)),
				HaveField("Measurements", BeNumerically(">=", 1)))), "wave %d", i)
		}
	})

	It("compares the canary with the consumers not reached yet: errors everyone has pass, errors only the canary has fail", func() {
		var dependencyDown atomic.Bool
		ns, cm := analysisNamespace("analysis-control", analysisWaves(v1alpha1.FailureHalt, errorCheck(prom.URL, 0.05, func(c *v1alpha1.AnalysisCheck) {
			c.CompareTo, c.Tolerance = v1alpha1.CompareToRest, new(0.05)
		})), 4)
		served(metrics, ns, func(content string) float64 {
			if dependencyDown.Load() {
				return 0.5
			}
			return brokenFails(content)
		})
		errorRates := func(agg string) func() (float64, error) {
			return func() (float64, error) {
				v, _, err := prom.Query(context.Background(), fmt.Sprintf(`%s(rate(http_requests_total{namespace=%q,code="500"}[5s]))`, agg, ns))
				return v, err
			}
		}
		By("a shared dependency fails for every pod: the canary and early waves pass against the rest; the last wave, with no one left to compare with, is judged by max")
		dependencyDown.Store(true)
		Eventually(errorRates("min"), 30*time.Second, 500*time.Millisecond).Should(BeNumerically(">", 1))
		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "cfg"), 90*time.Second, 200*time.Millisecond).Should(Equal("Halted/AnalysisFailed@rest"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.History).To(ContainElements(
			And(HaveField("What", v1alpha1.HistoryWaveCompleted), HaveField("Wave", "canary")),
			And(HaveField("What", v1alpha1.HistoryWaveCompleted), HaveField("Wave", "early"))))
		Expect(d.Status.Waves[0].Checks[0].Control).NotTo(BeEmpty(), "the canary was measured against the rest")
		Expect(d.Status.Message).To(ContainSubstring("no consumer left to compare with"))

		By("the dependency is back and a bad change raises errors on the canary alone: it fails against the rest")
		dependencyDown.Store(false)
		// Until the rest's errors are out of the query's window, a canary
		// failing at the same rate would pass against them.
		Eventually(errorRates("max"), 30*time.Second, 500*time.Millisecond).Should(BeZero())
		setValue(cm, "broken")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisFailed@canary"))
		Expect(deliveries(ns, "cfg")[1].Status.Message).To(ContainSubstring("> rest"))
	})

	It("keeps checking through the bake after the last wave and rolls every wave back when it fails", func() {
		var latent atomic.Bool
		settings := analysisWaves(v1alpha1.FailureRollback, errorCheck(prom.URL, 0.05))
		settings.BakeSeconds = new(int32(30))
		ns, cm := analysisNamespace("analysis-bake", settings, 4)
		served(metrics, ns, func(content string) float64 {
			if content == "latent" && latent.Load() {
				return 0.5
			}
			return 0
		})
		before := map[string]string{}
		for i := range 4 {
			before[fmt.Sprintf("app-%d", i)] = snapshotsNamed(ns, fmt.Sprintf("app-%d", i))()
		}
		setValue(cm, "latent")
		Eventually(latestDelivery(ns, "cfg"), 90*time.Second, 200*time.Millisecond).Should(Equal("Progressing/Baking@rest"))
		latent.Store(true)
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisFailed@rest"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.RolledBack).To(BeTrue())
		Expect(d.Status.Message).To(ContainSubstring("the bake after the last wave failed its analysis"))
		Expect(d.Status.Bake.Checks).To(ContainElement(HaveField("Result", "Failed")))
		for name, snap := range before {
			Eventually(snapshotsNamed(ns, name), 10*time.Second).Should(Equal(snap), name)
			Eventually(reads(ns, name), 10*time.Second).Should(ConsistOf("info"), name)
		}
	})

	It("does what each check says with no data, an unreachable Prometheus and a query error, and records it", func() {
		noData := &v1alpha1.Analysis{Prometheus: &v1alpha1.PrometheusSource{Address: prom.URL}, Checks: []v1alpha1.AnalysisCheck{{Name: "traffic",
			Query: `sum(rate(nothing_total{pod=~"{{ .Pods }}"}[10s]))`, Min: new(1.0), Interval: metav1.Duration{Duration: 2 * time.Second}}}}
		ns, cm := analysisNamespace("analysis-nodata", twoWaves(noData), 2)
		By("no data, inconclusive by default: halted for a person, nothing rolled back; promote moves it on")
		setValue(cm, "a")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisInconclusive@canary"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.Message).To(ContainSubstring("NoData"))
		Expect(d.Status.RolledBack).To(BeFalse())
		ask(ns, "cfg", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "cfg"), 10*time.Second, 100*time.Millisecond).Should(HaveSuffix("@rest"))

		By("an unreachable Prometheus with onError: Fail fails the wave")
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		unreachable := "http://" + closed.Addr().String()
		Expect(closed.Close()).To(Succeed())
		setPolicy("analysis-nodata", func(s *v1alpha1.ConfigPolicySpec) {
			s.Delivery.Analysis = errorCheck(unreachable, 0.05, func(c *v1alpha1.AnalysisCheck) { c.OnError = v1alpha1.InconclusiveFail })
		})
		setValue(cm, "b")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisFailed@canary"))
		Expect(deliveries(ns, "cfg")[1].Status.Message).To(And(ContainSubstring("Error"), ContainSubstring(closed.Addr().String())))

		By("a query Prometheus refuses, inconclusive: halted, with Prometheus's own error")
		setPolicy("analysis-nodata", func(s *v1alpha1.ConfigPolicySpec) {
			s.Delivery.Analysis = &v1alpha1.Analysis{Prometheus: &v1alpha1.PrometheusSource{Address: prom.URL}, Checks: []v1alpha1.AnalysisCheck{{Name: "typo",
				Query: `sum(rate(http_requests_total{pod=~"{{ .Pods }}"}[10s])`, Max: new(1.0), Interval: metav1.Duration{Duration: 2 * time.Second}}}}
		})
		setValue(cm, "c")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisInconclusive@canary"))
		Expect(deliveries(ns, "cfg")[2].Status.Message).To(And(ContainSubstring("check typo"), ContainSubstring("Error"), ContainSubstring("parse")))
	})

	It("asks a Prometheus over TLS with the credentials of a Secret in configward's namespace, and reads no other Secret", func() {
		const password = "pw-never-shown-4711"
		secure, err := env.StartPrometheus(framework.PrometheusOptions{Targets: []string{metrics.Address()}, TLS: true,
			BasicAuth: &framework.BasicAuth{Username: "configward", Password: password}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(secure.Stop)
		creds := func(ns, name, labelled string, addresses ...string) *corev1.Secret {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"configward.dev/analysis-credentials": labelled}},
				StringData: map[string]string{"username": "configward", "password": password, "ca.crt": string(secure.CA)}}
			if len(addresses) > 0 {
				s.Annotations = map[string]string{v1alpha1.AnalysisAddressesAnnotation: addresses[0]}
			}
			return s
		}
		labelled, unlabelled := creds(framework.Namespace, "controllers-prometheus-creds", "true", "127.0.0.0/8"), creds(framework.Namespace, "controllers-unlabelled-creds", "no", "127.0.0.0/8")
		// Labelled for analysis, but naming no address, or another one.
		nowhere, elsewhere := creds(framework.Namespace, "controllers-nowhere-creds", "true"), creds(framework.Namespace, "controllers-elsewhere-creds", "true", "10.0.0.0/8, prometheus.monitoring.svc")
		create(labelled, unlabelled, nowhere, elsewhere)
		DeferCleanup(func() {
			for _, s := range []*corev1.Secret{labelled, unlabelled, nowhere, elsewhere} {
				Expect(env.Client.Delete(ctx, s)).To(Succeed())
			}
		})
		check := func(secret string) *v1alpha1.Analysis {
			a := errorCheck(secure.URL, 0.05)
			a.Prometheus.SecretRef = &v1alpha1.SecretReference{Name: secret}
			return a
		}
		ns, cm := analysisNamespace("analysis-tls", twoWaves(check(labelled.Name)), 2, manyChanges)
		served(metrics, ns, brokenFails)
		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(checksOf(ns, 0)).To(ConsistOf(HaveField("Result", "Passed")))

		By("a Secret of the same keys in the workload's namespace is not read: the check cannot ask, and says why")
		create(creds(ns, "prometheus-creds-here", "true"))
		setPolicy("analysis-tls", func(s *v1alpha1.ConfigPolicySpec) { s.Delivery.Analysis = check("prometheus-creds-here") })
		setValue(cm, "trace")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisInconclusive@canary"))
		Expect(deliveries(ns, "cfg")[1].Status.Message).To(ContainSubstring(fmt.Sprintf("Secret %s/prometheus-creds-here", framework.Namespace)))

		By("a Secret in configward's namespace its owner did not label for Prometheus is not sent anywhere")
		setPolicy("analysis-tls", func(s *v1alpha1.ConfigPolicySpec) { s.Delivery.Analysis = check(unlabelled.Name) })
		setValue(cm, "warn")
		// The delivery before ended the same way: wait for the new one first.
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 10*time.Second).Should(Equal(3))
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisInconclusive@canary"))
		Expect(deliveries(ns, "cfg")[2].Status.Message).To(ContainSubstring("is not labelled configward.dev/analysis-credentials=true"))

		By("a labelled Secret that names no address its credentials may go to is sent nowhere")
		setPolicy("analysis-tls", func(s *v1alpha1.ConfigPolicySpec) { s.Delivery.Analysis = check(nowhere.Name) })
		setValue(cm, "error")
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 10*time.Second).Should(Equal(4))
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisInconclusive@canary"))
		Expect(deliveries(ns, "cfg")[3].Status.Message).To(ContainSubstring("names no addresses its credentials may be sent to (annotation configward.dev/analysis-addresses)"))

		By("a policy's author cannot send a Secret's credentials to an address its list does not admit")
		setPolicy("analysis-tls", func(s *v1alpha1.ConfigPolicySpec) { s.Delivery.Analysis = check(elsewhere.Name) })
		setValue(cm, "fatal")
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 10*time.Second).Should(Equal(5))
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisInconclusive@canary"))
		Expect(deliveries(ns, "cfg")[4].Status.Message).To(ContainSubstring(
			fmt.Sprintf("may not connect to 127.0.0.1: the Secret %s/%s's configward.dev/analysis-addresses does not admit it", framework.Namespace, elsewhere.Name)))
		Expect(asYAML(ns, &v1alpha1.ConfigDeliveryList{}, &eventsv1.EventList{}, &corev1.EventList{})).NotTo(ContainSubstring(password))
	})

	It("calls a webhook check with the wave, and fails the wave after its timeout and retries", func() {
		var (
			mu    sync.Mutex
			calls []map[string]any
			slow  atomic.Bool
		)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		const token = "hook-token-never-shown-4712"
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: framework.Namespace, Name: "controllers-webhook-creds",
			Labels:      map[string]string{v1alpha1.AnalysisCredentialsLabel: "true"},
			Annotations: map[string]string{v1alpha1.AnalysisAddressesAnnotation: "127.0.0.1"}}, StringData: map[string]string{"token": token}}
		create(secret)
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, secret)).To(Succeed()) })
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// webhook.secretRef's token comes as a bearer token.
			if r.Header.Get("Authorization") != "Bearer "+token {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
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
		ns, cm := analysisNamespace("analysis-webhook", twoWaves(&v1alpha1.Analysis{Checks: []v1alpha1.AnalysisCheck{{Name: "app-says",
			Webhook:  &v1alpha1.WebhookCheck{URL: "http://" + l.Addr().String() + "/verify", TimeoutSeconds: 1, SecretRef: &v1alpha1.SecretReference{Name: secret.Name}},
			Interval: metav1.Duration{Duration: 2 * time.Second},
			OnError:  v1alpha1.InconclusiveFail}}}), 2)
		setValue(cm, "a")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
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
		setValue(cm, "b")
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisFailed@canary"))
		Expect(deliveries(ns, "cfg")[1].Status.Message).To(ContainSubstring("check app-says (webhook http://"))
		mu.Lock()
		defer mu.Unlock()
		Expect(calls).To(HaveLen(3), "one measurement: three attempts")
		Expect(asYAML(ns, &v1alpha1.ConfigDeliveryList{}, &eventsv1.EventList{}, &corev1.EventList{})).NotTo(ContainSubstring(token))
	})

	It("lets a break-glass write skip approvals but not the waves and their checks, unless it asks for an immediate delivery", func() {
		settings := v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave, Approval: true}, {Name: "rest", Approval: true}},
			SoakSeconds: new(int32(1)), Analysis: errorCheck(prom.URL, 0.05)}
		// A policy that names the pipeline puts the namespace under change
		// control: only there is a break-glass write recorded, and honoured.
		ns, cm := analysisNamespace("analysis-breakglass", settings, 2, manyChanges, func(s *v1alpha1.ConfigPolicySpec) {
			s.Pipeline.ServiceAccounts = []string{"ci/deployer"}
		})
		served(metrics, ns, brokenFails)
		write := func(value string, annotations map[string]string) {
			Expect(env.Client.Get(ctx, clientKey(cm), cm)).To(Succeed())
			cm.Annotations, cm.Data[configKey] = annotations, value
			Expect(env.Client.Update(ctx, cm)).To(Succeed())
		}
		// breakGlass writes value with a new reason as the admission
		// webhook leaves such a write (this tier runs no webhook): sealed to
		// its content (admission.BreakGlassSeals).
		breakGlass := func(value string, annotations map[string]string) {
			key, err := env.HashKey(ctx)
			Expect(err).NotTo(HaveOccurred())
			data := map[string]string{}
			for k, v := range cm.Data {
				data[k] = v
			}
			data[configKey] = value
			content := revision.SnapshotName(key, ns, refs.ConfigMap, cm.Name, digest.Content(digest.KeyDigests(data, cm.BinaryData), nil))
			annotations[v1alpha1.BreakGlassSealAnnotation] = delivery.BreakGlassSeal(key, content, annotations[v1alpha1.BreakGlassAnnotation],
				annotations[v1alpha1.BreakGlassDeliveryAnnotation] == v1alpha1.BreakGlassImmediate)
			write(value, annotations)
		}

		By("a break-glass write (change control let it through and recorded who): no approval, but the canary's check fails it")
		breakGlass("broken", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-9 hotfix"})
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(Equal("Halted/AnalysisFailed@canary"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Spec.BreakGlass).To(Equal(&v1alpha1.BreakGlassDelivery{Reason: "INC-9 hotfix"}))
		Expect(d.Status.History).To(ContainElement(And(HaveField("What", v1alpha1.HistoryApprovalSkipped), HaveField("Wave", "canary"))))
		Expect(patched(ns)()).To(ConsistOf("app-0"))

		By("with a new reason and the immediate request: every wave at once, no checks, recorded")
		breakGlass("debug", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-10 revert", v1alpha1.BreakGlassDeliveryAnnotation: v1alpha1.BreakGlassImmediate})
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		d = deliveries(ns, "cfg")[1]
		Expect(d.Spec.BreakGlass).To(Equal(&v1alpha1.BreakGlassDelivery{Reason: "INC-10 revert", Immediate: true}))
		Expect(d.Status.Waves[0].StartedAt.Time).To(Equal(d.Status.Waves[1].StartedAt.Time), "every wave started at once")
		Expect(d.Status.Waves[0].Checks).To(BeEmpty())
		Expect(d.Status.Waves[1].Checks).To(BeEmpty())

		By("the pipeline's next change, the annotations left on the object, waits for approval again")
		write("trace", cm.Annotations)
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@canary"))
		Expect(deliveries(ns, "cfg")[2].Spec.BreakGlass).To(BeNil())

		By("a reason and the immediate request sealed to the content now, with no change: the pipeline's later change is not immediate")
		Expect(env.Client.Get(ctx, clientKey(cm), cm)).To(Succeed())
		breakGlass(cm.Data[configKey], map[string]string{v1alpha1.BreakGlassAnnotation: "INC-11 pre-armed", v1alpha1.BreakGlassDeliveryAnnotation: v1alpha1.BreakGlassImmediate})
		Consistently(func() int { return len(deliveries(ns, "cfg")) }, 3*time.Second).Should(Equal(3), "no content change, no delivery")
		write("warn", cm.Annotations)
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 30*time.Second).Should(Equal(4))
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@canary"))
		Expect(deliveries(ns, "cfg")[3].Spec.BreakGlass).To(BeNil())
	})
})
