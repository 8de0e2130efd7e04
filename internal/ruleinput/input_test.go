package ruleinput

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/configward/configward/internal/refs"
)

// The rules rely on two derived parts of the input: the references again
// by how they reach the container, and each target's missing keys.
// policies/rules_test.rego builds its inputs the same way; this pins that
// the Go side does what those tests assume.
func TestValueViewsAndMissingKeys(t *testing.T) {
	exists := Target{Known: true, Exists: true, Keys: []string{"a", "b"}, Reload: "rollout"}
	in := Input{References: []Reference{
		{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "env", Via: refs.Env, Keys: []string{"a", "x"}}, Target: exists},
		{Ref: refs.Ref{Kind: refs.Secret, Name: "from", Via: refs.EnvFrom}, Target: exists},
		{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "vol", Via: refs.Volume, Keys: []string{"y"}}, Target: Target{Known: true}},
		{Ref: refs.Ref{Kind: refs.Secret, Name: "proj", Via: refs.Projected}, Target: exists},
	}}
	v, err := in.Value(false)
	if err != nil {
		t.Fatal(err)
	}
	doc := v.(ast.Object)
	names := func(key string) []string {
		var out []string
		arr := doc.Get(ast.StringTerm(key)).Value.(*ast.Array)
		arr.Foreach(func(r *ast.Term) {
			out = append(out, string(r.Get(ast.StringTerm("name")).Value.(ast.String)))
		})
		return out
	}
	for key, want := range map[string][]string{
		"references":       {"env", "from", "vol", "proj"},
		"envReferences":    {"env", "from"},
		"volumeReferences": {"vol", "proj"},
	} {
		if got := names(key); len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) || got[len(got)-1] != want[len(want)-1] {
			t.Errorf("%s: got %v, want %v", key, got, want)
		}
	}
	missing := func(i int) string {
		r := doc.Get(ast.StringTerm("references")).Value.(*ast.Array).Elem(i)
		return r.Get(ast.StringTerm("target")).Get(ast.StringTerm("missingKeys")).String()
	}
	// "x" is read and absent; envFrom reads every key; a missing target has
	// no missing keys (the whole object is what is missing).
	for i, want := range []string{`["x"]`, `[]`, `[]`, `[]`} {
		if got := missing(i); got != want {
			t.Errorf("reference %d: missingKeys %s, want %s", i, got, want)
		}
	}
}
