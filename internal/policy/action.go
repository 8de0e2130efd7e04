package policy

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

// Settings are the actions in force for one request; until ConfigPolicy
// lands they are the defaults.
type Settings struct {
	// Actions overrides the action of a rule for every finding of it.
	Actions map[string]Action
}

// ActionFor decides the action of a finding: an explicit setting for the
// rule wins, then the finding's own default, then the rule's default, and
// finally Warn for a rule nobody configured (a custom rule).
func (s Settings) ActionFor(f Finding) Action {
	if a, ok := s.Actions[f.Rule]; ok {
		return a
	}
	if f.Action != "" {
		return f.Action
	}
	if a, ok := Defaults[f.Rule]; ok {
		return a
	}
	return Warn
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
func Warning(f Finding) string {
	w := Line(f)
	if len(w) > MaxWarning {
		w = w[:MaxWarning-len(" (see Events)")-3] + "... (see Events)"
	}
	return w
}
