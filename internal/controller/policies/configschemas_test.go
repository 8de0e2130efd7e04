package policies

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configschema"
)

func TestReadyCondition(t *testing.T) {
	const inForce = "the last generation that compiled stays in force"
	pattern := field.Invalid(field.NewPath("spec", "keys").Index(0).Child("pattern"), field.OmitValueType{}, `invalid pattern "(["`)
	rule := field.Invalid(field.NewPath("spec", "rules").Key("nope"), field.OmitValueType{}, `unknown rule id "nope"`)
	required := field.Required(field.NewPath("spec", "keys").Index(1).Child("name"), "set a name or a pattern")
	for _, tc := range []struct {
		name       string
		generation int64
		problems   field.ErrorList
		want       metav1.Condition
	}{
		{"compiled", 3, nil, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Compiled",
			Message: "this generation compiled and is in force", ObservedGeneration: 3}},
		{"an empty list is no problem", 4, field.ErrorList{}, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Compiled",
			Message: "this generation compiled and is in force", ObservedGeneration: 4}},
		{"one problem", 5, field.ErrorList{pattern}, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "CompileFailed",
			Message:            `spec.keys[0].pattern: Invalid value: invalid pattern "(["; ` + inForce,
			ObservedGeneration: 5}},
		{"every problem", 6, field.ErrorList{pattern, rule, required}, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "CompileFailed",
			Message: `[spec.keys[0].pattern: Invalid value: invalid pattern "([", spec.rules[nope]: Invalid value: unknown rule id "nope", ` +
				`spec.keys[1].name: Required value: set a name or a pattern]; ` + inForce,
			ObservedGeneration: 6}},
		{"a problem reported twice is told once", 7, field.ErrorList{rule, rule}, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "CompileFailed",
			Message: `spec.rules[nope]: Invalid value: unknown rule id "nope"; ` + inForce, ObservedGeneration: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readyCondition(tc.generation, tc.problems, inForce)
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if got.Type != v1alpha1.ConditionReady {
				t.Fatalf("type %q, want %q", got.Type, v1alpha1.ConditionReady)
			}
		})
	}
}

// The condition the ConfigSchema reconciler writes names every field the
// webhook refuses the same schema for.
func TestReadyConditionOfASchemaThatDoesNotCompile(t *testing.T) {
	cs := &v1alpha1.ConfigSchema{ObjectMeta: metav1.ObjectMeta{Name: "bad", Generation: 2}, Spec: v1alpha1.ConfigSchemaSpec{
		Keys: []v1alpha1.KeySchema{{Pattern: "([", Format: "yaml"}, {Name: "a", Format: "xml"}},
	}}
	_, errs := configschema.Validate(cs)
	const inForce = "the last generation that compiled stays in force"
	c := readyCondition(cs.Generation, errs, inForce)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonCompileFailed || c.ObservedGeneration != 2 {
		t.Fatalf("condition %+v", c)
	}
	for _, want := range []string{"spec.keys[0].pattern", "spec.keys[1].format", inForce} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q does not name %s", c.Message, want)
		}
	}
}
