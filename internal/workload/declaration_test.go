package workload

import (
	"strings"
	"testing"
)

// Mistakes in the file are worded for people: which entry, which field,
// what was expected; never Go type names.
func TestDeclarationErrorsForPeople(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"group: x", `expected a list of {group, version, kind, resource, podTemplatePath, templateRefPath, notRolledWhen, controllers}`},
		{"- {group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts, podTemplatePath: spec.template,\n" +
			"   notRolledWhen: [{path: spec.paused, equals: true, why: paused}]}",
			`workload kind 1: notRolledWhen.equals: expected a string, not bool (quote it: "true")`},
		{"- {group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts, podTemplatePath: spec.template, pause: true}",
			`workload kind 1: unknown field "pause"`},
		{"- {group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts, podTemplatePath: spec.template,\n" +
			"   notRolledWhen: [{path: spec.paused, why: paused}]}",
			`notRolledWhen[0].equals is required`},
	} {
		_, err := ParseDeclarations([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Go ") {
			t.Errorf("%s:\n error %v\n want  %s", tc.yaml, err, tc.want)
		}
	}
}
