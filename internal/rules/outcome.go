package rules

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

// Outcome is what one request's findings come to: the decision, and notes
// for the user about exemptions that did not count (see Settings.Exempt).
type Outcome struct {
	Decision
	Notes []Finding
}

// Options qualify Apply.
type Options struct {
	// Unchanged says the request leaves what the rules judge as it was:
	// an update that does not change the pod spec (a rollout re-stamp, a
	// scale, a label). Refusing it would not fix a problem admitted before
	// (or before the rule existed) and would only block the workload, so
	// its denials come back as warnings.
	Unchanged bool
}

// Apply turns findings into an outcome under the settings: exemptions the
// object's annotations claim (where allowed), then each finding's action.
// Admission and `configward check` both decide here, so they give the same
// actions and the same notes.
func Apply(s Settings, findings []Finding, annotations map[string]string, o Options) Outcome {
	notes := s.Exempt(findings, annotations)
	d := s.Decide(findings)
	if o.Unchanged {
		d.Warned = append(d.Warned, d.Denied...)
		d.Denied = nil
	}
	return Outcome{Decision: d, Notes: notes}
}
