package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
)

// Pods on a real node reach the API server the way in-cluster clients do:
// https://$KUBERNETES_SERVICE_HOST, the `kubernetes` Service's cluster IP,
// verified against the kube-root-ca.crt ConfigMap. A cluster's kube-proxy
// sends that address to the API server; this machine has no iptables or
// nftables tools, and the API server listens on loopback, which a pod's
// network namespace cannot reach through any NAT rule. So the node carries
// the Service's IP itself and a Balancer of the test process, with the API
// server as its one endpoint, forwards its TCP connections unchanged: TLS,
// the pod's service account token and its identity are the API server's to
// check, as through kube-proxy.

// ServiceCIDR is the test API server's --service-cluster-ip-range (the
// range envtest uses by default, set here explicitly so the certificate
// below matches it).
const ServiceCIDR = "10.0.0.0/24"

// KubernetesServiceIP is the `kubernetes` Service's cluster IP: the first
// address of ServiceCIDR, which the API server gives it.
const KubernetesServiceIP = "10.0.0.1"

// serveInClusterClients makes the API server one that in-cluster clients
// can verify and that reaches webhook Services without kube-proxy: its
// serving certificate, from the Env's CA (which kube-controller-manager
// publishes in kube-root-ca.crt), names the `kubernetes` Service's IP and
// DNS names; --enable-aggregator-routing makes it call a webhook Service at
// its endpoints (pod IPs on a node's bridge) instead of at its cluster IP;
// and pods get their service account tokens. envtest keeps certificates it finds in the API server's
// certificate directory, so they are written there first, with the
// service-account signing key it would otherwise have made beside them.
func (e *Env) serveInClusterClients() error {
	dir := filepath.Join(e.Dir, "kube-apiserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certPEM, keyPEM, err := e.CA.issueServing("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesServiceIP)})
	if err != nil {
		return err
	}
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	signerDER, err := x509.MarshalECPrivateKey(signer)
	if err != nil {
		return err
	}
	publicDER, err := x509.MarshalPKIXPublicKey(&signer.PublicKey)
	if err != nil {
		return err
	}
	for name, content := range map[string][]byte{
		"apiserver.crt": certPEM,
		"apiserver.key": keyPEM,
		// The names envtest gives --service-account-key-file and
		// --service-account-signing-key-file (and kube-controller-manager
		// --service-account-private-key-file).
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: publicDER}),
		"sa-signer.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: signerDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			return err
		}
	}
	api := e.testEnv.ControlPlane.GetAPIServer()
	api.CertDir = dir
	api.SecureServing.CA = e.CA.CertPEM
	api.Configure().
		Set("service-cluster-ip-range", ServiceCIDR).
		Set("enable-aggregator-routing", "true").
		// envtest turns the ServiceAccount admission plugin off; it is what
		// gives a pod its service account token volume.
		Disable("disable-admission-plugins")
	return nil
}

// issueServing signs a serving certificate for the given names.
func (ca *CA) issueServing(commonName string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	return ca.issue(&x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: commonName},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	})
}
