package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// BenchmarkDeliveryAnalysis measures what a delivery's analysis checks cost
// in time and in queries: for each configuration of a small sweep (no
// check; one query check every 2, 5 or 10 s; the same compared with the
// rest; each with soakSeconds 0 and 10; and every 4 s with soak 10) it
// delivers one content change of a ConfigMap that 10 one-replica
// Deployments mount, in three waves (a canary by label, 30 %, the rest), on
// a whole cluster (kube-controller-manager, kube-scheduler, kwok nodes on
// which the pods run), and records each wave's times from the
// ConfigDelivery's status and its measurements. A real Prometheus scrapes,
// every second, the request counters the test serves for every running pod
// (20 requests a second, none failing), as the e2e analysis specs do; the
// checks reach it through a counting proxy on loopback, one path per
// configuration, so that the queries each configuration sent are counted
// where they arrive, and Prometheus's own count of instant queries is read
// from its /metrics before and after.
//
// The configurations run in two lanes side by side, each lane one delivery
// at a time, to keep the run under 10 minutes. The controller's status
// writes of each record, and those refused for a stale record, come from
// the API server's audit log. The results go to $CONFIGWARD_BENCH_OUT
// (default bin/bench-analysis) as results.json and results.md; `make
// bench-analysis` draws them. A load run: use -benchtime=1x.
func BenchmarkDeliveryAnalysis(b *testing.B) {
	framework.RequireControlPlane(b)
	framework.RequirePrometheus(b)
	for range b.N {
		analysisRun(b)
	}
}

// analysisErrorRatio is the check's query, the e2e specs' errorRatioQuery:
// the share of 5xx answers of the group measured over the last 10 s.
const analysisErrorRatio = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",code="500",pod=~"{{ .Pods }}"}[10s])) / sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[10s]))`

const (
	// analysisWorkloads per configuration: the canary, 3 (30 % of the 9
	// left, rounded) and the rest.
	analysisWorkloads = 10
	// analysisRPS is what every running pod serves, none failing.
	analysisRPS = 20
	// analysisMinReady: a pod counts as available 3 s after it is ready
	// (as in the e2e specs), by which time Prometheus has scraped it twice
	// and rate() over its series has a value: a wave healthy before
	// Prometheus knows its new pods would measure no data.
	analysisMinReady = 3
	// analysisDeadline bounds each delivery.
	analysisDeadline = 4 * time.Minute
)

// analysisConfig is one configuration of the sweep.
type analysisConfig struct {
	Name      string `json:"name"`
	Label     string `json:"label"`
	Interval  int    `json:"intervalSeconds"` // 0: no check
	CompareTo bool   `json:"compareTo"`
	Soak      int    `json:"soakSeconds"`
	// lane runs it: 0 or 1, balanced so that both end about together.
	lane int
}

// analysisSweep: no check, then one query check every 2, 5 or 10 s, then
// the same compared with the rest, each with soakSeconds 0 and 10; and
// one check every 4 s with soak 10, a soak that is no multiple of the
// interval.
func analysisSweep() []analysisConfig {
	var out []analysisConfig
	for _, soak := range []int{0, 10} {
		out = append(out, analysisConfig{Name: fmt.Sprintf("none-soak%d", soak), Label: "no checks", Soak: soak})
		for _, rest := range []bool{false, true} {
			intervals := []int{2, 5, 10}
			if soak == 10 && !rest {
				intervals = []int{2, 4, 5, 10}
			}
			for _, interval := range intervals {
				c := analysisConfig{Name: fmt.Sprintf("q%d-soak%d", interval, soak), Label: fmt.Sprintf("%ds", interval),
					Interval: interval, CompareTo: rest, Soak: soak}
				if rest {
					c.Name, c.Label = fmt.Sprintf("q%d-rest-soak%d", interval, soak), c.Label+" vs rest"
				}
				out = append(out, c)
			}
		}
	}
	// A soak-0 delivery takes about half a soak-10 one: lane 0 takes the
	// soak-0 ones and the 4 s check, lane 1 the other soak-10 ones.
	for i := range out {
		if out[i].Soak == 10 && out[i].Interval != 4 {
			out[i].lane = 1
		}
	}
	return out
}

// AnalysisWave is one wave of one delivery, from its record.
type AnalysisWave struct {
	Name      string `json:"name"`
	Workloads int    `json:"workloads"`
	// Whole seconds, from the record's timestamps.
	StartedToHealthy   float64 `json:"startedToHealthySeconds"`
	HealthyToCompleted float64 `json:"healthyToCompletedSeconds"`
	StartedToCompleted float64 `json:"startedToCompletedSeconds"`
	// Measurements of the wave's checks (the sum over its checks).
	Measurements int `json:"measurements"`
	// Queries the measurements sent: one each, two with compareTo: rest
	// where consumers are left to compare with (not the last wave).
	Queries int `json:"queries"`
}

// AnalysisResult is one configuration's delivery.
type AnalysisResult struct {
	analysisConfig
	Waves []AnalysisWave `json:"waves"`
	// DeliverySeconds: the record's start to its last wave's completion.
	DeliverySeconds float64 `json:"deliverySeconds"`
	// MeanWaveSeconds: started → completed, averaged over the waves.
	MeanWaveSeconds float64 `json:"meanWaveSeconds"`
	// MeanQueriesPerWave: Queries averaged over the waves.
	MeanQueriesPerWave float64 `json:"meanQueriesPerWave"`
	// ProxiedQueries: the queries the counting proxy passed to
	// Prometheus for this configuration (the whole delivery).
	ProxiedQueries int `json:"proxiedQueries"`
	// StatusWrites and StatusConflicts: the controller's updates of the
	// record's status, and those the API server refused because the
	// controller wrote from a record older than the stored one (409), from
	// the audit log. A refused write loses what its look measured.
	StatusWrites    int `json:"statusWrites"`
	StatusConflicts int `json:"statusConflicts"`
	// Error: why the delivery did not succeed, if it did not.
	Error string `json:"error,omitempty"`
}

// AnalysisReport is results.json.
type AnalysisReport struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	// RunSeconds: the whole run, the cluster's start included.
	RunSeconds float64 `json:"runSeconds"`
	// Workloads per configuration, one replica each.
	Workloads int              `json:"workloads"`
	Results   []AnalysisResult `json:"results"`
	// Prometheus's own counts over the deliveries (every configuration's,
	// and nothing else queried it meanwhile): HTTP requests to
	// /api/v1/query and the engine's evaluations
	// (prometheus_engine_query_duration_seconds_count{slice="inner_eval"}),
	// against the sum of the records' queries.
	PrometheusHTTPQueries   float64 `json:"prometheusHTTPQueries"`
	PrometheusEngineQueries float64 `json:"prometheusEngineQueries"`
	RecordedQueries         int     `json:"recordedQueries"`
}

func analysisRun(b *testing.B) {
	b.StopTimer()
	runStart := time.Now()
	env, err := framework.Start(framework.Options{Webhook: func(o *manager.Webhook) {
		o.ChangeControl.ConfigwardServiceAccounts = []string{framework.ControllerServiceAccount}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	}()
	if err := env.StartCluster(3); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := env.InstallWebhookConfigurations(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := env.StartController(manager.Controller{RolloutBatchWindow: 2 * time.Second, RolloutRate: manager.DefaultRolloutRate}); err != nil {
		b.Fatal(err)
	}
	app, err := framework.StartAppMetrics()
	if err != nil {
		b.Fatal(err)
	}
	defer app.Close()
	prom, err := env.StartPrometheus(framework.PrometheusOptions{Targets: []string{app.Address()}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = prom.Stop() }()
	proxy, err := startQueryCounter(prom.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.close()
	c := env.Client
	sweep := analysisSweep()

	// Every configuration's namespace, policy, ConfigMap and Deployments,
	// all at once: the policies first, so that the webhook stamps the
	// Deployments with revisions from their creation.
	for _, cfg := range sweep {
		if err := c.Create(ctx, analysisPolicy(cfg, proxy.url+"/"+cfg.Name)); err != nil {
			b.Fatal(err)
		}
	}
	if err := waitUntil(ctx, time.Minute, func() (bool, error) {
		for _, cfg := range sweep {
			var p v1alpha1.ConfigPolicy
			if err := c.Get(ctx, client.ObjectKey{Name: "analysis-" + cfg.Name}, &p); err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(p.Status.Conditions, "Ready")
			if cond == nil || cond.Status != metav1.ConditionTrue || p.Status.ObservedGeneration != p.Generation {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		b.Fatalf("the policies are not ready: %v", err)
	}
	time.Sleep(2 * time.Second) // the webhook's cache has the policies
	var g errgroup.Group
	g.SetLimit(10)
	for _, cfg := range sweep {
		ns := "analysis-" + cfg.Name
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"analysis-bench": cfg.Name}}}); err != nil {
			b.Fatal(err)
		}
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"level": "info"}}); err != nil {
			b.Fatal(err)
		}
		for i := range analysisWorkloads {
			g.Go(func() error { return c.Create(ctx, analysisDeployment(ns, i)) })
		}
	}
	time.Sleep(time.Second) // the webhook's cache has the ConfigMaps
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	pods := len(sweep) * analysisWorkloads
	if err := waitUntil(ctx, 5*time.Minute, func() (bool, error) { return rolledOut(ctx, c, pods) }); err != nil {
		b.Fatalf("the Deployments did not roll out: %v", err)
	}
	b.Logf("%d Deployments created and rolled out, %s into the run", pods, time.Since(runStart).Round(time.Second))

	// The application: every running pod serves 20 requests a second.
	playCtx, stopPlaying := context.WithCancel(ctx)
	played := playApp(playCtx, c, app)
	defer func() { stopPlaying(); <-played }()
	// Every pod's series has a rate before the first change.
	if err := waitUntil(ctx, 2*time.Minute, func() (bool, error) {
		v, ok, err := prom.Query(ctx, `count(rate(http_requests_total{code="200"}[10s]))`)
		return err == nil && ok && int(v) >= pods, nil
	}); err != nil {
		b.Fatalf("Prometheus has no rate for every pod: %v", err)
	}
	httpBefore, engineBefore, err := promQueryCounts(ctx, prom.URL)
	if err != nil {
		b.Fatal(err)
	}

	// Two lanes side by side; one delivery at a time in each.
	results := make([]AnalysisResult, len(sweep))
	var lanes sync.WaitGroup
	b.StartTimer()
	for lane := range 2 {
		lanes.Add(1)
		go func() {
			defer lanes.Done()
			for i, cfg := range sweep {
				if cfg.lane == lane {
					results[i] = deliverOnce(ctx, c, cfg)
				}
			}
		}()
	}
	lanes.Wait()
	b.StopTimer()
	httpAfter, engineAfter, err := promQueryCounts(ctx, prom.URL)
	if err != nil {
		b.Fatal(err)
	}

	report := AnalysisReport{Date: time.Now().UTC().Format("2006-01-02"), Machine: analysisMachine(), Workloads: analysisWorkloads,
		PrometheusHTTPQueries: httpAfter - httpBefore, PrometheusEngineQueries: engineAfter - engineBefore}
	seen := proxy.counts()
	time.Sleep(3 * time.Second) // the audit log is written
	statusWrites, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Resource == "configdeliveries" &&
			ev.ObjectRef.Subresource == "status" && ev.Verb == "update" && !ev.DryRun()
	})
	if err != nil {
		b.Fatal(err)
	}
	for i := range results {
		r := &results[i]
		r.ProxiedQueries = seen[r.Name]
		for _, ev := range statusWrites {
			if ev.ObjectRef.Namespace == "analysis-"+r.Name {
				r.StatusWrites++
				if ev.ResponseStatus.Code == http.StatusConflict {
					r.StatusConflicts++
				}
			}
		}
		if r.Error != "" {
			b.Errorf("%s: %s", r.Name, r.Error)
			continue
		}
		for _, w := range r.Waves {
			report.RecordedQueries += w.Queries
		}
		b.ReportMetric(r.MeanWaveSeconds, "s/wave-"+r.Name)
		b.Logf("%s: %s", r.Name, summary(*r))
	}
	report.Results = results
	report.RunSeconds = time.Since(runStart).Round(time.Second).Seconds()
	b.Logf("queries: %d in the records, %d through the proxy, Prometheus: %g HTTP requests to /api/v1/query, %g evaluations",
		report.RecordedQueries, sumValues(seen), report.PrometheusHTTPQueries, report.PrometheusEngineQueries)
	if err := writeAnalysisReport(report); err != nil {
		b.Fatal(err)
	}
}

// analysisPolicy selects cfg's namespace: revisions, three waves, the
// soak, and the check, if any, sent to address.
func analysisPolicy(cfg analysisConfig, address string) *v1alpha1.ConfigPolicy {
	d := &v1alpha1.DeliverySettings{ProgressDeadlineSeconds: 120, SoakSeconds: ptr.To(int32(cfg.Soak)), Waves: []v1alpha1.Wave{
		{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.WaveLabel: "canary"}}},
		{Name: "early", Percent: ptr.To[int32](30)},
		{Name: "rest"},
	}}
	if cfg.Interval > 0 {
		check := v1alpha1.AnalysisCheck{Name: "error-ratio", Query: analysisErrorRatio, Max: ptr.To(0.05),
			Interval: metav1.Duration{Duration: time.Duration(cfg.Interval) * time.Second}}
		if cfg.CompareTo {
			check.CompareTo, check.Tolerance = v1alpha1.CompareToRest, ptr.To(0.05)
		}
		d.Analysis = &v1alpha1.Analysis{Prometheus: &v1alpha1.PrometheusSource{Address: address}, Checks: []v1alpha1.AnalysisCheck{check}}
	}
	return &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "analysis-" + cfg.Name}, Spec: v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"analysis-bench": cfg.Name}},
		Revisions:         v1alpha1.RevisionSettings{Enabled: true},
		Delivery:          d,
	}}
}

// analysisDeployment is app-<i> of ns, one replica mounting ConfigMap cfg;
// app-0 is the canary.
func analysisDeployment(ns string, i int) *appsv1.Deployment {
	name := fmt.Sprintf("app-%d", i)
	labels := map[string]string{"app": name, "bench": "analysis"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas:        ptr.To[int32](1),
		MinReadySeconds: analysisMinReady,
		Selector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
				VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}}},
			Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}},
		}}}}
	if i == 0 {
		d.Labels = map[string]string{v1alpha1.WaveLabel: "canary"}
	}
	return d
}

// rolledOut says whether every Deployment of the benchmark (want of them)
// has rolled out its one replica and its pod is available.
func rolledOut(ctx context.Context, c client.Client, want int) (bool, error) {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list); err != nil {
		return false, err
	}
	done := 0
	for _, d := range list.Items {
		if !strings.HasPrefix(d.Namespace, "analysis-") {
			continue
		}
		s := d.Status
		if s.ObservedGeneration == d.Generation && s.UpdatedReplicas == 1 && s.AvailableReplicas == 1 && s.Replicas == 1 {
			done++
		}
	}
	return done == want, nil
}

// playApp serves, until ctx ends, analysisRPS requests a second without
// errors for every running pod of the benchmark, and takes the series of
// pods that are gone away. The returned channel closes when it stopped.
func playApp(ctx context.Context, c client.Client, app *framework.AppMetrics) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		type key struct{ ns, name string }
		served := map[key]bool{}
		for ctx.Err() == nil {
			var pods corev1.PodList
			if c.List(ctx, &pods, client.MatchingLabels{"bench": "analysis"}) == nil {
				live := map[key]bool{}
				for _, p := range pods.Items {
					if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
						continue
					}
					k := key{p.Namespace, p.Name}
					live[k] = true
					if !served[k] {
						app.SetPod(p.Namespace, p.Name, analysisRPS, 0)
					}
				}
				for k := range served {
					if !live[k] {
						app.RemovePod(k.ns, k.name)
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
	return done
}

// deliverOnce changes cfg's ConfigMap once and waits for its delivery to
// succeed (or to halt, or for analysisDeadline), then reads the record.
func deliverOnce(ctx context.Context, c client.Client, cfg analysisConfig) AnalysisResult {
	r := AnalysisResult{analysisConfig: cfg}
	ns := "analysis-" + cfg.Name
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cfg"}, &cm); err != nil {
		r.Error = err.Error()
		return r
	}
	cm.Data["level"] = "debug"
	if err := c.Update(ctx, &cm); err != nil {
		r.Error = err.Error()
		return r
	}
	var rec v1alpha1.ConfigDelivery
	err := waitUntil(ctx, analysisDeadline, func() (bool, error) {
		var list v1alpha1.ConfigDeliveryList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(list.Items) != 1 {
			return false, nil
		}
		rec = list.Items[0]
		switch rec.Status.State {
		case v1alpha1.DeliverySucceeded:
			return true, nil
		case v1alpha1.DeliveryHalted:
			return false, fmt.Errorf("halted: %s: %s", rec.Status.Reason, rec.Status.Message)
		}
		return false, nil
	})
	if err != nil {
		r.Error = fmt.Sprintf("delivery %s (%s/%s): %v", rec.Name, rec.Status.State, rec.Status.Reason, err)
		return r
	}
	last := len(rec.Status.Waves) - 1
	var first, end time.Time
	for i, w := range rec.Status.Waves {
		if w.StartedAt == nil || w.HealthySince == nil || w.CompletedAt == nil {
			r.Error = fmt.Sprintf("wave %s lacks a time: %+v", w.Name, w)
			return r
		}
		aw := AnalysisWave{Name: w.Name, Workloads: len(w.Workloads),
			StartedToHealthy:   w.HealthySince.Sub(w.StartedAt.Time).Seconds(),
			HealthyToCompleted: w.CompletedAt.Sub(w.HealthySince.Time).Seconds(),
			StartedToCompleted: w.CompletedAt.Sub(w.StartedAt.Time).Seconds()}
		perMeasurement := 1
		if cfg.CompareTo && i < last {
			perMeasurement = 2
		}
		for _, ch := range w.Checks {
			aw.Measurements += int(ch.Measurements)
		}
		aw.Queries = aw.Measurements * perMeasurement
		r.Waves = append(r.Waves, aw)
		r.MeanWaveSeconds += aw.StartedToCompleted
		r.MeanQueriesPerWave += float64(aw.Queries)
		if i == 0 {
			first = w.StartedAt.Time
		}
		end = w.CompletedAt.Time
	}
	if n := float64(len(r.Waves)); n > 0 {
		r.MeanWaveSeconds /= n
		r.MeanQueriesPerWave /= n
	}
	if rec.Status.StartedAt != nil {
		first = rec.Status.StartedAt.Time
	}
	r.DeliverySeconds = end.Sub(first).Seconds()
	return r
}

// waitUntil polls done every 500 ms until it says true, returns an error
// or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("not done within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// queryCounter is a reverse proxy on loopback in front of Prometheus:
// <url>/<name>/... is passed on as /..., and each request to
// /<name>/api/v1/query is counted under name.
type queryCounter struct {
	url    string
	server *http.Server
	mu     sync.Mutex
	n      map[string]int
}

func startQueryCounter(target string) (*queryCounter, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	q := &queryCounter{url: "http://" + l.Addr().String(), n: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	q.server = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if rest == "api/v1/query" {
			q.mu.Lock()
			q.n[name]++
			q.mu.Unlock()
		}
		out := r.Clone(r.Context())
		out.URL.Path, out.URL.RawPath = "/"+rest, ""
		proxy.ServeHTTP(w, out)
	})}
	go func() { _ = q.server.Serve(l) }()
	return q, nil
}

func (q *queryCounter) counts() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.n))
	for k, v := range q.n {
		out[k] = v
	}
	return out
}

func (q *queryCounter) close() { _ = q.server.Close() }

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// promQueryCounts reads Prometheus's own /metrics: the HTTP requests it
// answered at /api/v1/query, and the queries its engine evaluated.
func promQueryCounts(ctx context.Context, base string) (httpQueries, engine float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s/metrics: %s", base, resp.Status)
	}
	found := false
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, perr := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if perr != nil {
			continue
		}
		switch {
		case strings.HasPrefix(series, "prometheus_http_requests_total{") && strings.Contains(series, `handler="/api/v1/query"`):
			httpQueries += v
			found = true
		case strings.HasPrefix(series, "prometheus_engine_query_duration_seconds_count{") && strings.Contains(series, `slice="inner_eval"`):
			engine += v
		}
	}
	if err := s.Err(); err != nil {
		return 0, 0, err
	}
	if !found {
		return 0, 0, errors.New("no prometheus_http_requests_total for /api/v1/query in Prometheus's /metrics")
	}
	return httpQueries, engine, nil
}

func summary(r AnalysisResult) string {
	var parts []string
	for _, w := range r.Waves {
		parts = append(parts, fmt.Sprintf("%s %g+%g s, %d measurements, %d queries", w.Name, w.StartedToHealthy, w.HealthyToCompleted, w.Measurements, w.Queries))
	}
	return fmt.Sprintf("delivery %g s; %s; %d queries through the proxy; %d status writes, %d refused (409)",
		r.DeliverySeconds, strings.Join(parts, "; "), r.ProxiedQueries, r.StatusWrites, r.StatusConflicts)
}

func analysisMachine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s, %s/%s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// writeAnalysisReport writes results.json and results.md to
// $CONFIGWARD_BENCH_OUT, else bin/bench-analysis.
func writeAnalysisReport(r AnalysisReport) error {
	dir := os.Getenv("CONFIGWARD_BENCH_OUT")
	if dir == "" {
		dir = filepath.Join(framework.RepoRoot(), "bin", "bench-analysis")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(analysisMarkdown(r)), 0o644)
}

// analysisMarkdown is the table of results.md: one row per configuration,
// each wave's figures as canary / early / rest.
func analysisMarkdown(r AnalysisReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s; %d one-replica Deployments per configuration, waves canary (1) / early (30 %%) / rest; the whole run took %s.\n\n",
		r.Date, r.Machine, r.Workloads, time.Duration(r.RunSeconds)*time.Second)
	b.WriteString("| check | soak | started → healthy (s) | healthy → completed (s) | wave (s) | mean wave (s) | measurements | queries per wave | queries seen | status writes (409) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Results {
		if x.Error != "" {
			fmt.Fprintf(&b, "| %s | %d s | failed: %s | | | | | | | |\n", x.Label, x.Soak, strings.ReplaceAll(x.Error, "|", `\|`))
			continue
		}
		col := func(f func(AnalysisWave) float64) string {
			var s []string
			for _, w := range x.Waves {
				s = append(s, strconv.FormatFloat(f(w), 'g', -1, 64))
			}
			return strings.Join(s, " / ")
		}
		fmt.Fprintf(&b, "| %s | %d s | %s | %s | %s | %.1f | %s | %s | %d | %d (%d) |\n", x.Label, x.Soak,
			col(func(w AnalysisWave) float64 { return w.StartedToHealthy }),
			col(func(w AnalysisWave) float64 { return w.HealthyToCompleted }),
			col(func(w AnalysisWave) float64 { return w.StartedToCompleted }),
			x.MeanWaveSeconds,
			col(func(w AnalysisWave) float64 { return float64(w.Measurements) }),
			col(func(w AnalysisWave) float64 { return float64(w.Queries) }),
			x.ProxiedQueries, x.StatusWrites, x.StatusConflicts)
	}
	fmt.Fprintf(&b, "\nQueries: %d in the records; Prometheus answered %s requests at /api/v1/query and evaluated %s queries over the deliveries.\n",
		r.RecordedQueries, formatCount(r.PrometheusHTTPQueries), formatCount(r.PrometheusEngineQueries))
	return b.String()
}

func formatCount(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
