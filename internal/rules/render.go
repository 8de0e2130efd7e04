package rules

import (
	"fmt"
	"strings"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// MaxWarning is where the API server truncates an admission warning.
const MaxWarning = 256

// Line renders a finding the way users see it: "[rule-id] message".
func Line(f Finding) string { return "[" + f.Rule + "] " + f.Message }

// Warning renders a finding as an admission warning, kept within what the
// API server passes on whole; the Event recorded for it has the full text.
//
// A warning is one line: the API server drops admission warnings that hold
// control characters, so a multi-line message (config-schema lists one
// violation per line) is joined with "; ".
func Warning(f Finding) string {
	var b strings.Builder
	for i, l := range strings.Split(Line(f), "\n") {
		if i > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(strings.TrimSpace(l))
	}
	w := b.String()
	if len(w) > MaxWarning {
		w = w[:MaxWarning-len(" (see Events)")-3] + "... (see Events)"
	}
	return w
}

// ActionNote says what was done with a finding, and why when exempted.
func ActionNote(f Finding, action Action) string {
	if f.Exemption != "" {
		return fmt.Sprintf("%s: exempted by %s%s: %q", action, v1alpha1.ExemptAnnotationPrefix, f.Rule, f.Exemption)
	}
	return string(action)
}

// EventReason turns a rule id into an Event reason ("secret-in-env" ->
// "SecretInEnv"), the CamelCase form Events use.
func EventReason(rule string) string {
	var b strings.Builder
	for _, part := range strings.Split(rule, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
