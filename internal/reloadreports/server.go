package reloadreports

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/configward/configward/internal/reload"
)

// Server serves the reload agents' reports, apart from admission: the
// admission port may require the API server's client certificate, which
// agents do not have; they present a token of their own audience instead,
// which the handler reviews before it reads a report. It shares the
// serving certificate, reloaded as it is renewed, and bounds what any pod
// that reaches the port can hold, valid token or not: its address's
// connections (maxConnsPerSource), the time its headers and its body may
// take, a report's size, its pod's reports in flight (one, in Handler),
// and the reports in flight of every source together. It is a manager
// Runnable.
type Server struct {
	// BindAddress is where it listens (host:port).
	BindAddress string
	// CertPath and KeyPath are the webhook's serving certificate and key.
	CertPath, KeyPath string
	// Handler takes each report (a *Handler).
	Handler http.Handler
	// IdleTimeout ends a connection left open between reports: the
	// webhook's own idle timeout.
	IdleTimeout time.Duration
	Log         logr.Logger

	addr atomic.Pointer[net.Addr]
}

// maxReportsInFlight bounds the reports handled at once: a thousand pods
// reporting one change arrive over the kubelet's sync period, and each
// costs a TokenReview.
const maxReportsInFlight = 32

// NeedLeaderElection: every replica takes reports.
func (s *Server) NeedLeaderElection() bool { return false }

// Addr is where the server listens, nil before it does.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return nil
}

func (s *Server) Start(ctx context.Context) error {
	watcher, err := certwatcher.New(s.CertPath, s.KeyPath)
	if err != nil {
		return fmt.Errorf("reload agent reports: loading the serving certificate: %w", err)
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			s.Log.Error(err, "certificate watcher of the agent report endpoint stopped")
		}
	}()
	ln, err := net.Listen("tcp", s.BindAddress)
	if err != nil {
		return fmt.Errorf("reload agent reports: listening on %s: %w", s.BindAddress, err)
	}
	addr := ln.Addr()
	s.addr.Store(&addr)
	slots := make(chan struct{}, maxReportsInFlight)
	mux := http.NewServeMux()
	mux.Handle(reload.ReportPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The agent retries a busy answer with a growing wait.
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-time.After(time.Second):
			count("busy", "all-sources")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxReport)
		s.Handler.ServeHTTP(w, r)
	}))
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate, NextProtos: []string{"http/1.1"}},
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ReadHeaderTimeout: headerDeadline,
		// A backstop: the handler gives a report's body bodyDeadline once
		// its token is reviewed.
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 15 * time.Second,
		// Agents close their connection after each report; one left open
		// goes with the webhook's idle timeout, taking its buffers along.
		IdleTimeout:    s.IdleTimeout,
		MaxHeaderBytes: 16 << 10,
		// Connections that time out or never speak TLS are any pod's to
		// make; they are bounded above, not logged one by one.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.Log.Info("serving reload agent reports", "address", addr.String())
	if err := srv.ServeTLS(&boundedListener{Listener: ln}, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("reload agent reports: %w", err)
	}
	return nil
}
