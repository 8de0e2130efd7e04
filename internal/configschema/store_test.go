package configschema

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

func TestGoverns(t *testing.T) {
	cs := &v1alpha1.ConfigSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop"},
		Spec: v1alpha1.ConfigSchemaSpec{
			ConfigMapNames: []string{"listed"},
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"config": "app"}},
		},
	}
	for _, tc := range []struct {
		name        string
		cm          string
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		{"listed by name", "listed", nil, nil, true},
		{"selected by label", "other", map[string]string{"config": "app"}, nil, true},
		{"names the schema", "other", nil, map[string]string{v1alpha1.SchemaAnnotation: "app"}, true},
		{"names another schema", "other", nil, map[string]string{v1alpha1.SchemaAnnotation: "nope"}, false},
		{"unrelated", "other", map[string]string{"config": "web"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Governs(cs, tc.cm, tc.labels, tc.annotations); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	// An empty selector must not govern every ConfigMap of the namespace.
	empty := cs.DeepCopy()
	empty.Spec.ConfigMapNames, empty.Spec.Selector = nil, &metav1.LabelSelector{}
	if Governs(empty, "anything", map[string]string{"a": "b"}, nil) {
		t.Fatal("an empty selector governed a ConfigMap")
	}
}

func TestCompileNamesTheEntryAndChecksTheSelector(t *testing.T) {
	cs := &v1alpha1.ConfigSchema{Spec: v1alpha1.ConfigSchemaSpec{
		Keys: []v1alpha1.KeySchema{{Name: "a", Format: "yaml"}, {Pattern: "([", Format: "yaml"}},
	}}
	if _, err := Compile(cs); err == nil {
		t.Fatal("a bad pattern compiled")
	}
	cs.Spec.Keys = cs.Spec.Keys[:1]
	cs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
	if _, err := Compile(cs); err == nil {
		t.Fatal("an invalid selector compiled")
	}
	cs.Spec.Selector = nil
	if _, err := Compile(cs); err != nil {
		t.Fatalf("a good schema did not compile: %v", err)
	}
}
