package configschema

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/rules"
)

// maxViolationsShown bounds one finding's message; the rest are counted.
const maxViolationsShown = 10

// Findings turns what governs a ConfigMap into config-schema findings, one
// per broken schema (and one for a named schema that does not exist).
// Admission and `configward check` both report through it.
func Findings(cm *corev1.ConfigMap, governing []Governing, missing string) []rules.Finding {
	object := fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	var out []rules.Finding
	add := func(msg string) {
		out = append(out, rules.Finding{Rule: rules.ConfigSchema, Message: msg, Path: "data"})
	}
	if missing != "" {
		add(fmt.Sprintf("%s names ConfigSchema %q in %s, which does not exist in namespace %s: a missing schema never means anything goes. Create the schema first, or fix the annotation.",
			object, missing, v1alpha1.SchemaAnnotation, cm.Namespace))
	}
	for _, g := range governing {
		if g.Compiled == nil {
			add(fmt.Sprintf("%s is governed by ConfigSchema %q, which does not compile (%v): fix the schema first.", object, g.Name, g.Err))
			continue
		}
		violations := g.Compiled.Validate(cm.Data, cm.BinaryData)
		if len(violations) == 0 {
			continue
		}
		var b strings.Builder
		noun := "violations"
		if len(violations) == 1 {
			noun = "violation"
		}
		fmt.Fprintf(&b, "%s breaks ConfigSchema %q (%d %s); fix the values and apply again:", object, g.Name, len(violations), noun)
		for i, v := range violations {
			if i == maxViolationsShown {
				fmt.Fprintf(&b, "\n  ... and %d more", len(violations)-maxViolationsShown)
				break
			}
			b.WriteString("\n  " + v.String())
		}
		add(b.String())
	}
	return out
}

// Leaving judges an update that takes cm out of the reach of the schemas
// left (its labels no longer selected, its configward.dev/schema annotation
// changed or removed): the write must still satisfy each of them, or one
// write could both leave a schema and break what it kept out. It returns
// the findings for the schemas the new values break, and the notes for
// those left cleanly, which are recorded, not refused.
func Leaving(cm *corev1.ConfigMap, left []Governing) (findings []rules.Finding, notes []string) {
	object := fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	for _, g := range left {
		broken := Findings(cm, []Governing{g}, "")
		if len(broken) == 0 {
			notes = append(notes, fmt.Sprintf("%s leaves ConfigSchema %q: its values are no longer checked against it.", object, g.Name))
			continue
		}
		for _, f := range broken {
			f.Message = fmt.Sprintf("%s leaves ConfigSchema %q in the same write that changes its values, which must still satisfy it. Leave the schema in a write of its own (its labels or the %s annotation only), then change the values. %s",
				object, g.Name, v1alpha1.SchemaAnnotation, f.Message)
			findings = append(findings, f)
		}
	}
	return findings, notes
}

// CompileFailure is the finding for a ConfigSchema that does not compile,
// which admission refuses and `configward check` reports.
func CompileFailure(cs *v1alpha1.ConfigSchema, err error) rules.Finding {
	return rules.Finding{Rule: rules.ConfigSchema, Path: "spec", Message: fmt.Sprintf(
		"ConfigSchema %s/%s does not compile: %v. Fix the schema and apply again; a stored version that compiled stays in force.",
		cs.Namespace, cs.Name, err)}
}
