package rules

import (
	"fmt"
	"strings"

	"github.com/configward/configward/internal/api/v1alpha1"
)

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

// Exempt marks the findings the object's annotations exempt, where the
// settings allow it, and returns notes for exemptions that do not count
// (not allowed, or without a reason), so the user learns why. A note is a
// Finding with no path and no action of its own: it is told, never enforced.
func (s Settings) Exempt(findings []Finding, annotations map[string]string) (notes []Finding) {
	seen := map[string]bool{}
	for i := range findings {
		f := &findings[i]
		reason, ok := annotations[v1alpha1.ExemptAnnotationPrefix+f.Rule]
		if !ok {
			continue
		}
		reason = strings.TrimSpace(reason)
		switch {
		case reason == "":
			if !seen[f.Rule] {
				notes = append(notes, Finding{Rule: f.Rule, Message: fmt.Sprintf("%s%s has no reason, so it does not count: write why the object is exempt as the annotation's value", v1alpha1.ExemptAnnotationPrefix, f.Rule)})
			}
		case !s.Exemptible[f.Rule]:
			if !seen[f.Rule] {
				notes = append(notes, Finding{Rule: f.Rule, Message: fmt.Sprintf("%s%s does not count here: the ConfigPolicies governing this namespace do not all set rules.%s.allowExemption, so the rule applies as usual", v1alpha1.ExemptAnnotationPrefix, f.Rule, f.Rule)})
			}
		default:
			f.Exemption = reason
		}
		seen[f.Rule] = true
	}
	return notes
}
