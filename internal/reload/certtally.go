package reload

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Where a pod stands with the certificates it serves, as a whole: its
// worst port. Pending: the agent checks ports and has not reported yet.
const CertPending = "pending"

// CertStates lists them in the order they are shown.
var CertStates = []string{CertCurrent, CertStale, CertOther, CertUnreachable, CertPending}

// CertTally is how the pods of one workload stand with the certificates
// they serve.
type CertTally struct {
	// Pods counts the pods whose agent checks a port, by their worst port.
	Pods map[string]int `json:"pods"`
	// Expires is the earliest notAfter any pod presents.
	Expires *time.Time `json:"expires,omitempty"`
	// Stale are the ports presenting a stale leaf, by pod then port (at
	// most MaxStale).
	Stale []StalePort `json:"stale,omitempty"`
}

// StalePort is one pod's port presenting a stale leaf.
type StalePort struct {
	Pod         string    `json:"pod"`
	Port        int       `json:"port"`
	Secret      string    `json:"secret"`
	Certificate string    `json:"certificate,omitempty"`
	Presented   string    `json:"presented"`
	Mounted     string    `json:"mounted"`
	Since       time.Time `json:"since"`
}

// MaxStale bounds the stale ports a CertTally names.
const MaxStale = 10

// worse orders results: a pod counts under its worst port.
var worse = map[string]int{CertCurrent: 0, CertPending: 1, CertUnreachable: 2, CertOther: 3, CertStale: 4}

// CountCerts tallies pods (the live pods of one workload) on the ports
// their agents check. Pods whose agent checks none are not counted.
func CountCerts(pods []*corev1.Pod) CertTally {
	t := CertTally{Pods: map[string]int{}}
	for _, p := range pods {
		ports := ServingCertsOf(p)
		if len(ports) == 0 {
			continue
		}
		entries := CertEntriesOf(p)
		state := CertCurrent
		for _, port := range ports {
			e, ok := entries[port.Port]
			result := e.Result
			if !ok {
				result = CertPending
			}
			if worse[result] > worse[state] {
				state = result
			}
			if e.Presented != nil && (t.Expires == nil || e.Presented.NotAfter.Before(*t.Expires)) {
				at := e.Presented.NotAfter
				t.Expires = &at
			}
			if result == CertStale {
				t.Stale = append(t.Stale, StalePort{Pod: p.Name, Port: e.Port, Secret: e.Secret, Certificate: e.Certificate,
					Presented: e.Presented.Serial, Mounted: e.Mounted.Serial, Since: e.Since})
			}
		}
		t.Pods[state]++
	}
	slices.SortFunc(t.Stale, func(a, b StalePort) int {
		if c := strings.Compare(a.Pod, b.Pod); c != 0 {
			return c
		}
		return a.Port - b.Port
	})
	if len(t.Stale) > MaxStale {
		t.Stale = t.Stale[:MaxStale]
	}
	return t
}

// Checked counts the pods whose agent checks a port.
func (t CertTally) Checked() int {
	n := 0
	for _, c := range t.Pods {
		n += c
	}
	return n
}

// CertSource names where a port's certificate comes from, for people:
// "Secret web-tls (Certificate web)", the Certificate where cert-manager
// issues it.
func CertSource(secret, certificate string) string {
	if certificate == "" {
		return "Secret " + secret
	}
	return "Secret " + secret + " (Certificate " + certificate + ")"
}
