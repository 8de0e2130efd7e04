package framework

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPrometheusScrapesAppMetrics runs the Prometheus server `make
// prometheus` builds against AppMetrics, over http and over https with basic
// auth, and checks that PromQL sees the request rates and error ratios set
// per pod, and a change of them.
func TestPrometheusScrapesAppMetrics(t *testing.T) {
	RequirePrometheus(t)
	apps, err := StartAppMetrics()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apps.Close() })
	apps.SetPod("shop", "a", 40, 0.25)
	apps.SetPod("shop", "b", 10, 0.8)
	apps.SetPod("other", "a", 10, 1)
	checkExposition(t, apps)

	e := &Env{Dir: t.TempDir()}
	t.Cleanup(func() { _ = e.Stop() })
	plain, err := e.StartPrometheus(PrometheusOptions{Targets: []string{apps.Address()}})
	if err != nil {
		t.Fatal(err)
	}
	secure, err := e.StartPrometheus(PrometheusOptions{Targets: []string{apps.Address()}, TLS: true,
		BasicAuth: &BasicAuth{Username: "configward", Password: "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(plain.URL, "http://127.0.0.1:") || plain.CA != nil {
		t.Errorf("plain: URL %s, CA %d bytes", plain.URL, len(plain.CA))
	}
	if !strings.HasPrefix(secure.URL, "https://127.0.0.1:") || !strings.Contains(string(secure.CA), "BEGIN CERTIFICATE") {
		t.Errorf("secure: URL %s, CA %q: want https and the CA's PEM", secure.URL, secure.CA)
	}
	// Without the password (and with the CA trusted), Prometheus refuses.
	req, _ := http.NewRequest(http.MethodGet, secure.URL+"/-/ready", nil)
	resp, err := secure.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/-/ready without credentials: %s, want 401", resp.Status)
	}

	ctx := context.Background()
	ratio := func(pods string) string {
		return fmt.Sprintf(`sum(rate(http_requests_total{code="500",namespace="shop",pod=~%q}[5s])) / sum(rate(http_requests_total{namespace="shop",pod=~%q}[5s]))`, pods, pods)
	}
	for _, prom := range []*PrometheusServer{plain, secure} {
		waitNear(t, prom, ctx, ratio("a"), 0.25)
		waitNear(t, prom, ctx, ratio("b"), 0.8)
		waitNear(t, prom, ctx, `sum(rate(http_requests_total{namespace="shop",pod="a"}[5s]))`, 40)
		if _, ok, err := prom.Query(ctx, `http_requests_total{pod="nobody"}`); err != nil || ok {
			t.Errorf("%s: a query without series: data %v, error %v", prom.URL, ok, err)
		}
		if _, _, err := prom.Query(ctx, `http_requests_total`); err == nil {
			t.Errorf("%s: a query of several series did not fail", prom.URL)
		}
	}

	// A change of every pod's ratio in the namespace, each keeping its
	// rate; the [5s] window forgets the old ratios.
	apps.SetAll("shop", 0.5)
	checkExposition(t, apps)
	waitNear(t, plain, ctx, ratio("a"), 0.5)
	waitNear(t, plain, ctx, ratio("a|b"), 0.5)
	waitNear(t, plain, ctx, `sum(rate(http_requests_total{namespace="shop"}[5s]))`, 50)
	waitNear(t, plain, ctx, `sum(rate(http_requests_total{namespace="other",code="500"}[5s]))`, 10)

	apps.RemovePod("shop", "b")
	if body := scrape(t, apps); strings.Contains(body, `pod="b"`) {
		t.Errorf("pod b removed but still served:\n%s", body)
	}
}

// waitNear waits up to 30 s for q to be within 3% of want.
func waitNear(t *testing.T, prom *PrometheusServer, ctx context.Context, q string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got float64
	for time.Now().Before(deadline) {
		v, err := prom.WaitForData(ctx, q, time.Until(deadline))
		if err != nil {
			t.Fatal(err)
		}
		if got = v; math.Abs(got-want) <= 0.03*want {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s = %v, want %v", q, got, want)
}

// checkExposition scrapes twice and checks the text and that no counter
// went down.
func checkExposition(t *testing.T, apps *AppMetrics) {
	t.Helper()
	first := parseCounters(t, scrape(t, apps))
	time.Sleep(50 * time.Millisecond)
	second := parseCounters(t, scrape(t, apps))
	if len(first) != 6 || len(second) != 6 {
		t.Fatalf("want 6 series (3 pods, 2 codes), got %d and %d", len(first), len(second))
	}
	for series, v := range first {
		if second[series] < v {
			t.Errorf("%s went down: %v, then %v", series, v, second[series])
		}
	}
}

func scrape(t *testing.T, apps *AppMetrics) string {
	t.Helper()
	resp, err := http.Get("http://" + apps.Address() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseCounters(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		var v float64
		if _, err := fmt.Sscan(value, &v); !ok || err != nil || !strings.HasPrefix(series, "http_requests_total{") {
			t.Fatalf("bad line %q", line)
		}
		out[series] = v
	}
	return out
}
