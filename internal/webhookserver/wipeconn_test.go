package webhookserver

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"
)

// A read leaves nothing of what the buffer held before but the bytes it
// brought, and the read that ends the connection clears the buffer: the
// buffer net/http pools for the next connection holds no old request.
func TestWipingConnClearsWhatAReadDidNotFill(t *testing.T) {
	cfg := selfSigned(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newWipingListener(raw, cfg)
	defer ln.Close()

	go func() {
		c, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test's own self-signed server
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = c.Write([]byte("new"))
		time.Sleep(100 * time.Millisecond)
		_ = c.Close()
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	buf := bytes.Repeat([]byte("OLD REQUEST "), 100)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "new" {
		t.Fatalf("read %q, %v; want \"new\"", buf[:n], err)
	}
	if bytes.Contains(buf, []byte("OLD")) {
		t.Fatal("the read left the old request in the rest of the buffer")
	}

	copy(buf, "OLD REQUEST")
	if n, err := c.Read(buf); n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v after the client closed; want none and an error", n, err)
	}
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatal("the read that ended the connection left bytes in the buffer")
	}
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
