package reload

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// The serving-certificate check: a renewed certificate lands in the Secret
// and in the pod's files, and a program that read it once goes on serving
// the old one until it expires. The agent sits next to both: it dials its
// own pod's port, reads the leaf presented and compares it with the one
// mounted. Certificates are public; the key (tls.key) is never mounted
// into the agent, and nothing else of the Secret is reported.

// ServingCert is one port a pod's v1alpha1.ServingCertAnnotation asks the
// agent to check.
type ServingCert struct {
	Port int `json:"port"`
	// Container serves the port; "" for the pod's only container, or the
	// only one that mounts a certificate.
	Container string `json:"container,omitempty"`
	// SNI is the name sent in the handshake; "" for the first DNS name of
	// the mounted certificate.
	SNI string `json:"sni,omitempty"`
	// Secret holds the certificate the port should present; "" for the
	// only one the container mounts. The injection fills it in.
	Secret string `json:"secret,omitempty"`
	// Dir is where the agent finds the certificate (tls.crt, and ca.crt
	// where the Secret has one): a volume of its own. Set by the injection.
	Dir string `json:"dir,omitempty"`
}

// MaxServingCerts bounds the ports one pod asks to be checked: each is a
// handshake every period, and an entry on the pod's condition.
const MaxServingCerts = 8

// ParseServingCerts reads a ServingCertAnnotation value:
// "8443", "8443@web;sni=web.shop.svc", "8443@web;secret=web-tls,9443@admin".
func ParseServingCerts(v string) ([]ServingCert, error) {
	var out []ServingCert
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		fields := strings.Split(item, ";")
		portPart, container, _ := strings.Cut(strings.TrimSpace(fields[0]), "@")
		port, err := strconv.Atoi(portPart)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("%q is not <port>[@<container>][;sni=<name>][;secret=<name>] (port 1-65535)", item)
		}
		sc := ServingCert{Port: port, Container: container}
		if container != "" && len(validation.IsDNS1123Label(container)) > 0 {
			return nil, fmt.Errorf("%q: %q is not a container name", item, container)
		}
		for _, f := range fields[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(f), "=")
			switch {
			case k == "sni" && len(validation.IsDNS1123Subdomain(strings.TrimPrefix(val, "*."))) == 0:
				sc.SNI = val
			case k == "secret" && len(validation.IsDNS1123Subdomain(val)) == 0:
				sc.Secret = val
			default:
				return nil, fmt.Errorf("%q: %q is neither sni=<DNS name> nor secret=<Secret name>", item, f)
			}
		}
		if slices.ContainsFunc(out, func(o ServingCert) bool { return o.Port == port }) {
			return nil, fmt.Errorf("port %d is named twice", port)
		}
		out = append(out, sc)
	}
	if len(out) > MaxServingCerts {
		return nil, fmt.Errorf("%d ports: at most %d are checked per pod", len(out), MaxServingCerts)
	}
	return out, nil
}

// What the agent found a port presents.
const (
	// CertCurrent: the leaf presented is the one mounted.
	CertCurrent = "current"
	// CertStale: it is another, older than the one mounted (issued before
	// it), or one the pod mounted before: the program has not read the
	// renewed certificate.
	CertStale = "stale"
	// CertOther: neither: a certificate the program did not get from the
	// Secret (another name, a built-in one).
	CertOther = "other"
	// CertUnreachable: no certificate came back: nothing listens, the port
	// does not speak TLS, or the handshake did not finish in time.
	CertUnreachable = "unreachable"
)

// Leaf is what the agent reports of a certificate: public facts, enough
// to tell one certificate from another and when it ends.
type Leaf struct {
	Serial    string    `json:"serial"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	// SHA256 is of the certificate's DER.
	SHA256 string `json:"sha256,omitempty"`
}

// LeafOf sums c up.
func LeafOf(c *x509.Certificate) Leaf {
	sum := sha256.Sum256(c.Raw)
	return Leaf{Serial: strings.ToUpper(c.SerialNumber.Text(16)), NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), SHA256: hex.EncodeToString(sum[:])}
}

// SameLeaf says a and b (nil for none presented) are one certificate.
func SameLeaf(a, b *Leaf) bool {
	return (a == nil) == (b == nil) && (a == nil || a.SHA256 == b.SHA256 && a.Serial == b.Serial)
}

// JudgeServed compares the leaf a program presents with the one mounted;
// before are the SHA-256 of leaves the pod mounted earlier.
func JudgeServed(presented, mounted Leaf, before []string) string {
	switch {
	case presented.SHA256 == mounted.SHA256:
		return CertCurrent
	case slices.Contains(before, presented.SHA256) || presented.NotBefore.Before(mounted.NotBefore):
		return CertStale
	}
	return CertOther
}

// CertReport is what the agent found one port presents.
type CertReport struct {
	Port   int    `json:"port"`
	Secret string `json:"secret"`
	// Keys fingerprint the mounted tls.crt (see Fingerprints): configward
	// tells from them whether it is the Secret's content now.
	Keys map[string]Fingerprint `json:"keys"`
	// Mounted is the leaf of the mounted tls.crt; SwappedAt when the
	// kubelet swapped it in.
	Mounted   Leaf      `json:"mounted"`
	SwappedAt time.Time `json:"swappedAt"`
	// Result is CertCurrent, CertStale, CertOther or CertUnreachable;
	// Presented the leaf presented (nil when unreachable); Message why
	// unreachable, or what an other leaf names.
	Result    string    `json:"result"`
	Presented *Leaf     `json:"presented,omitempty"`
	Message   string    `json:"message,omitempty"`
	CheckedAt time.Time `json:"checkedAt"`
}

// CertEntry is what configward keeps of one port on the pod's
// ServingCertConditionType condition.
type CertEntry struct {
	Port   int    `json:"port"`
	Secret string `json:"secret"`
	// Certificate is the cert-manager Certificate that issues the Secret
	// (its cert-manager.io/certificate-name annotation), if any.
	Certificate string `json:"certificate,omitempty"`
	Result      string `json:"result"`
	Presented   *Leaf  `json:"presented,omitempty"`
	Mounted     Leaf   `json:"mounted"`
	// MountedCurrent: the mounted tls.crt is the Secret's content now (the
	// kubelet may still be swapping a renewal in).
	MountedCurrent bool      `json:"mountedCurrent"`
	SwappedAt      time.Time `json:"swappedAt"`
	CheckedAt      time.Time `json:"checkedAt"`
	// Since is when configward first heard the port present this leaf
	// with this result (its own clock).
	Since   time.Time `json:"since"`
	Message string    `json:"message,omitempty"`
}

// Reasons of the ServingCertConditionType condition.
const (
	ReasonCertCurrent     = "Current"
	ReasonCertStale       = "Stale"
	ReasonCertOther       = "Other"
	ReasonCertUnreachable = "Unreachable"
)

// CertCondition sums a pod's ports up: True when each presents the leaf
// mounted, False when one presents a stale one, Unknown otherwise. Entries
// are sorted by port.
func CertCondition(entries []CertEntry) corev1.PodCondition {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b CertEntry) int { return a.Port - b.Port })
	c := corev1.PodCondition{Type: v1alpha1.ServingCertConditionType, Status: corev1.ConditionTrue, Reason: ReasonCertCurrent}
	for _, e := range entries {
		switch {
		case e.Result == CertStale:
			c.Status, c.Reason = corev1.ConditionFalse, ReasonCertStale
		case c.Status == corev1.ConditionFalse:
		case e.Result == CertOther:
			c.Status, c.Reason = corev1.ConditionUnknown, ReasonCertOther
		case e.Result == CertUnreachable && c.Reason != ReasonCertOther:
			c.Status, c.Reason = corev1.ConditionUnknown, ReasonCertUnreachable
		}
	}
	msg, _ := json.Marshal(entries)
	c.Message = string(msg)
	return c
}

// CertEntriesOf reads a pod's ServingCertConditionType condition, by port.
func CertEntriesOf(pod *corev1.Pod) map[int]CertEntry {
	out := map[int]CertEntry{}
	for _, c := range pod.Status.Conditions {
		if c.Type != v1alpha1.ServingCertConditionType {
			continue
		}
		var entries []CertEntry
		if json.Unmarshal([]byte(c.Message), &entries) != nil {
			return out
		}
		for _, e := range entries {
			out[e.Port] = e
		}
	}
	return out
}

// The agent's certificate volumes are the one record of which Secret goes
// with which port: the injection adds one per port (CertVolume), the report
// endpoint reads them back (ServingCertsOf), and they survive the caches'
// trimming of pods, which keeps volumes and drops env values.
const (
	certVolumePrefix = "configward-cert-"
	certDirPrefix    = "/var/run/configward/cert/"
	// TLSCert and CACert are the keys of a kubernetes.io/tls Secret (and
	// of cert-manager's) the agent reads; never tls.key.
	TLSCert = "tls.crt"
	CACert  = "ca.crt"
)

// CertDir is where the agent finds port's certificate.
func CertDir(port int) string { return certDirPrefix + strconv.Itoa(port) }

// CertVolume is the agent's volume for c: the Secret's certificate (and CA,
// where it has one), nothing else, with its mount.
func CertVolume(c ServingCert) (corev1.Volume, corev1.VolumeMount) {
	name := certVolumePrefix + strconv.Itoa(c.Port)
	ref := corev1.LocalObjectReference{Name: c.Secret}
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{Secret: &corev1.SecretProjection{LocalObjectReference: ref, Items: []corev1.KeyToPath{{Key: TLSCert, Path: TLSCert}}}},
		// Optional: the kubelet then skips a key the Secret does not have.
		{Secret: &corev1.SecretProjection{LocalObjectReference: ref, Items: []corev1.KeyToPath{{Key: CACert, Path: CACert}}, Optional: ptr.To(true)}},
	}}}}
	return v, corev1.VolumeMount{Name: name, MountPath: CertDir(c.Port), ReadOnly: true}
}

// ServingCertsOf are the ports pod's agent checks, each with its Secret, as
// the injection set them up (CertVolume); none for a pod without the agent.
func ServingCertsOf(pod *corev1.Pod) []ServingCert {
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == AgentContainer })
	if i < 0 {
		return nil
	}
	var out []ServingCert
	for _, m := range pod.Spec.InitContainers[i].VolumeMounts {
		port, err := strconv.Atoi(strings.TrimPrefix(m.Name, certVolumePrefix))
		if !strings.HasPrefix(m.Name, certVolumePrefix) || err != nil {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.Projected != nil && len(v.Projected.Sources) > 0 && v.Projected.Sources[0].Secret != nil {
				out = append(out, ServingCert{Port: port, Secret: v.Projected.Sources[0].Secret.Name, Dir: m.MountPath})
			}
		}
	}
	return out
}

// StaleFor is how long e has presented a stale leaf at now (0 when it
// does not).
func (e CertEntry) StaleFor(now time.Time) time.Duration {
	if e.Result != CertStale || e.Since.IsZero() {
		return 0
	}
	return now.Sub(e.Since)
}
