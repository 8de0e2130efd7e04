package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/reload"
)

// testCA issues leaf certificates, as cert-manager would into a Secret.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, next: 100}
}

// issued is a leaf as a Secret of type kubernetes.io/tls holds it.
type issued struct {
	crt, key string
	pair     tls.Certificate
	serial   string
}

// issue signs a leaf for names, valid from notBefore for a day.
func (ca *testCA) issue(t *testing.T, notBefore time.Time, names ...string) issued {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.next++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.next), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	crt := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	pair, err := tls.X509KeyPair([]byte(crt), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return issued{crt: crt, key: keyPEM, pair: pair, serial: strconv.FormatInt(ca.next, 16)}
}

// tlsProgram serves TLS on a loopback port: with reread, it reads its
// certificate from dir at each handshake (as Prometheus' web config
// does); without, it keeps the one it started with.
func tlsProgram(t *testing.T, dir string, reread bool, clientAuth tls.ClientAuthType) int {
	t.Helper()
	load := func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		return &c, err
	}
	first, err := load()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{ClientAuth: clientAuth, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if reread {
			return load()
		}
		return first, nil
	}}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Read(make([]byte, 1))
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// certWatch is a port the agent checks, with where the program and the
// agent find the Secret (the agent's volume holds tls.crt alone).
type certWatch struct {
	programDir, agentDir string
}

func newCertWatch(t *testing.T, leaf issued) certWatch {
	w := certWatch{programDir: filepath.Join(t.TempDir(), "tls"), agentDir: filepath.Join(t.TempDir(), "cert")}
	w.renew(t, leaf)
	return w
}

// renew lands leaf in both volumes, as the kubelet does after a renewal.
func (w certWatch) renew(t *testing.T, leaf issued) {
	project(t, w.programDir, map[string]string{"tls.crt": leaf.crt, "tls.key": leaf.key})
	project(t, w.agentDir, map[string]string{"tls.crt": leaf.crt})
}

// lastCert is the latest report of port.
func (c *configward) lastCert(port int) (reload.CertReport, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.reports) - 1; i >= 0; i-- {
		for _, r := range c.reports[i].Certificates {
			if r.Port == port {
				return r, c.tokens[i], true
			}
		}
	}
	return reload.CertReport{}, "", false
}

// certResult waits for port's report to say result with mounted leaf (its
// fingerprint checked the way configward checks it) and presented serial.
func certResult(t *testing.T, cw *configward, port int, result string, mounted issued, presented string) reload.CertReport {
	t.Helper()
	kept := digest.KeyDigests(map[string]string{"tls.crt": mounted.crt}, nil)
	var r reload.CertReport
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		var token string
		var ok bool
		r, token, ok = cw.lastCert(port)
		if ok && r.Result == result && serialOf(r.Presented) == strings.ToUpper(presented) && r.Mounted.Serial == strings.ToUpper(mounted.serial) &&
			reload.Matches(reload.FingerprintKey([]byte(token)), r.Keys, false, kept) {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no report of port %d %s presenting %q with %s mounted; the last: %+v", port, result, presented, mounted.serial, r)
	return r
}

func certSpec(t *testing.T, cw *configward, certs ...reload.ServingCert) reload.Spec {
	s := spec(t, cw, "", "")
	s.Certificates = certs
	return s
}

var fastCerts = func() Options {
	o := fast
	o.CertEvery, o.CertTimeout = 200*time.Millisecond, 300*time.Millisecond
	return o
}()

// A program that reads its certificate at each handshake presents each
// renewal (current); one that read it once goes on presenting the old
// leaf (stale), and again after a second renewal; the report says which
// leaf is presented and which is mounted, and carries nothing of the key.
func TestServedCertificate(t *testing.T) {
	ca := newTestCA(t)
	day := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	first := ca.issue(t, day, "web.shop.svc")
	rereads, once := newCertWatch(t, first), newCertWatch(t, first)
	rereadPort := tlsProgram(t, rereads.programDir, true, tls.NoClientCert)
	oncePort := tlsProgram(t, once.programDir, false, tls.NoClientCert)
	cw := newConfigward(t)
	run(t, certSpec(t, cw, reload.ServingCert{Port: rereadPort, Secret: "web-tls", Dir: rereads.agentDir},
		reload.ServingCert{Port: oncePort, Secret: "web-tls", Dir: once.agentDir}), fastCerts)

	certResult(t, cw, rereadPort, reload.CertCurrent, first, first.serial)
	certResult(t, cw, oncePort, reload.CertCurrent, first, first.serial)

	second := ca.issue(t, day.Add(time.Hour), "web.shop.svc")
	rereads.renew(t, second)
	once.renew(t, second)
	certResult(t, cw, rereadPort, reload.CertCurrent, second, second.serial)
	r := certResult(t, cw, oncePort, reload.CertStale, second, first.serial)
	if !r.Presented.NotAfter.Equal(first.pair.Leaf.NotAfter.UTC()) || r.Secret != "web-tls" {
		t.Errorf("the stale report: %+v", r)
	}

	// A third leaf issued earlier than the second (a re-issue backdated):
	// the program presenting the first is still stale, since the pod
	// mounted the first before.
	third := ca.issue(t, day.Add(-time.Hour), "web.shop.svc")
	rereads.renew(t, third)
	once.renew(t, third)
	certResult(t, cw, rereadPort, reload.CertCurrent, third, third.serial)
	certResult(t, cw, oncePort, reload.CertStale, third, first.serial)
}

// A server that wants a client certificate still shows its own before it
// ends the handshake; a port presenting another name's certificate is
// other; a port that accepts and never answers, or where nothing listens,
// is unreachable within the agent's timeout, and the agent goes on.
func TestServedCertificateEdges(t *testing.T) {
	ca := newTestCA(t)
	day := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	leaf := ca.issue(t, day, "api.shop.svc")
	mtls := newCertWatch(t, leaf)
	mtlsPort := tlsProgram(t, mtls.programDir, true, tls.RequireAndVerifyClientCert)

	elsewhere := newCertWatch(t, leaf)
	foreign := ca.issue(t, day.Add(time.Hour), "intruder.example")
	project(t, elsewhere.programDir, map[string]string{"tls.crt": foreign.crt, "tls.key": foreign.key})
	otherPort := tlsProgram(t, elsewhere.programDir, true, tls.NoClientCert)

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	t.Cleanup(func() { silent.Close(); held.Wait() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held.Add(1)
			go func() {
				defer held.Done()
				defer c.Close()
				_, _ = c.Read(make([]byte, 1<<16))
				time.Sleep(time.Second)
			}()
		}
	}()
	silentPort := silent.Addr().(*net.TCPAddr).Port
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	cw := newConfigward(t)
	w := newCertWatch(t, leaf)
	run(t, certSpec(t, cw, reload.ServingCert{Port: mtlsPort, Secret: "api-tls", Dir: mtls.agentDir},
		reload.ServingCert{Port: otherPort, Secret: "api-tls", Dir: elsewhere.agentDir},
		reload.ServingCert{Port: silentPort, Secret: "api-tls", Dir: w.agentDir},
		reload.ServingCert{Port: closedPort, Secret: "api-tls", Dir: w.agentDir}), fastCerts)
	certResult(t, cw, mtlsPort, reload.CertCurrent, leaf, leaf.serial)
	r := certResult(t, cw, otherPort, reload.CertOther, leaf, foreign.serial)
	if r.Message == "" {
		t.Errorf("other without a message: %+v", r)
	}
	certResult(t, cw, silentPort, reload.CertUnreachable, leaf, "")
	certResult(t, cw, closedPort, reload.CertUnreachable, leaf, "")
	// Unreachable ports do not stop the others being checked.
	renewed := ca.issue(t, day.Add(2*time.Hour), "api.shop.svc")
	mtls.renew(t, renewed)
	certResult(t, cw, mtlsPort, reload.CertCurrent, renewed, renewed.serial)
}

// The agent dials its own pod only: loopback, then the pod's address.
func TestCertAddresses(t *testing.T) {
	if got := addresses("10.244.1.7", 8443); !slices.Equal(got, []string{"127.0.0.1:8443", "[::1]:8443", "10.244.1.7:8443"}) {
		t.Errorf("addresses: %v", got)
	}
	if got := addresses("", 8443); len(got) != 2 {
		t.Errorf("without a pod address: %v", got)
	}
}
