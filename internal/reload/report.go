package reload

import (
	"strings"
	"time"
	"unicode/utf8"
)

// ReportPath is where configward's webhook server takes the agents'
// reports.
const ReportPath = "/reload-agent/report"

// Report is what the agent sends, as its pod (its token says which), each
// time what it knows changes: per config, the content on disk and what
// the program made of it.
type Report struct {
	Configs []ConfigReport `json:"configs"`
	// Ask, set, makes the report a question, answered with an Answer and
	// kept nowhere: do the configs on disk hold one set? The agent asks
	// before it triggers a reload of a pod that mounts several configs.
	Ask bool `json:"ask,omitempty"`
	// Certificates are what the ports the agent checks present.
	Certificates []CertReport `json:"certificates,omitempty"`
}

// Answer is configward's answer to a report that asks.
type Answer struct {
	Outcome string `json:"outcome"`
	// Holds: no config on the pod's disk is bound to another it mounts
	// with other content than configward's newest write of them together
	// (channel.Expected); the program may read them.
	Holds bool `json:"holds"`
	// WaitingFor names ("Kind/name", by the config the pod mounts) those
	// whose content on disk is not yet what their set holds.
	WaitingFor []string `json:"waitingFor,omitempty"`
	// Sets maps each config the pod mounts that is bound to another to the
	// set it is delivered with ("<record>" or "<record>@<version>"): the
	// agent reports the set it applied, and holds reloads of these while
	// configward cannot be asked.
	Sets map[string]string `json:"sets,omitempty"`
}

// Outcome of a report that asks.
const Asked = "asked"

// Results of a reload.
const (
	// Applied: the program says it took the content in (the reload call
	// succeeded, or its check says so).
	Applied = "applied"
	// Rejected: the program refused it (the reload call or the check
	// failed); it runs what it had.
	Rejected = "rejected"
	// Triggered: the reload was sent, and nothing says what came of it
	// (a signal without a check).
	Triggered = "triggered"
	// Seen: the agent saw the content; the program watches its files and
	// nothing says what it made of them (watch without a check).
	Seen = "seen"
)

// ConfigReport is one config's state in a pod.
type ConfigReport struct {
	// Config is "Kind/name".
	Config string `json:"config"`
	// Keys fingerprint the content on disk now (see Fingerprints); AllKeys
	// says the volume projects every key (no items), so a key the content
	// has and the disk lacks tells another content.
	Keys    map[string]Fingerprint `json:"keys"`
	AllKeys bool                   `json:"allKeys"`
	// SwappedAt is when the kubelet swapped that content in.
	SwappedAt time.Time `json:"swappedAt"`
	// Result is Applied, Rejected, Triggered or Seen, At when the agent
	// learnt it, Message what the program said (cut to MaxMessage).
	Result  string    `json:"result"`
	At      time.Time `json:"at"`
	Message string    `json:"message,omitempty"`
	// Set is the set configward said the content belongs to when the
	// agent triggered the reload ("" for config bound to no other).
	Set string `json:"set,omitempty"`
}

// Withheld stands for a program's message where a hot Secret is among the
// config its agent watches: the program may quote what it could not
// parse, and no Secret value leaves the pod, so its messages stay inside.
const Withheld = "(the program's message is not passed on: this pod's hot config includes a Secret, which it might quote)"

// Shareable says whether a program's messages may leave a pod whose agent
// watches configs ("Kind/name"): not when one is a Secret.
func Shareable(configs []string) bool {
	for _, c := range configs {
		if strings.HasPrefix(c, "Secret/") {
			return false
		}
	}
	return true
}

// MaxMessage bounds what the agent passes on of a program's answer: a
// reason, not a body.
const MaxMessage = 256

// Cut shortens a program's message to MaxMessage bytes, on a character
// boundary.
func Cut(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	s = s[:MaxMessage-3]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
