package webhookserver

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	certificateNotAfter = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "configward_webhook_certificate_not_after_seconds",
		Help: "Expiry (Unix seconds) of the serving certificate currently served. Alert well before it passes.",
	})
	certificateReloads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "configward_webhook_certificate_reloads_total",
		Help: "Times a replaced serving certificate was loaded from disk without a restart.",
	})
	rejectedRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_webhook_requests_refused_total",
		Help: "Admission requests answered before reaching a rule, by reason: a denial (too_large, panic, malformed), or answered 503, which the webhook's failure policy decides: shed (overloaded), or not judged from a view that stayed stale while the API server answered (stale_view).",
	}, []string{"reason"})
	reviewsAnswered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_webhook_reviews_total",
		Help: "AdmissionReviews answered, by webhook: the API server's calls, which its matchConditions and rules decide. With the process's CPU it gives CPU per review.",
	}, []string{"webhook"})
)

func init() {
	metrics.Registry.MustRegister(certificateNotAfter, certificateReloads, rejectedRequests, reviewsAnswered)
}

func leaf(c *tls.Certificate) *x509.Certificate {
	if c == nil || len(c.Certificate) == 0 {
		return nil
	}
	if c.Leaf != nil {
		return c.Leaf
	}
	l, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return l
}

func leafNotAfter(c *tls.Certificate) time.Time {
	if l := leaf(c); l != nil {
		return l.NotAfter
	}
	return time.Time{}
}

func observeCertificate(c *tls.Certificate) {
	if t := leafNotAfter(c); !t.IsZero() {
		certificateNotAfter.Set(float64(t.Unix()))
	}
}

// Fingerprint is the hex SHA-256 of a certificate's leaf (DER), the usual way
// to name a certificate in logs and tests without printing it.
func Fingerprint(c *tls.Certificate) string {
	if c == nil || len(c.Certificate) == 0 {
		return ""
	}
	sum := sha256.Sum256(c.Certificate[0])
	return hex.EncodeToString(sum[:])
}

// handshakeLog counts handshakes per certificate for the last few
// certificates only, so it stays small however often certificates renew.
type handshakeLog struct {
	mu     sync.Mutex
	order  []string
	counts map[string]int64
}

const handshakeLogSize = 4

func (h *handshakeLog) record(c *tls.Certificate) {
	fp := Fingerprint(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = map[string]int64{}
	}
	if _, ok := h.counts[fp]; !ok {
		h.order = append(h.order, fp)
		if len(h.order) > handshakeLogSize {
			delete(h.counts, h.order[0])
			h.order = h.order[1:]
		}
	}
	h.counts[fp]++
}

func (h *handshakeLog) snapshot() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int64, len(h.counts))
	for k, v := range h.counts {
		out[k] = v
	}
	return out
}

// CertificateChecker is a readiness check: ready only while the certificate
// being served is the one on disk. A renewed certificate that failed to load
// (a half-written file, a key that does not match) keeps the replica out of
// the Service until the watcher has loaded it, instead of serving a
// certificate the API server may soon stop trusting.
func (s *Server) CertificateChecker() func(*http.Request) error {
	return func(*http.Request) error {
		served := s.ServedCertificate()
		if served == nil {
			return errors.New("no serving certificate loaded yet")
		}
		certPath, keyPath := s.CertPaths()
		onDisk, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return fmt.Errorf("certificate on disk cannot be loaded: %w", err)
		}
		if !bytes.Equal(onDisk.Certificate[0], served.Certificate[0]) {
			return errors.New("certificate on disk differs from the one served; waiting for the reload")
		}
		return nil
	}
}
