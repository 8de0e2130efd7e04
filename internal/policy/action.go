package policy

import (
	"fmt"
	"strings"
)

// Action is what happens to a request a rule finds a problem with.
type Action string

const (
	Deny  Action = "Deny"  // the request is rejected
	Warn  Action = "Warn"  // allowed; kubectl prints a warning
	Audit Action = "Audit" // allowed silently; recorded as Event, metric and audit annotation
	Off   Action = "Off"   // the rule does not run
)

// Rule ids.
const (
	SubpathConfig     = "subpath-config"
	HotConfigInEnv    = "hot-config-in-env"
	SecretInEnv       = "secret-in-env"
	MissingConfigRef  = "missing-config-ref"
	SecretFileMode    = "secret-file-mode"
	ConfigSchema      = "config-schema"
	OutOfPipelineEdit = "out-of-pipeline-edit"
	ConfigInUseDelete = "config-in-use-delete"
)

// Defaults are the built-in actions of design.md. subpath-config has none
// here because its findings carry their own (Deny for hot config, Warn where
// rollouts are off).
var Defaults = map[string]Action{
	HotConfigInEnv:    Deny,
	SecretInEnv:       Warn,
	MissingConfigRef:  Warn,
	SecretFileMode:    Audit,
	ConfigSchema:      Deny,
	OutOfPipelineEdit: Deny,
	ConfigInUseDelete: Deny,
}

// strictness orders actions: where several policies set a rule, the
// strictest wins.
var strictness = map[Action]int{Off: 0, Audit: 1, Warn: 2, Deny: 3}

// Stricter returns the stricter of two actions.
func Stricter(a, b Action) Action {
	if strictness[b] > strictness[a] {
		return b
	}
	return a
}

// Builtin reports whether id is a built-in rule.
func Builtin(id string) bool {
	_, ok := Defaults[id]
	return ok || id == SubpathConfig
}

// Settings are the actions in force in one namespace, merged from the
// ConfigPolicies that select it (the zero value: built-in defaults).
type Settings struct {
	// Actions holds, per rule, the strictest action the policies set.
	Actions map[string]Action
	// Defaulted marks built-in rules that at least one selecting policy
	// leaves at its default: the default then takes part in "strictest wins".
	Defaulted map[string]bool
	// Custom holds the custom rules the selecting policies declare, with
	// their default action. When Scoped, the findings of custom rules no
	// selecting policy declares are dropped: a policy's custom rules apply
	// only where that policy does.
	Custom map[string]Action
	Scoped bool
	// Exemptible lists the rules every selecting policy lets objects exempt
	// themselves from (configward.dev/exempt.<rule-id>).
	Exemptible map[string]bool
}

// ActionFor decides the action of a finding. An exempted finding is
// audited. Otherwise the policies' action for the rule counts, made
// stricter by the default when a policy leaves the rule at its default.
// The default is the finding's own (subpath-config), the rule's, a custom
// rule's declared action, and finally Warn for a custom rule nobody
// configured (offline, without policies).
func (s Settings) ActionFor(f Finding) Action {
	if f.Exemption != "" {
		return Audit
	}
	def := f.Action
	if def == "" {
		if a, ok := Defaults[f.Rule]; ok {
			def = a
		} else if a, ok := s.Custom[f.Rule]; ok {
			def = a
		} else if Builtin(f.Rule) {
			def = Deny
		} else if s.Scoped {
			return Off
		} else {
			def = Warn
		}
	}
	a, ok := s.Actions[f.Rule]
	if !ok {
		return def
	}
	if s.Defaulted[f.Rule] {
		return Stricter(a, def)
	}
	return a
}

// ExemptAnnotationPrefix, followed by a rule id, is the annotation an
// object exempts itself from that rule with; its value is the reason.
const ExemptAnnotationPrefix = "configward.dev/exempt."

// Exempt marks the findings the object's annotations exempt, where the
// settings allow it, and returns notes for exemptions that do not count
// (not allowed, or without a reason), so the user learns why.
func (s Settings) Exempt(findings []Finding, annotations map[string]string) (notes []string) {
	seen := map[string]bool{}
	for i := range findings {
		f := &findings[i]
		reason, ok := annotations[ExemptAnnotationPrefix+f.Rule]
		if !ok {
			continue
		}
		reason = strings.TrimSpace(reason)
		switch {
		case reason == "":
			if !seen[f.Rule] {
				notes = append(notes, fmt.Sprintf("[%s] %s%s has no reason, so it does not count: write why the object is exempt as the annotation's value", f.Rule, ExemptAnnotationPrefix, f.Rule))
			}
		case !s.Exemptible[f.Rule]:
			if !seen[f.Rule] {
				notes = append(notes, fmt.Sprintf("[%s] %s%s does not count here: the ConfigPolicies governing this namespace do not all set rules.%s.allowExemption, so the rule applies as usual", f.Rule, ExemptAnnotationPrefix, f.Rule, f.Rule))
			}
		default:
			f.Exemption = reason
		}
		seen[f.Rule] = true
	}
	return notes
}

// Decision sorts findings by action.
type Decision struct {
	Denied, Warned, Audited []Finding
}

// Decide applies the settings to findings.
func (s Settings) Decide(findings []Finding) Decision {
	var d Decision
	for _, f := range findings {
		switch s.ActionFor(f) {
		case Deny:
			d.Denied = append(d.Denied, f)
		case Warn:
			d.Warned = append(d.Warned, f)
		case Audit:
			d.Audited = append(d.Audited, f)
		}
	}
	return d
}

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
