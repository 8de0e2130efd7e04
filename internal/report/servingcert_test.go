package report

import (
	"strings"
	"testing"
	"time"

	"github.com/configward/configward/internal/reload"
)

// The certificate-served verdict, from the pods' tally and the clock.
func TestCertificateResult(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := CertSettings{Grace: 5 * time.Minute, Warning: 14 * 24 * time.Hour}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	stale := func(since time.Duration) []reload.StalePort {
		return []reload.StalePort{{Pod: "web-b", Port: 8443, Secret: "web-tls", Certificate: "web", Presented: "0A", Mounted: "0B", Since: now.Add(-since)}}
	}
	for name, tc := range map[string]struct {
		tally     reload.CertTally
		result    string
		next      time.Time
		describes string
	}{
		"all current, far from the end": {reload.CertTally{Pods: map[string]int{reload.CertCurrent: 2}, Expires: at(60 * 24 * time.Hour)}, "pass",
			now.Add(46 * 24 * time.Hour), "earliest expires at 2027-02-05T12:00:00Z"},
		"presented one ends within the warning": {reload.CertTally{Pods: map[string]int{reload.CertCurrent: 2}, Expires: at(24 * time.Hour)}, "warn",
			now.Add(24 * time.Hour), "expires at 2026-12-08T12:00:00Z"},
		"presented one has ended": {reload.CertTally{Pods: map[string]int{reload.CertCurrent: 1}, Expires: at(-time.Minute)}, "fail",
			time.Time{}, "expired at"},
		"stale within the grace": {reload.CertTally{Pods: map[string]int{reload.CertStale: 1}, Expires: at(60 * 24 * time.Hour), Stale: stale(time.Minute)}, "warn",
			now.Add(4 * time.Minute), "grace ends 2026-12-07T12:04:00Z"},
		"stale past the grace": {reload.CertTally{Pods: map[string]int{reload.CertStale: 1}, Expires: at(60 * 24 * time.Hour), Stale: stale(6 * time.Minute)}, "fail",
			now.Add(46 * 24 * time.Hour), "pod web-b port 8443 has presented certificate serial 0A since 2026-12-07T11:54:00Z while it mounts serial 0B from Secret web-tls (Certificate web)"},
		"another certificate": {reload.CertTally{Pods: map[string]int{reload.CertOther: 1}, Expires: at(60 * 24 * time.Hour)}, "warn",
			now.Add(46 * 24 * time.Hour), "1 pod(s) present a certificate not from their Secret"},
		"not reported yet": {reload.CertTally{Pods: map[string]int{reload.CertPending: 1}}, "skip", time.Time{}, "not reported"},
	} {
		t.Run(name, func(t *testing.T) {
			res := CertificateResult(tc.tally, s, now)
			if string(res.Result) != tc.result || !strings.Contains(res.Description, tc.describes) {
				t.Errorf("%s %q: want %s saying %q", res.Result, res.Description, tc.result, tc.describes)
			}
			if next := NextCertChange(tc.tally, s, now); !next.Equal(tc.next) {
				t.Errorf("next change %s, want %s", next, tc.next)
			}
		})
	}
}
