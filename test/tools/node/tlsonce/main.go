// Command tlsonce is the test node's program that loads its serving
// certificate once, at start, and serves it until it stops, as many
// programs do: the node suite runs it to see configward's reload agent
// report the certificate it presents stale after a renewal, and configward
// evict it.
//
// It reads -cert/tls.crt and -cert/tls.key, serves TLS on -listen (a plain
// "ok" to any request), prints "serving <serial>" and exits on SIGTERM.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("cert", "/etc/tls", "directory of tls.crt and tls.key")
	listen := flag.String("listen", ":8443", "address to serve TLS on")
	flag.Parse()
	cert, err := tls.LoadX509KeyPair(filepath.Join(*dir, "tls.crt"), filepath.Join(*dir, "tls.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tlsonce:", err)
		os.Exit(1)
	}
	fmt.Printf("serving %X\n", cert.Leaf.SerialNumber)
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServeTLS("", ""); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "tlsonce:", err)
		os.Exit(1)
	}
}
