package report

import (
	"fmt"
	"strconv"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
)

// CertificateServed is the rule of the result that says whether a
// workload's pods serve the certificates they mount
// (configward.dev/serving-cert), judged on the certificate presented.
const CertificateServed = "certificate-served"

// Properties of a certificate-served result.
const (
	PropExpires   = "expires"
	PropStalePods = "stalePods"
)

// CertSettings are the controller's served-certificate settings.
type CertSettings struct {
	// Grace is how long a port may present a stale leaf before the result
	// fails; Warning how long before the presented leaf ends it warns.
	Grace, Warning time.Duration
}

// CertificateResult is the certificate-served result of a workload whose
// pods' agents check ports (t.Checked() > 0): fail when a pod presents a
// stale leaf past the grace, or one that has expired; warn while a stale
// leaf is within the grace, when the earliest presented leaf ends within
// the warning, or a port presents another certificate or none; pass
// otherwise. Its text names times, not durations from now, so it is
// written when where the pods stand changes, not with each look.
func CertificateResult(t reload.CertTally, s CertSettings, now time.Time) openreports.ReportResult {
	res := openreports.ReportResult{Rule: CertificateServed, Category: "Served certificate", Properties: map[string]string{
		PropStalePods: strconv.Itoa(t.Pods[reload.CertStale])}}
	if t.Expires != nil {
		res.Properties[PropExpires] = t.Expires.UTC().Format(time.RFC3339)
	}
	var late *reload.StalePort
	for i := range t.Stale {
		if now.Sub(t.Stale[i].Since) >= s.Grace {
			late = &t.Stale[i]
			break
		}
	}
	switch {
	case late != nil:
		res.Result, res.Severity = "fail", "high"
		res.Description = fmt.Sprintf("pod %s port %d has presented certificate serial %s since %s while it mounts serial %s from %s: its program has not read the renewed certificate",
			late.Pod, late.Port, late.Presented, late.Since.UTC().Format(time.RFC3339), late.Mounted, reload.CertSource(late.Secret, late.Certificate))
	case t.Expires != nil && !now.Before(*t.Expires):
		res.Result, res.Severity = "fail", "critical"
		res.Description = fmt.Sprintf("a pod presents a certificate that expired at %s", t.Expires.UTC().Format(time.RFC3339))
	case len(t.Stale) > 0:
		p := t.Stale[0]
		res.Result, res.Severity = "warn", "medium"
		res.Description = fmt.Sprintf("pod %s port %d presents certificate serial %s while it mounts serial %s from %s (since %s; the grace ends %s)",
			p.Pod, p.Port, p.Presented, p.Mounted, reload.CertSource(p.Secret, p.Certificate), p.Since.UTC().Format(time.RFC3339), p.Since.Add(s.Grace).UTC().Format(time.RFC3339))
	case t.Expires != nil && t.Expires.Sub(now) <= s.Warning:
		res.Result, res.Severity = "warn", "medium"
		res.Description = fmt.Sprintf("the earliest certificate a pod presents expires at %s", t.Expires.UTC().Format(time.RFC3339))
	case t.Pods[reload.CertOther] > 0 || t.Pods[reload.CertUnreachable] > 0:
		res.Result, res.Severity = "warn", "low"
		res.Description = fmt.Sprintf("%d pod(s) present a certificate not from their Secret, %d none (see the pods' %s condition)",
			t.Pods[reload.CertOther], t.Pods[reload.CertUnreachable], v1alpha1.ServingCertConditionType)
	case t.Pods[reload.CertPending] > 0:
		res.Result = "skip"
		res.Description = fmt.Sprintf("%d pod(s) have not reported what they serve yet", t.Pods[reload.CertPending])
	default:
		res.Result = "pass"
		res.Description = "every pod presents the certificate it mounts"
		if t.Expires != nil {
			res.Description += fmt.Sprintf("; the earliest expires at %s", t.Expires.UTC().Format(time.RFC3339))
		}
	}
	return res
}

// NextCertChange is when res's verdict changes by time alone (a grace
// ends, the warning starts, a certificate expires), zero for never.
func NextCertChange(t reload.CertTally, s CertSettings, now time.Time) time.Time {
	var next time.Time
	consider := func(at time.Time) {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for _, p := range t.Stale {
		consider(p.Since.Add(s.Grace))
	}
	if t.Expires != nil {
		consider(t.Expires.Add(-s.Warning))
		consider(*t.Expires)
	}
	return next
}
