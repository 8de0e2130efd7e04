package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// CA is a throwaway certificate authority for a test run. Webhook
// configurations trust it, so leaf certificates it issues can be swapped
// under a running webhook the way cert-manager's CA issuer renews them.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

var serial atomic.Int64

// NewCA creates a CA valid for a day.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "configward-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a serving certificate for localhost and 127.0.0.1.
func (ca *CA) Issue() (certPEM, keyPEM []byte, err error) {
	n := serial.Add(1)
	return ca.issue(&x509.Certificate{
		SerialNumber: big.NewInt(n),
		Subject:      pkix.Name{CommonName: "configward-webhook-" + strconv.FormatInt(n, 10)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	})
}

// IssueClient signs a client certificate, such as the one the API server
// presents to webhooks.
func (ca *CA) IssueClient(commonName string) (certPEM, keyPEM []byte, err error) {
	return ca.issue(&x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: commonName},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// Fingerprint returns the SHA-256 fingerprint of a PEM certificate in the
// form webhookserver.Fingerprint uses.
func Fingerprint(certPEM, keyPEM []byte) (string, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return "", err
	}
	return fingerprintDER(pair.Certificate[0]), nil
}

// WriteAtomic replaces the files in dir the way the kubelet updates a
// mounted Secret: the files live in a fresh timestamped directory, `..data`
// is a symlink to it that is swapped with a rename, and each visible file is
// a symlink through `..data`. A watcher therefore never sees a half-written
// file, but it does see the old directory disappear.
func WriteAtomic(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tsDir, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tsDir, name), content, 0o600); err != nil {
			return err
		}
	}
	dataLink := filepath.Join(dir, "..data")
	old, _ := os.Readlink(dataLink)
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		return err
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return fmt.Errorf("removing previous data directory: %w", err)
		}
	}
	return nil
}
