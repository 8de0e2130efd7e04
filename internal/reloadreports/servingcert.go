package reloadreports

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
)

// What a pod's agent found its ports present is kept on the pod's
// ServingCertificate condition, one entry per port the injection set up
// (reload.ServingCertsOf: the report cannot add a port, nor name another
// Secret). The mounted tls.crt is checked against the Secret's content now
// by its fingerprint, as a hot config's is; the leaves themselves are
// public and taken as the agent read them: a pod can only speak for its
// own ports.

var servedResults = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_served_certificate_checks_total",
	Help: "Changes of what a pod's port presents, as its reload agent reports them, by result: current (the leaf mounted), stale (an older one: the program has not read the renewal), other (a certificate not from the Secret), unreachable (no TLS answer in time).",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(servedResults) }

// certEntries judges the certificate parts of a report of pod.
func (h *Handler) certEntries(ctx context.Context, pod *corev1.Pod, fingerprintKey []byte, reports []reload.CertReport, now time.Time) ([]reload.CertEntry, error) {
	checked := reload.ServingCertsOf(pod)
	previous := reload.CertEntriesOf(pod)
	var out []reload.CertEntry
	for _, r := range reports {
		if !slices.ContainsFunc(checked, func(c reload.ServingCert) bool { return c.Port == r.Port && c.Secret == r.Secret }) ||
			slices.ContainsFunc(out, func(e reload.CertEntry) bool { return e.Port == r.Port }) || !validCertReport(r) {
			continue
		}
		e := reload.CertEntry{Port: r.Port, Secret: r.Secret, Result: r.Result, Presented: r.Presented, Mounted: r.Mounted,
			SwappedAt: r.SwappedAt.UTC(), CheckedAt: r.CheckedAt.UTC(), Message: reload.Cut(r.Message)}
		if e.Presented != nil {
			p := *e.Presented
			e.Presented = &p
		}
		o, err := h.Inventory.Get(ctx, refs.Secret, pod.Namespace, r.Secret)
		if err != nil {
			return nil, err
		}
		e.Certificate = o.Annotations[cmapi.CertificateNameKey]
		kd, _, err := h.contentOf(ctx, refs.Secret, pod.Namespace, r.Secret, func(kd map[string]string) bool {
			return reload.Matches(fingerprintKey, r.Keys, false, kd)
		})
		if err != nil {
			return nil, err
		}
		e.MountedCurrent = kd != nil
		// Since is configward's clock, not the agent's: how long a port
		// has been stale decides an eviction.
		p, known := previous[e.Port]
		e.Since = now
		if known && p.Result == e.Result && reload.SameLeaf(p.Presented, e.Presented) && !p.Since.IsZero() {
			e.Since = p.Since
		}
		if !known || p.Result != e.Result || !reload.SameLeaf(p.Presented, e.Presented) {
			servedResults.WithLabelValues(e.Result).Inc()
			// One Event per pod and port an hour: the leaves are the
			// agent's word, and a pod that reported a new one each time
			// must not make configward write an Event each time.
			if e.Result == reload.CertStale && h.stale.first(string(pod.UID)+"/"+fmt.Sprint(e.Port), now) {
				h.staleCert(ctx, pod, e)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// validCertReport says r is a finding an agent makes: a known result, a
// presented leaf where there is one, and serials and digests of their
// size (a certificate serial is at most 20 bytes).
func validCertReport(r reload.CertReport) bool {
	leafOK := func(l reload.Leaf) bool {
		return len(l.Serial) > 0 && len(l.Serial) <= 40 && isHex(l.Serial) && (l.SHA256 == "" || len(l.SHA256) == 64 && isHex(l.SHA256))
	}
	switch r.Result {
	case reload.CertCurrent, reload.CertStale, reload.CertOther:
		if r.Presented == nil || !leafOK(*r.Presented) {
			return false
		}
	case reload.CertUnreachable:
		if r.Presented != nil {
			return false
		}
	default:
		return false
	}
	return leafOK(r.Mounted)
}

func isHex(s string) bool {
	if len(s)%2 == 1 {
		s = "0" + s
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// staleCert records a Warning Event on the pod's workload: which pod and
// port present which leaf while which is mounted.
func (h *Handler) staleCert(ctx context.Context, pod *corev1.Pod, e reload.CertEntry) {
	var regarding client.Object = pod
	if w, ok, _ := h.Kinds.TopWorkloadOf(ctx, h.Pods, pod); ok {
		regarding = w.Obj
	}
	h.Events.Eventf(regarding, pod, corev1.EventTypeWarning, "ServedCertificateStale", "CheckServedCertificate",
		"pod %s port %d presents certificate serial %s (not after %s) while it mounts serial %s (not after %s) from %s: its program has not read the renewed certificate",
		pod.Name, e.Port, e.Presented.Serial, e.Presented.NotAfter.Format(time.RFC3339), e.Mounted.Serial, e.Mounted.NotAfter.Format(time.RFC3339), reload.CertSource(e.Secret, e.Certificate))
}
