package reports

import (
	"sync"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/workload"
)

// What pods serve: for each top-level workload whose pods' agents check a
// port (configward.dev/serving-cert), their ServingCertificate conditions
// (written by the webhook from the agents' reports) give the Report a
// certificate-served result and the gauges the earliest presented expiry
// and the stale pods, per workload.

var (
	servedExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configward_served_certificate_expiry_timestamp_seconds",
		Help: "When the earliest certificate the pods of a workload present ends (Unix seconds), as their reload agents read it from the port (configward.dev/serving-cert): the certificate served, not the Secret's.",
	}, []string{"namespace", "workload"})
	servedStale = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configward_served_certificate_stale_pods",
		Help: "Pods of a workload that present an older certificate than the one they mount: their program has not read the renewal.",
	}, []string{"namespace", "workload"})
)

func init() { metrics.Registry.MustRegister(servedExpiry, servedStale) }

// servedSeries remembers the workloads each namespace published series
// for, so a workload gone (or no longer checked) loses them.
type servedSeries struct {
	mu sync.Mutex
	by map[string]map[string]bool
}

func (s *servedSeries) publish(ns string, now map[string]reload.CertTally) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]map[string]bool{}
	}
	for w := range s.by[ns] {
		if _, ok := now[w]; !ok {
			servedExpiry.DeleteLabelValues(ns, w)
			servedStale.DeleteLabelValues(ns, w)
		}
	}
	seen := map[string]bool{}
	for w, t := range now {
		seen[w] = true
		servedStale.WithLabelValues(ns, w).Set(float64(t.Pods[reload.CertStale]))
		if t.Expires != nil {
			servedExpiry.WithLabelValues(ns, w).Set(float64(t.Expires.Unix()))
		} else {
			servedExpiry.DeleteLabelValues(ns, w)
		}
	}
	s.by[ns] = seen
}

// servedCerts judges what the pods of each workload of ns serve, publishes
// the gauges, and returns the Reports' results and when a verdict changes
// by time alone (zero: never).
func (d *driftController) servedCerts(ns string, objs []workload.Object, live map[types.UID][]*corev1.Pod, now time.Time) ([]subjectResults, time.Time) {
	tallies := map[string]reload.CertTally{}
	var out []subjectResults
	var next time.Time
	for _, w := range objs {
		t := reload.CountCerts(live[w.Obj.GetUID()])
		if t.Checked() == 0 {
			continue
		}
		gvk := w.Type.Kind.GroupVersionKind()
		tallies[gvk.Kind+"/"+w.Obj.GetName()] = t
		out = append(out, subjectResults{subject: report.Subject(gvk.GroupVersion().String(), gvk.Kind, ns, w.Obj.GetName(), w.Obj.GetUID()),
			results: []openreports.ReportResult{report.CertificateResult(t, d.opts.Certs, now)}})
		if at := report.NextCertChange(t, d.opts.Certs, now); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	d.served.publish(ns, tallies)
	return out, next
}
