package webhookserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/test/framework"
)

type running struct {
	srv    *webhookserver.Server
	ca     *framework.CA
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, http2 bool) *running {
	t.Helper()
	ca, err := framework.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rotate(t, ca, dir)
	srv, err := webhookserver.New(webhookserver.Options{
		BindAddress: "127.0.0.1:0", CertDir: dir, CertPollInterval: 200 * time.Millisecond, EnableHTTP2: http2,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register("/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, ca: ca, dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("server stopped with %v", err)
		}
	})
	for srv.Addr() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

func rotate(t *testing.T, ca *framework.CA, dir string) string {
	t.Helper()
	c, k, err := ca.Issue()
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.WriteAtomic(dir, map[string][]byte{"tls.crt": c, "tls.key": k}); err != nil {
		t.Fatal(err)
	}
	fp, err := framework.Fingerprint(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func (r *running) client(cfg func(*tls.Config)) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(r.ca.Cert)
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if cfg != nil {
		cfg(tc)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
}

func (r *running) post(t *testing.T, c *http.Client) *http.Response {
	t.Helper()
	resp, err := c.Post("https://"+r.srv.Addr().String()+"/echo", "application/json", bytes.NewBufferString("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func peer(resp *http.Response) string {
	return webhookserver.Fingerprint(&tls.Certificate{Certificate: [][]byte{resp.TLS.PeerCertificates[0].Raw}})
}

func TestRefusesTLSBelow12(t *testing.T) {
	r := start(t, false)
	_, err := r.client(func(c *tls.Config) { c.MaxVersion = tls.VersionTLS11 }).Post(
		"https://"+r.srv.Addr().String()+"/echo", "application/json", nil)
	if err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
}

func TestHTTP2OnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		r := start(t, enabled)
		resp := r.post(t, r.client(nil))
		if got := resp.ProtoMajor == 2; got != enabled {
			t.Errorf("EnableHTTP2=%v: served %s", enabled, resp.Proto)
		}
	}
}

// A connection made before a certificate rotation serves one more request,
// which tells the client to close it; the next request handshakes again and
// sees the new certificate. No request fails along the way.
func TestRotationRetiresConnectionsMadeWithTheOldCertificate(t *testing.T) {
	r := start(t, false)
	c := r.client(nil)
	first := r.post(t, c)
	oldFP := peer(first)
	if first.Close {
		t.Fatal("a fresh connection was retired")
	}
	if again := r.post(t, c); again.Close || peer(again) != oldFP {
		t.Fatal("keep-alive was not reused before any rotation")
	}

	newFP := rotate(t, r.ca, r.dir)
	deadline := time.Now().Add(5 * time.Second)
	for r.srv.Rotations() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the server did not notice the replaced certificate files")
		}
		time.Sleep(20 * time.Millisecond)
	}

	onOldConn := r.post(t, c)
	if peer(onOldConn) != oldFP || !onOldConn.Close {
		t.Fatalf("the request on the old connection should be answered and retire it (Connection: close), got close=%v", onOldConn.Close)
	}
	onNewConn := r.post(t, c)
	if peer(onNewConn) != newFP {
		t.Fatal("the next request did not handshake against the new certificate")
	}
	if onNewConn.Close {
		t.Fatal("a connection made with the current certificate was retired")
	}
	if r.srv.Handshakes()[newFP] != 1 {
		t.Fatalf("handshakes: %v", r.srv.Handshakes())
	}
}
