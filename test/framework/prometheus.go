package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// A real Prometheus server, which `make prometheus` (a step of `make test`)
// builds from the pinned module test/tools/prometheus without its service
// discoveries (static configs only here), and AppMetrics, the /metrics of
// make-believe application pods for it to scrape: specs set each pod's
// request rate and error ratio and see what PromQL makes of them.

// PrometheusEnvVar names the Prometheus binary; `make test` sets it.
const PrometheusEnvVar = "CONFIGWARD_PROMETHEUS"

// Prometheus returns the Prometheus server binary: $CONFIGWARD_PROMETHEUS
// when set, else the newest build under bin/prometheus-*.
func Prometheus() (bin string, err error) {
	bin = os.Getenv(PrometheusEnvVar)
	if bin == "" {
		builds, _ := filepath.Glob(filepath.Join(RepoRoot(), "bin", "prometheus-*", "prometheus"))
		sort.Slice(builds, func(i, j int) bool { return modTime(builds[i]) > modTime(builds[j]) })
		if len(builds) > 0 {
			bin = builds[0]
		}
	}
	if _, err := os.Stat(bin); bin == "" || err != nil {
		return "", errors.New("the Prometheus server is not built: run `make prometheus` (part of `make test`) or set " + PrometheusEnvVar)
	}
	return bin, nil
}

// RequirePrometheus is RequireControlPlane for the Prometheus server, for
// the tests and specs that run it (GinkgoT() will do).
func RequirePrometheus(t skipper) {
	t.Helper()
	if _, err := Prometheus(); err != nil {
		missing(t, err.Error())
	}
}

// PrometheusOptions configure StartPrometheus.
type PrometheusOptions struct {
	// Targets are the host:port (on 127.0.0.1) whose /metrics one job
	// scrapes every second over http, with honor_labels (a target's
	// namespace and pod labels are kept as they are).
	Targets []string
	// TLS serves https with a certificate for 127.0.0.1 and localhost
	// issued by the Env's CA (a CA of its own when the Env has none);
	// PrometheusServer.CA is that CA.
	TLS bool
	// BasicAuth, when set, is the one user Prometheus lets in: every
	// request, /-/ready included, must carry it.
	BasicAuth *BasicAuth
	// Address is the 127.0.0.1:port to listen on, for a caller that names
	// Prometheus to others before it starts (the demo's controller, while
	// the binary is still being built); empty, a free port.
	Address string
}

// BasicAuth is a user name and password for HTTP basic authentication.
type BasicAuth struct {
	Username, Password string
}

// PrometheusServer is a Prometheus server the Env runs as a child process.
// Stop it through its Component; the Env stops it otherwise.
type PrometheusServer struct {
	*Component
	// URL is http(s)://127.0.0.1:port, its API's base.
	URL string
	// CA is the PEM of the CA its serving certificate is issued by (TLS
	// only; nil otherwise).
	CA []byte
	// Dir holds its configuration, its TSDB and its log.
	Dir string

	auth   *BasicAuth
	client *http.Client
}

// StartPrometheus writes a configuration that scrapes opts.Targets every
// second (evaluation every second too), runs the Prometheus server on a
// free port of 127.0.0.1 with its TSDB in a folder of its own under the
// Env's, and returns once GET /-/ready answers 200.
func (e *Env) StartPrometheus(opts PrometheusOptions) (*PrometheusServer, error) {
	bin, err := Prometheus()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(e.Dir, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(e.Dir, "prometheus-")
	if err != nil {
		return nil, err
	}
	addr := opts.Address
	if addr == "" {
		if addr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	for _, t := range opts.Targets {
		if host, _, err := net.SplitHostPort(t); err != nil || host != "127.0.0.1" {
			return nil, fmt.Errorf("prometheus target %q: want 127.0.0.1:port", t)
		}
	}
	targets, _ := json.Marshal(append([]string{}, opts.Targets...))
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: app
    honor_labels: true
    metrics_path: /metrics
    scheme: http
    static_configs:
      - targets: %s
`, targets)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		return nil, err
	}
	args := []string{"--config.file=" + configFile, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--storage.tsdb.retention.time=1h"}

	p := &PrometheusServer{URL: "http://" + addr, Dir: dir, auth: opts.BasicAuth}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	var web strings.Builder
	if opts.TLS {
		ca := e.CA
		if ca == nil {
			if ca, err = NewCA(); err != nil {
				return nil, err
			}
		}
		certPEM, keyPEM, err := ca.Issue()
		if err != nil {
			return nil, err
		}
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			return nil, err
		}
		fmt.Fprintf(&web, "tls_server_config:\n  cert_file: %q\n  key_file: %q\n", certFile, keyFile)
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		p.URL, p.CA = "https://"+addr, append([]byte{}, ca.CertPEM...)
	}
	if opts.BasicAuth != nil {
		// The cheapest cost bcrypt allows: Prometheus checks the hash on
		// every request.
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.BasicAuth.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&web, "basic_auth_users:\n  %q: %q\n", opts.BasicAuth.Username, hash)
	}
	if web.Len() > 0 {
		webFile := filepath.Join(dir, "web.yml")
		if err := os.WriteFile(webFile, []byte(web.String()), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--web.config.file="+webFile)
	}
	p.client = &http.Client{Transport: transport, Timeout: 10 * time.Second}

	// The process's log and files share the folder: its name is the
	// folder's, so that two servers of one Env do not share a log.
	c, err := e.startProcess(filepath.Base(dir), bin, nil, args...)
	if err != nil {
		return nil, err
	}
	p.Component = c
	if err := p.waitReady(time.Minute); err != nil {
		out, _ := os.ReadFile(c.Log)
		_ = c.Stop()
		return nil, errors.Join(err, errors.New(tail(string(out), 3000)))
	}
	return p, nil
}

func (p *PrometheusServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		req, err := http.NewRequest(http.MethodGet, p.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		resp, err := p.do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return fmt.Errorf("prometheus exited before %s/-/ready answered 200: %v", p.URL, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/-/ready did not answer 200 within %s (last: %s)", p.URL, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *PrometheusServer) do(req *http.Request) (*http.Response, error) {
	if p.auth != nil {
		req.SetBasicAuth(p.auth.Username, p.auth.Password)
	}
	return p.client.Do(req)
}

// Query evaluates the PromQL expression q at the present time through the
// HTTP API (/api/v1/query) and returns its value: a scalar's, or the one
// series of an instant vector. hasData is false when the vector is empty
// (no series yet, or none left); a vector of more than one series is an
// error (aggregate it with sum). A NaN (0/0, say) is returned as data.
func (p *PrometheusServer) Query(ctx context.Context, q string) (value float64, hasData bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/api/v1/query",
		strings.NewReader(url.Values{"query": {q}}.Encode()))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, false, fmt.Errorf("query %q: %s: %s", q, resp.Status, tail(string(body), 500))
	}
	if r.Status != "success" {
		return 0, false, fmt.Errorf("query %q: %s: %s: %s", q, resp.Status, r.ErrorType, r.Error)
	}
	var sample [2]any // [unix time, "value"]
	switch r.Data.ResultType {
	case "scalar":
		if err := json.Unmarshal(r.Data.Result, &sample); err != nil {
			return 0, false, fmt.Errorf("query %q: %w", q, err)
		}
	case "vector":
		var vector []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vector); err != nil {
			return 0, false, fmt.Errorf("query %q: %w", q, err)
		}
		switch len(vector) {
		case 0:
			return 0, false, nil
		case 1:
			sample = vector[0].Value
		default:
			return 0, false, fmt.Errorf("query %q: %d series, want one (aggregate them)", q, len(vector))
		}
	default:
		return 0, false, fmt.Errorf("query %q: a %s, want a scalar or an instant vector", q, r.Data.ResultType)
	}
	s, ok := sample[1].(string)
	if !ok {
		return 0, false, fmt.Errorf("query %q: unexpected sample %v", q, sample)
	}
	if value, err = strconv.ParseFloat(s, 64); err != nil {
		return 0, false, fmt.Errorf("query %q: %w", q, err)
	}
	return value, true, nil
}

// WaitForData polls Query every 250 ms until q has data that is not NaN
// (rate() over a window with fewer than two scrapes has no data; a ratio of
// rates that are still 0 is NaN), and returns that value. It fails after
// timeout, or when ctx ends, with the last answer.
func (p *PrometheusServer) WaitForData(ctx context.Context, q string, timeout time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no data"
	for {
		v, ok, err := p.Query(ctx, q)
		switch {
		case err != nil:
			last = err.Error()
		case ok && !math.IsNaN(v):
			return v, nil
		case ok:
			last = "NaN"
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no data for %q within %s (last: %s)", q, timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// AppMetrics serves /metrics on 127.0.0.1 as the pods of applications
// would, for Prometheus to scrape: one counter,
// http_requests_total{namespace, pod, code="200"|"500"}, per pod. A test
// sets each pod's requests per second and the share of them that fail, and
// the counters grow at those rates in wall time (integrated at each scrape
// and each change), so that rate() in PromQL sees the rates set; they never
// decrease while their pod is there. Safe for concurrent use.
type AppMetrics struct {
	listener net.Listener
	server   *http.Server

	mu   sync.Mutex
	pods map[appPod]*appPodState
}

type appPod struct{ namespace, pod string }

type appPodState struct {
	rps, errorRatio float64
	ok, failed      float64 // the counters: code 200 and code 500
	since           time.Time
}

// advance adds what the pod served since the last time it was advanced.
func (s *appPodState) advance(now time.Time) {
	if d := now.Sub(s.since).Seconds(); d > 0 {
		n := s.rps * d
		s.failed += n * s.errorRatio
		s.ok += n * (1 - s.errorRatio)
	}
	s.since = now
}

// StartAppMetrics serves AppMetrics on a free port of 127.0.0.1, with no
// pods yet. Close it when done.
func StartAppMetrics() (*AppMetrics, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &AppMetrics{listener: l, pods: map[appPod]*appPodState{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", m.serveMetrics)
	m.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.server.Serve(l) }()
	return m, nil
}

// Address is host:port (127.0.0.1:port), a target for
// PrometheusOptions.Targets.
func (m *AppMetrics) Address() string { return m.listener.Addr().String() }

// SetPod sets a pod's requests per second and the ratio of them that fail
// with code 500 (clamped to [0, 1]); the pod appears, with its counters at
// 0, if it was not there. What it served until now at its former rates is
// kept.
func (m *AppMetrics) SetPod(namespace, pod string, rps, errorRatio float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	s := m.pods[appPod{namespace, pod}]
	if s == nil {
		s = &appPodState{since: now}
		m.pods[appPod{namespace, pod}] = s
	}
	s.advance(now)
	s.rps, s.errorRatio = math.Max(rps, 0), clampRatio(errorRatio)
}

// RemovePod takes a pod's series away, as when the pod is deleted.
func (m *AppMetrics) RemovePod(namespace, pod string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, appPod{namespace, pod})
}

// SetAll sets the error ratio of every pod of namespace that SetPod made,
// each keeping its request rate.
func (m *AppMetrics) SetAll(namespace string, errorRatio float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for k, s := range m.pods {
		if k.namespace == namespace {
			s.advance(now)
			s.errorRatio = clampRatio(errorRatio)
		}
	}
}

// Close stops serving.
func (m *AppMetrics) Close() error {
	return m.server.Close()
}

func clampRatio(r float64) float64 {
	if math.IsNaN(r) {
		return 0
	}
	return math.Min(math.Max(r, 0), 1)
}

var labelValueEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func (m *AppMetrics) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	now := time.Now()
	keys := make([]appPod, 0, len(m.pods))
	for k, s := range m.pods {
		s.advance(now)
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].namespace != keys[j].namespace {
			return keys[i].namespace < keys[j].namespace
		}
		return keys[i].pod < keys[j].pod
	})
	var b strings.Builder
	b.WriteString("# HELP http_requests_total Requests the pod served, by status code.\n# TYPE http_requests_total counter\n")
	for _, k := range keys {
		s := m.pods[k]
		ns, pod := labelValueEscaper.Replace(k.namespace), labelValueEscaper.Replace(k.pod)
		for _, c := range []struct {
			code string
			v    float64
		}{{"200", s.ok}, {"500", s.failed}} {
			fmt.Fprintf(&b, "http_requests_total{namespace=\"%s\",pod=\"%s\",code=\"%s\"} %s\n",
				ns, pod, c.code, strconv.FormatFloat(c.v, 'g', -1, 64))
		}
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = io.WriteString(w, b.String())
}
