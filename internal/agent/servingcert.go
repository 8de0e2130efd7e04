package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"

	"github.com/configward/configward/internal/reload"
)

// The serving-certificate check (reload.ServingCert): after each swap of a
// port's mounted certificate, and every CertEvery, the agent dials the
// port in its own pod, reads the leaf presented, and compares it with the
// one mounted. It dials nothing beyond its pod: 127.0.0.1, ::1, then the
// pod's own address, each with a deadline, so a port that never finishes
// a handshake costs one goroutine for CertTimeout.

// certCheck is what the agent knows of one port.
type certCheck struct {
	cert reload.ServingCert
	// revision is the swap of the mounted certificate last read; pemBytes
	// its tls.crt (public: it is fingerprinted at each report).
	revision  string
	swappedAt time.Time
	pemBytes  []byte
	mounted   *x509.Certificate
	// before are the SHA-256 of leaves mounted earlier, newest last: a
	// program still presenting one of them has not read the renewal.
	before []string
	// next is when the port is dialed again, wait the time since the last.
	next time.Time
	wait time.Duration
	last reload.CertReport
}

// maxBefore bounds the earlier leaves remembered: renewals are days apart.
const maxBefore = 8

// checkCerts runs the checks of certs until ctx ends, handing each new
// finding to rep.
func checkCerts(ctx context.Context, certs []reload.ServingCert, o Options, rep *reporter, log logr.Logger) {
	checks := make([]*certCheck, len(certs))
	dirs := make([]reload.Config, len(certs))
	for i, c := range certs {
		checks[i] = &certCheck{cert: c}
		dirs[i] = reload.Config{Dir: c.Dir}
	}
	changed := watch(ctx, dirs, o.Poll, log)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-timer.C:
		}
		now := time.Now()
		news := false
		for _, c := range checks {
			if c.mountSwapped(log) {
				// The program may take a moment to read a renewal.
				c.next, c.wait = now.Add(o.Settle), 0
			}
			if c.mounted == nil || now.Before(c.next) {
				continue
			}
			r := c.check(ctx, o)
			news = news || r.Result != c.last.Result || !reload.SameLeaf(r.Presented, c.last.Presented) || r.Mounted != c.last.Mounted
			if r.Result != c.last.Result || !reload.SameLeaf(r.Presented, c.last.Presented) {
				log.Info("served certificate", "port", c.cert.Port, "result", r.Result, "presented", serialOf(r.Presented), "mounted", r.Mounted.Serial, "message", r.Message)
			}
			c.last = r
			// A port that does not present the mounted leaf is looked at
			// again soon (the program may still be reloading), then less
			// and less often.
			c.wait = o.CertEvery
			if r.Result != reload.CertCurrent {
				c.wait = min(max(2*c.wait, 5*time.Second), o.CertEvery)
			}
			c.next = now.Add(c.wait)
		}
		if news {
			rep.updateCerts(checks)
		}
		timer.Reset(nextOf(checks, now, o.CertEvery))
	}
}

// mountSwapped reads the mounted certificate when the kubelet swapped it,
// and says whether it did.
func (c *certCheck) mountSwapped(log logr.Logger) bool {
	rev := revisionOf(c.cert.Dir)
	if rev == "" || rev == c.revision {
		return false
	}
	got, err := read(reload.Config{Dir: c.cert.Dir, Items: map[string]string{"tls.crt": "tls.crt"}})
	if err != nil {
		if !errors.Is(err, errSwapped) {
			log.Error(err, "reading the mounted certificate", "port", c.cert.Port)
		}
		return false
	}
	leaf, err := firstCertificate(got.values["tls.crt"])
	if err != nil {
		log.Error(err, "the mounted tls.crt holds no certificate", "port", c.cert.Port, "secret", c.cert.Secret)
		c.revision = got.revision
		return false
	}
	if c.mounted != nil && !bytes.Equal(c.mounted.Raw, leaf.Raw) {
		c.before = append(c.before, reload.LeafOf(c.mounted).SHA256)
		if len(c.before) > maxBefore {
			c.before = c.before[1:]
		}
	}
	c.revision, c.swappedAt, c.pemBytes, c.mounted = got.revision, got.swappedAt, got.values["tls.crt"], leaf
	return true
}

// check dials the port and judges what it presents.
func (c *certCheck) check(ctx context.Context, o Options) reload.CertReport {
	mounted := reload.LeafOf(c.mounted)
	r := reload.CertReport{Port: c.cert.Port, Secret: c.cert.Secret, Mounted: mounted, SwappedAt: c.swappedAt.UTC(), CheckedAt: time.Now().UTC()}
	sni := c.cert.SNI
	if sni == "" && len(c.mounted.DNSNames) > 0 {
		sni = c.mounted.DNSNames[0]
	}
	presented, err := presentedLeaf(ctx, addresses(o.PodIP, c.cert.Port), sni, o.CertTimeout)
	if err != nil {
		r.Result, r.Message = reload.CertUnreachable, reload.Cut(err.Error())
		return r
	}
	leaf := reload.LeafOf(presented)
	r.Presented = &leaf
	r.Result = reload.JudgeServed(leaf, mounted, c.before)
	if r.Result == reload.CertOther {
		r.Message = reload.Cut(fmt.Sprintf("the port presents a certificate for %v issued %s, not the one mounted from Secret %s", namesOf(presented), leaf.NotBefore.Format(time.RFC3339), c.cert.Secret))
	}
	return r
}

// addresses are where the port is dialed, in order: the pod's loopback,
// then its own address. Nothing else.
func addresses(podIP string, port int) []string {
	out := []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("::1", strconv.Itoa(port))}
	if ip := net.ParseIP(podIP); ip != nil && !ip.IsLoopback() {
		out = append(out, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	}
	return out
}

// presentedLeaf dials each address in turn until one accepts the
// connection, and returns the leaf it presents. The leaf is read as soon
// as the server sends it, so a server that wants a client certificate,
// and ends the handshake without one, still shows it. It verifies
// nothing: the leaf is compared with the mounted one, not trusted.
func presentedLeaf(ctx context.Context, addrs []string, sni string, timeout time.Duration) (*x509.Certificate, error) {
	var errs []error
	for _, addr := range addrs {
		leaf, dialed, err := handshake(ctx, addr, sni, timeout)
		if leaf != nil {
			return leaf, nil
		}
		errs = append(errs, err)
		if dialed {
			// It listens there and does not present a certificate:
			// another address would not be another program.
			return nil, err
		}
	}
	return nil, errors.Join(errs...)
}

func handshake(ctx context.Context, addr, sni string, timeout time.Duration) (*x509.Certificate, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", addr, err)
	}
	defer raw.Close()
	var leaf *x509.Certificate
	conn := tls.Client(raw, &tls.Config{
		ServerName: sni,
		// The leaf is compared with the mounted one, never trusted, and
		// the connection carries nothing.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			if len(rawCerts) > 0 {
				leaf, _ = x509.ParseCertificate(rawCerts[0])
			}
			return nil
		},
	})
	err = conn.HandshakeContext(ctx)
	if leaf != nil {
		return leaf, true, nil
	}
	if err == nil {
		err = errors.New("no certificate presented")
	}
	return nil, true, fmt.Errorf("%s: no TLS handshake: %w", addr, err)
}

// firstCertificate is the leaf of a PEM bundle: its first certificate.
func firstCertificate(pemBytes []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, pemBytes = pem.Decode(pemBytes)
		if b == nil {
			return nil, errors.New("no PEM certificate")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

func namesOf(c *x509.Certificate) []string {
	if len(c.DNSNames) > 0 {
		return c.DNSNames
	}
	return []string{c.Subject.CommonName}
}

func serialOf(l *reload.Leaf) string {
	if l == nil {
		return ""
	}
	return l.Serial
}

// nextOf is how long until a check is due (at most every).
func nextOf(checks []*certCheck, now time.Time, every time.Duration) time.Duration {
	next := now.Add(every)
	for _, c := range checks {
		if c.mounted != nil && c.next.Before(next) {
			next = c.next
		}
	}
	return max(next.Sub(now), 0)
}

// certReports are the checks' last findings, with the mounted tls.crt
// fingerprinted under key. A port not checked yet is left out.
func certReports(checks []certSnapshot, key []byte) []reload.CertReport {
	var out []reload.CertReport
	for _, c := range checks {
		r := c.report
		r.Keys = reload.Fingerprints(key, map[string][]byte{"tls.crt": c.pemBytes})
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b reload.CertReport) int { return a.Port - b.Port })
	return out
}

// certSnapshot is what the reporter keeps of a check.
type certSnapshot struct {
	report   reload.CertReport
	pemBytes []byte
}

// podIP is the pod's address, as the injection hands it.
func podIP() string { return os.Getenv(reload.PodIPEnv) }
