package reloadreports

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/configward/configward/internal/reload"
)

// startServer serves handler as the webhook serves agents' reports, on a
// loopback port, and returns its address.
func startServer(t *testing.T, handler http.Handler) string {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{BindAddress: "127.0.0.1:0", CertPath: certPath, KeyPath: keyPath, Handler: handler, IdleTimeout: time.Minute, Log: logr.Discard()}
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for s.Addr() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the server did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s.Addr().String()
}

// from dials addr from the loopback address src, as a pod of that
// address would.
func from(src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

// report posts a report from src and returns the status.
func report(t *testing.T, src, addr string) int {
	t.Helper()
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test server's own certificate
		DialContext: func(_ context.Context, _, a string) (net.Conn, error) { return from(src, a) }}
	defer transport.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, "https://"+addr+reload.ReportPath, strings.NewReader(`{"configs":[]}`))
	req.Header.Set("Authorization", "Bearer good")
	resp, err := (&http.Client{Transport: transport, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("a report from %s: %v", src, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOneSourceCannotTakeTheEndpoint: a pod that opens connections and
// never finishes a request (no token to review yet) holds at most
// maxConnsPerSource of them, each for at most the header deadline; another
// pod's report gets through meanwhile.
func TestOneSourceCannotTakeTheEndpoint(t *testing.T) {
	var handled atomic.Int32
	addr := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		handled.Add(1)
		_, _ = io.WriteString(w, `{"outcome":"recorded"}`)
	}))
	const opened = maxConnsPerSource + 40
	refusedBefore := int(testutil.ToFloat64(refusedConns.WithLabelValues("source")))
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range opened {
		c, err := from("127.0.0.1", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The connections past the bound are closed as they are accepted.
	refused := func() int { return int(testutil.ToFloat64(refusedConns.WithLabelValues("source"))) }
	for deadline := time.Now().Add(10 * time.Second); refused()-refusedBefore < opened-maxConnsPerSource && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := refused() - refusedBefore; got != opened-maxConnsPerSource {
		t.Errorf("%d of %d connections from one address were closed as they were accepted, want %d", got, opened, opened-maxConnsPerSource)
	}
	if code := report(t, "127.0.0.2", addr); code != http.StatusOK {
		t.Errorf("another pod's report while one address holds its connections: %d", code)
	}
	// Those that stay open are closed by the header deadline (they never
	// begin the TLS handshake).
	start := time.Now()
	for _, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Read(make([]byte, 1))
	}
	if waited := time.Since(start); waited > headerDeadline+5*time.Second {
		t.Errorf("connections without a request were held %v", waited)
	}
	if code := report(t, "127.0.0.1", addr); code != http.StatusOK {
		t.Errorf("the address's own report once its idle connections went: %d", code)
	}
	if handled.Load() != 2 {
		t.Errorf("%d reports handled, want 2", handled.Load())
	}
}
