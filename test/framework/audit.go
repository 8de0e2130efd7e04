package framework

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuditEvent is what the suites read of one line of the API server's audit
// log (audit.k8s.io/v1 Event at level Metadata).
type AuditEvent struct {
	Verb string `json:"verb"`
	// RequestURI carries the request's query: a dry run says dryRun=All.
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
	// StageTimestamp is when the API server finished the request.
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
}

// DryRun reports whether the request was a server-side dry run, which
// stores nothing.
func (ev AuditEvent) DryRun() bool { return strings.Contains(ev.RequestURI, "dryRun=") }

// AuditEvents reads the audit log written so far and returns the events
// keep accepts.
func (e *Env) AuditEvents(keep func(AuditEvent) bool) ([]AuditEvent, error) {
	f, err := os.Open(e.AuditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev AuditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a line being written
		}
		if keep(ev) {
			out = append(out, ev)
		}
	}
	return out, sc.Err()
}
