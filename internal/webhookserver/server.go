// Package webhookserver serves admission webhooks over TLS for the API server.
//
// It implements controller-runtime's webhook.Server so the manager runs it like
// any other runnable, but it owns the http.Server itself, which the default
// implementation hides. That is what makes the hardening possible: a request
// body cap, panic recovery that still answers with the request's UID, TLS 1.2+,
// HTTP/2 only on request, and retiring connections that were established with
// a certificate that has since been replaced.
//
// The API server keeps webhook connections alive indefinitely, so without
// retirement a renewed certificate would only be used by connections opened
// after some unrelated failure, and a broken new certificate would go
// unnoticed until then. Each connection remembers the certificate generation
// it was accepted under; a request on an older connection is answered with
// "Connection: close", so the client finishes that request normally and opens
// a new connection (and handshake) for the next one. Closing idle connections
// instead would race with a request the client is just writing.
package webhookserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DefaultMaxRequestBytes is larger than any AdmissionReview the API server can
// send for a valid object: an update carries the object and the old object,
// each at most the API server's 3 MiB request limit, plus the envelope.
const DefaultMaxRequestBytes = 8 << 20

// DefaultMaxInFlight and DefaultMaxInFlightBytes bound the work in flight.
// Typical reviews are a few KiB, so the byte bound only bites for large
// objects: four maximum-size reviews, each of which costs several times its
// size while decoded, fit in the chart's 512 MiB with room (measured under
// "Bounded load" in docs/platform/security.md).
const (
	DefaultMaxInFlight      = 64
	DefaultMaxInFlightBytes = 4 * DefaultMaxRequestBytes
)

// APIServerIdleTimeout is how long the API server keeps an idle connection
// to a webhook before it closes it: client-go's transport takes net/http's
// default (k8s.io/apimachinery/pkg/util/net.SetOldTransportDefaults).
const APIServerIdleTimeout = 90 * time.Second

// DefaultIdleTimeout is above APIServerIdleTimeout, so that the API server,
// not configward, closes the connections it leaves idle. HTTP/1.1 gives a
// server no race-free way to close an idle connection: a request the API
// server writes onto it at that instant fails with EOF, Go's client does not
// retry a POST, and the API server never retries a webhook call
// (kubernetes#127335). When the client closes, no request is in flight.
const DefaultIdleTimeout = 2 * time.Minute

// requestTimeout bounds reading a request and writing its answer: the API
// server's webhook timeout is at most 30s, and nothing legitimate takes
// longer to send or receive.
const requestTimeout = 30 * time.Second

// Options configure the server. Zero values get the defaults documented on
// each field.
type Options struct {
	// BindAddress is host:port to listen on. Port 0 picks a free port; the
	// chosen address is available from Addr once the server has started.
	BindAddress string
	// CertDir holds CertName and KeyName, typically a mounted Secret whose
	// files the kubelet replaces through a symlink swap on renewal.
	CertDir  string
	CertName string // default tls.crt
	KeyName  string // default tls.key
	// CertPollInterval bounds how late a renewal that fsnotify missed is
	// noticed. Default 10s.
	CertPollInterval time.Duration
	// EnableHTTP2 turns HTTP/2 on. It is off by default because of the HTTP/2
	// rapid-reset and stream-cancellation CVEs (CVE-2023-44487,
	// CVE-2023-39325); the API server talks HTTP/1.1 happily.
	EnableHTTP2 bool
	// MaxRequestBytes caps the request body. Default DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxInFlight and MaxInFlightBytes bound the requests being handled at
	// once and the body bytes they hold (a request without a length counts
	// as MaxRequestBytes). A request over either bound waits up to a second
	// for room, then gets 503 Service Unavailable, which the API server
	// treats by the webhook's failure policy: the process sheds load instead
	// of running out of memory. Defaults DefaultMaxInFlight and
	// DefaultMaxInFlightBytes.
	MaxInFlight      int
	MaxInFlightBytes int64
	// ClientCAFile, when set, makes the server require a client
	// certificate signed by one of its CAs: only the API server (configured
	// with an admission-control kubeconfig that presents one) can call.
	ClientCAFile string
	// IdleTimeout is how long a connection from the API server may sit
	// idle before the server closes it. Go's TLS and HTTP connection
	// buffers keep the last request a connection carried, Secret values
	// and all, until the next one overwrites it or the connection goes;
	// this bounds how long (see wipingListener for the buffer that would
	// outlive the connection), and the API server's own idle timeout
	// (APIServerIdleTimeout) bounds it sooner. At or below that, the server
	// closes idle connections under the API server, and now and then a
	// review fails. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Gate, when set, is asked before each review is judged; an error
	// answers 503 with its message instead (the API server applies the
	// webhook's failure policy), as when the server sheds load.
	Gate func(context.Context) error
	// ShutdownTimeout bounds how long in-flight requests may take to finish
	// once the server is asked to stop. Default 30s.
	ShutdownTimeout time.Duration
	Log             logr.Logger
}

// Server is a hardened webhook.Server.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu      sync.Mutex
	paths   map[string]bool
	httpSrv *http.Server
	addr    net.Addr
	watcher *certwatcher.CertWatcher

	started    atomic.Bool
	draining   atomic.Bool
	generation atomic.Int64 // number of certificate reloads after the first load
	handshakes handshakeLog
	bound      *inFlight
	// open counts the connections accepted and not yet closed, so that a
	// draining server knows when the API server has let go of it.
	open atomic.Int64
}

var _ webhook.Server = (*Server)(nil)

// New returns a server that is not yet listening; the manager starts it.
func New(opts Options) (*Server, error) {
	if opts.CertDir == "" {
		return nil, errors.New("webhook server: a certificate directory is required")
	}
	if opts.CertName == "" {
		opts.CertName = "tls.crt"
	}
	if opts.KeyName == "" {
		opts.KeyName = "tls.key"
	}
	if opts.CertPollInterval <= 0 {
		opts.CertPollInterval = 10 * time.Second
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxInFlightBytes <= 0 {
		opts.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if opts.MaxInFlightBytes < opts.MaxRequestBytes {
		opts.MaxInFlightBytes = opts.MaxRequestBytes // a largest request must fit
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.BindAddress == "" {
		opts.BindAddress = ":9443"
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.IdleTimeout <= APIServerIdleTimeout {
		opts.Log.Info("the idle timeout is not above the API server's: configward, not the API server, closes idle connections, and a review the API server sends on one as it closes fails",
			"idleTimeout", opts.IdleTimeout, "apiServerIdleTimeout", APIServerIdleTimeout)
	}
	return &Server{opts: opts, mux: http.NewServeMux(), paths: map[string]bool{},
		bound: newInFlight(opts.MaxInFlight, opts.MaxInFlightBytes, opts.MaxRequestBytes)}, nil
}

// NeedLeaderElection is false: every replica serves admission.
func (s *Server) NeedLeaderElection() bool { return false }

// WebhookMux returns the mux the hooks are registered on.
func (s *Server) WebhookMux() *http.ServeMux { return s.mux }

// Register serves hook at path, behind the body cap and panic recovery.
func (s *Server) Register(path string, hook http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths[path] {
		panic(fmt.Sprintf("webhook server: path %q registered twice", path))
	}
	s.paths[path] = true
	s.mux.Handle(path, s.bound.limit(s.gated(harden(hook, s.opts.MaxRequestBytes, s.opts.Log.WithValues("path", path)))))
	s.opts.Log.Info("registered webhook", "path", path)
}

// gated asks the Gate before the review is read.
func (s *Server) gated(next http.Handler) http.Handler {
	if s.opts.Gate == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.opts.Gate(r.Context()); err != nil {
			rejectedRequests.WithLabelValues("stale_view").Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, "configward: "+err.Error()+"; the request was not checked. Retry; the webhook's failure policy decides meanwhile.", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CertPaths returns the certificate and key file paths being served.
func (s *Server) CertPaths() (cert, key string) {
	return filepath.Join(s.opts.CertDir, s.opts.CertName), filepath.Join(s.opts.CertDir, s.opts.KeyName)
}

// Addr is the address the server listens on, or nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Rotations counts certificate reloads since start (the first load excluded).
func (s *Server) Rotations() int64 { return s.generation.Load() }

// Handshakes reports how many TLS handshakes were served with each of the
// most recent certificates, keyed by the leaf's SHA-256 fingerprint (hex).
func (s *Server) Handshakes() map[string]int64 { return s.handshakes.snapshot() }

// ServedCertificate is the certificate new TLS handshakes get.
func (s *Server) ServedCertificate() *tls.Certificate {
	s.mu.Lock()
	w := s.watcher
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	c, _ := w.GetCertificate(nil)
	return c
}

// Start listens and serves until ctx is cancelled, then drains in-flight
// requests for up to ShutdownTimeout.
func (s *Server) Start(ctx context.Context) error {
	certPath, keyPath := s.CertPaths()
	watcher, err := certwatcher.New(certPath, keyPath)
	if err != nil {
		return fmt.Errorf("webhook server: loading serving certificate from %s: %w", s.opts.CertDir, err)
	}
	watcher = watcher.WithWatchInterval(s.opts.CertPollInterval)
	initial := mustCurrent(watcher)
	observeCertificate(initial)
	var lastMu sync.Mutex
	last := Fingerprint(initial)
	// RegisterCallback also calls back at once with the current certificate,
	// which is not a rotation.
	watcher.RegisterCallback(func(c tls.Certificate) {
		lastMu.Lock()
		fp := Fingerprint(&c)
		changed := fp != last
		last = fp
		lastMu.Unlock()
		if !changed {
			return
		}
		s.generation.Add(1)
		observeCertificate(&c)
		certificateReloads.Inc()
		s.opts.Log.Info("serving certificate replaced; connections made with the old one are retired after their next request",
			"notAfter", leafNotAfter(&c))
	})

	tlsCfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := watcher.GetCertificate(hello)
			if c != nil {
				s.handshakes.record(c)
			}
			return c, err
		},
		NextProtos: []string{"http/1.1"},
	}
	if s.opts.EnableHTTP2 {
		tlsCfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if s.opts.ClientCAFile != "" {
		pool, err := loadCAs(s.opts.ClientCAFile)
		if err != nil {
			return err
		}
		tlsCfg.ClientCAs, tlsCfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}

	ln, err := net.Listen("tcp", s.opts.BindAddress)
	if err != nil {
		return fmt.Errorf("webhook server: listening on %s: %w", s.opts.BindAddress, err)
	}

	srv := &http.Server{
		Handler:           s.retireStaleConnections(s.mux),
		ConnContext:       s.stampConnection,
		ConnState:         s.countConnection,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		// TLS handshake errors from port scanners and TCP probes are noise at
		// the default level.
		ErrorLog: stdlog.New(logWriter{s.opts.Log.V(1)}, "", 0),
	}
	if !s.opts.EnableHTTP2 {
		// A non-nil empty map is how net/http is told not to negotiate h2.
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}

	s.mu.Lock()
	s.httpSrv = srv
	s.addr = ln.Addr()
	s.watcher = watcher
	s.mu.Unlock()

	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go func() {
		if err := watcher.Start(watchCtx); err != nil {
			s.opts.Log.Error(err, "certificate watcher stopped")
		}
	}()

	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		s.opts.Log.Info("stopping webhook server; draining in-flight requests", "timeout", s.opts.ShutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			s.opts.Log.Error(err, "webhook server did not drain in time")
		}
	}()

	s.started.Store(true)
	s.opts.Log.Info("serving webhooks", "address", ln.Addr().String(), "http2", s.opts.EnableHTTP2,
		"clientCertificatesRequired", s.opts.ClientCAFile != "", "maxInFlight", s.opts.MaxInFlight, "maxInFlightBytes", s.opts.MaxInFlightBytes)
	serve := func() error { return srv.Serve(newWipingListener(ln, tlsCfg)) }
	if s.opts.EnableHTTP2 {
		serve = func() error { return srv.ServeTLS(ln, "", "") }
	}
	if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook server: %w", err)
	}
	<-drained
	return nil
}

type connGenerationKey struct{}

// stampConnection records the certificate generation a connection was
// accepted under. The handshake happens after accept, so a connection stamped
// with an old generation may in fact hold the new certificate; retiring it is
// harmless. The reverse cannot happen: the watcher swaps the certificate
// before the generation is bumped.
func (s *Server) stampConnection(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connGenerationKey{}, s.generation.Load())
}

func (s *Server) retireStaleConnections(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gen, ok := r.Context().Value(connGenerationKey{}).(int64); ok && gen < s.generation.Load() || s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// Drain retires every connection after its next request ("Connection:
// close"), from now until the server stops. Called when the process starts
// to shut down: while its endpoint leaves the Service, the API server's
// keep-alive connections to this replica end one by one after an answered
// request, or when the API server closes them idle (WaitConnectionsClosed),
// instead of all at once when the listener closes, where a request written
// onto a connection as it closes fails.
func (s *Server) Drain() { s.draining.Store(true) }

// countConnection keeps open current.
func (s *Server) countConnection(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		s.open.Add(1)
	case http.StateClosed, http.StateHijacked:
		s.open.Add(-1)
	}
}

// OpenConnections is the number of connections the server holds.
func (s *Server) OpenConnections() int64 { return s.open.Load() }

// WaitConnectionsClosed returns once no connection is open, or when ctx
// ends. After Drain, every connection ends either after its next answer
// (which tells the client to close it) or when the client closes it idle,
// so the wait is bounded by the API server's idle timeout; a connection
// this server would close itself (its own idle timeout, a stalled read)
// ends sooner than ctx should. Only then may the listener and the
// remaining connections close without a request being caught on one.
func (s *Server) WaitConnectionsClosed(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.open.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d connections still open: %w", s.open.Load(), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// DrainBound is the longest WaitConnectionsClosed can take once every
// client behaves: a connection idle up to the server's own idle timeout,
// then one more request at most as long as the read and write timeouts.
func (s *Server) DrainBound() time.Duration { return s.opts.IdleTimeout + requestTimeout }

// AuthenticatesCallers reports whether only clients with a certificate from
// the client CA (the API server) can call.
func (s *Server) AuthenticatesCallers() bool { return s.opts.ClientCAFile != "" }

func loadCAs(path string) (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook server: reading the client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("webhook server: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// StartedChecker is ready once the listener is up.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not started")
		}
		return nil
	}
}

func mustCurrent(w *certwatcher.CertWatcher) *tls.Certificate {
	c, _ := w.GetCertificate(nil)
	return c
}

type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
