package analysis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// promRequest is what the fake Prometheus saw of the last request.
type promRequest struct {
	method, path, auth string
	form               url.Values
}

// fakePrometheus answers every request with status and body (a function
// of the request, to echo it), and records it.
func fakePrometheus(t *testing.T, tls bool, answer func(r *http.Request) (int, string)) (*httptest.Server, func() promRequest) {
	t.Helper()
	var mu sync.Mutex
	var last promRequest
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("form: %v", err)
		}
		mu.Lock()
		last = promRequest{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), form: r.Form}
		mu.Unlock()
		status, body := answer(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})
	srv := httptest.NewUnstartedServer(h)
	// Refused handshakes are what some tests want; not noise in the log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, func() promRequest { mu.Lock(); defer mu.Unlock(); return last }
}

func always(status int, body string) func(*http.Request) (int, string) {
	return func(*http.Request) (int, string) { return status, body }
}

func vector(values ...string) string {
	var samples []string
	for i, v := range values {
		samples = append(samples, fmt.Sprintf(`{"metric":{"pod":"web-%d"},"value":[1700000000.25,%q]}`, i, v))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
}

func scalar(v string) string {
	return `{"status":"success","data":{"resultType":"scalar","result":[1700000000.25,"` + v + `"]}}`
}

func newProm(t *testing.T, address string, c Credentials) *Prometheus {
	t.Helper()
	p, err := NewPrometheus(address, c, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQueryAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   Result
		errHas []string
		// errLacks: what an address answers beyond Prometheus' own error
		// field is never copied into an error (records, Events, logs).
		errLacks []string
	}{
		{name: "one sample", status: 200, body: vector("0.25"), want: Result{Value: 0.25}},
		{name: "scalar", status: 200, body: scalar("42"), want: Result{Value: 42}},
		{name: "empty vector", status: 200, body: vector(), want: Result{NoData: true}},
		{name: "NaN, as 0/0 without requests", status: 200, body: vector("NaN"), want: Result{NoData: true}},
		{name: "+Inf scalar", status: 200, body: scalar("+Inf"), want: Result{NoData: true}},
		{name: "-Inf", status: 200, body: vector("-Inf"), want: Result{NoData: true}},
		{name: "two series", status: 200, body: vector("1", "2"), errHas: []string{"2 series", "sum("}},
		{name: "matrix", status: 200, body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`, errHas: []string{"range vector"}},
		{name: "prometheus error", status: 400, body: `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected \"}\""}`,
			errHas: []string{"answered bad_data: 1:5: parse error"}},
		{name: "server error", status: 500, body: strings.Repeat("upstream exploded ", 100), errHas: []string{"HTTP 500", "1800 bytes"}, errLacks: []string{"upstream"}},
		{name: "not JSON", status: 200, body: "<html>login</html>", errHas: []string{"not JSON", "18 bytes"}, errLacks: []string{"login"}},
		{name: "an internal page", status: 200, body: "<h1>Router admin</h1><p>password: hunter2</p>", errHas: []string{"not JSON"}, errLacks: []string{"hunter2", "Router"}},
		{name: "an internal page with an error status", status: 403, body: "<p>password: hunter2</p>", errHas: []string{"HTTP 403"}, errLacks: []string{"hunter2"}},
		{name: "a value that is not a number", status: 200, body: vector("password: hunter2"), errHas: []string{"not a number"}, errLacks: []string{"hunter2"}},
		{name: "a status that is not success", status: 200, body: `{"status":"hunter2"}`, errHas: []string{"not \"success\""}, errLacks: []string{"hunter2"}},
		{name: "a result type of its own", status: 200, body: `{"status":"success","data":{"resultType":"hunter2"}}`, errHas: []string{"resultType"}, errLacks: []string{"hunter2"}},
		{name: "a long error type", status: 400, body: `{"status":"error","errorType":"` + strings.Repeat("t", 300) + `","error":"x"}`, errHas: []string{"answered tttt"}},
		{name: "bad sample", status: 200, body: `{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}`, errHas: []string{"does not parse"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakePrometheus(t, false, always(tc.status, tc.body))
			got, err := newProm(t, srv.URL, Credentials{}).Query(context.Background(), "up", time.Unix(1700000000, 250e6))
			if tc.errHas == nil {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want an error", got)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			for _, s := range tc.errLacks {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q copies %q from the answer", err, s)
				}
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long: %q", len(err.Error()), err)
			}
		})
	}
}

func TestQueryRequest(t *testing.T) {
	srv, last := fakePrometheus(t, false, always(200, vector("1")))
	p := newProm(t, srv.URL+"/prometheus/", Credentials{})
	query := `sum(up{pod=~"a[.]b|c"})`
	if _, err := p.Query(context.Background(), query, time.Unix(1700000000, 250e6)); err != nil {
		t.Fatal(err)
	}
	r := last()
	if r.method != http.MethodGet || r.path != "/prometheus/api/v1/query" || r.form.Get("query") != query || r.form.Get("time") != "1700000000.250" {
		t.Errorf("got %+v", r)
	}
	if r.auth != "" {
		t.Errorf("sent Authorization %q without credentials", r.auth)
	}
	if p.String() != srv.URL+"/prometheus" {
		t.Errorf("String() = %q", p.String())
	}

	// A wave of many pods makes a query too long for a URL: it is POSTed.
	long := `sum(up{pod=~"` + strings.Repeat("checkout-5d4f9c-x2x7k|", 400) + `x"})`
	if _, err := p.Query(context.Background(), long, time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.method != http.MethodPost || r.form.Get("query") != long || r.form.Get("time") != "1700000000.000" {
		t.Errorf("long query: got %s with %d bytes of query", r.method, len(r.form.Get("query")))
	}
}

func TestQueryAuth(t *testing.T) {
	srv, last := fakePrometheus(t, false, always(200, vector("1")))
	if _, err := newProm(t, srv.URL, Credentials{Token: "tok-123\n"}).Query(context.Background(), "up", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := last().auth; got != "Bearer tok-123" {
		t.Errorf("bearer: sent %q", got)
	}
	if _, err := newProm(t, srv.URL, Credentials{Username: "reader", Password: "pa:ss word"}).Query(context.Background(), "up", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, want := last().auth, "Basic "+base64.StdEncoding.EncodeToString([]byte("reader:pa:ss word")); got != want {
		t.Errorf("basic: sent %q, want %q", got, want)
	}
}

func caPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// otherCA is a self-signed certificate for 127.0.0.1 that signed nothing
// the test servers use (httptest's servers all share one certificate).
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestQueryTLS(t *testing.T) {
	srv, _ := fakePrometheus(t, true, always(200, vector("7")))
	got, err := newProm(t, srv.URL, Credentials{CA: caPEM(srv)}).Query(context.Background(), "up", time.Now())
	if err != nil || got.Value != 7 {
		t.Fatalf("with its CA: got %+v, %v", got, err)
	}
	// Not signed by the system roots, nor by another CA.
	if _, err := newProm(t, srv.URL, Credentials{}).Query(context.Background(), "up", time.Now()); err == nil {
		t.Error("without its CA: no error")
	}
	if _, err := newProm(t, srv.URL, Credentials{CA: otherCA(t)}).Query(context.Background(), "up", time.Now()); err == nil {
		t.Error("with another CA: no error")
	}
	if _, err := NewPrometheus(srv.URL, Credentials{CA: []byte("not PEM")}, time.Second, nil); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("garbage ca.crt: %v", err)
	}
}

func TestQueryTimeout(t *testing.T) {
	srv, _ := fakePrometheus(t, false, func(r *http.Request) (int, string) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return 200, vector("1")
	})
	p, err := NewPrometheus(srv.URL, Credentials{}, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := p.Query(context.Background(), "up", time.Now()); err == nil {
		t.Fatal("no error")
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

func TestNewPrometheusRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, address string
		c             Credentials
		timeout       time.Duration
	}{
		{"not http", "ftp://prometheus:9090", Credentials{}, time.Second},
		{"no scheme", "prometheus:9090", Credentials{}, time.Second},
		{"no host", "http://", Credentials{}, time.Second},
		{"query string", "http://prometheus:9090/?x=1", Credentials{}, time.Second},
		{"empty query string", "http://prometheus:9090/?", Credentials{}, time.Second},
		{"fragment", "http://prometheus:9090/#top", Credentials{}, time.Second},
		{"user info", "http://reader:hunter2@prometheus:9090", Credentials{}, time.Second},
		{"unparsable", "http://prometheus:90x90", Credentials{}, time.Second},
		{"no timeout", "http://prometheus:9090", Credentials{}, 0},
		{"token and basic", "http://prometheus:9090", Credentials{Token: "tok-secret", Username: "u", Password: "pw-secret"}, time.Second},
		{"username alone", "http://prometheus:9090", Credentials{Username: "user-secret"}, time.Second},
		{"password alone", "http://prometheus:9090", Credentials{Password: "pw-secret"}, time.Second},
		{"colon in username", "http://prometheus:9090", Credentials{Username: "us:er-secret", Password: "pw-secret"}, time.Second},
		{"newline in token", "http://prometheus:9090", Credentials{Token: "tok\r\nX-Injected: tok-secret"}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPrometheus(tc.address, tc.c, tc.timeout, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, secret := range []string{"hunter2", "tok-secret", "pw-secret", "user-secret", "er-secret"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q holds a credential", err)
				}
			}
		})
	}
}

// TestNoCredentialInErrors: a proxy or server that echoes the request's
// headers, and every formatting of the values, never shows a credential.
func TestNoCredentialInErrors(t *testing.T) {
	const token, user, password = "tok-Zq81jv0x", "reader-Kx2", "pw-Yh7Lm0"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	secrets := []string{token, user, password, basic}
	echo := func(status int, wrap func(string) string) func(*http.Request) (int, string) {
		return func(r *http.Request) (int, string) { return status, wrap(r.Header.Get("Authorization")) }
	}
	for _, c := range []Credentials{{Token: token}, {Username: user, Password: password}} {
		for name, answer := range map[string]func(*http.Request) (int, string){
			"401 echo":   echo(401, func(a string) string { return "denied for " + a }),
			"error JSON": echo(422, func(a string) string { return `{"status":"error","errorType":"auth","error":"bad ` + a + `"}` }),
			// The secret straddles the excerpt's cut.
			"cut":      echo(500, func(a string) string { return strings.Repeat("x", excerptBytes-12) + a + strings.Repeat("y", 50) }),
			"not JSON": echo(200, func(a string) string { return "<p>" + a + "</p>" }),
			"not a number": echo(200, func(a string) string {
				return `{"status":"success","data":{"resultType":"scalar","result":[1,"` + a + `"]}}`
			}),
		} {
			t.Run(fmt.Sprintf("%s/%s", c, name), func(t *testing.T) {
				srv, _ := fakePrometheus(t, false, answer)
				p := newProm(t, srv.URL, c)
				_, err := p.Query(context.Background(), "up", time.Now())
				if err == nil {
					t.Fatal("no error")
				}
				shown := err.Error() + fmt.Sprintf(" %v %+v %#v %s %v %+v %#v", p, p, p, c, c, c, c)
				for _, s := range secrets {
					if strings.Contains(shown, s) {
						t.Errorf("%q shows a credential", shown)
					}
				}
				// and the cut leaves no prefix either
				for _, s := range secrets {
					if strings.Contains(shown, s[:6]) {
						t.Errorf("%q shows the start of a credential", shown)
					}
				}
			})
		}
	}
}
