// Package policy evaluates configward's rules, written in Rego. The built-in
// modules are embedded from policies/; custom modules can be added. A set of
// modules is compiled once into a Version with a prepared query that every
// request shares; internal/policystore decides which version is in force
// and swaps versions atomically.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/policies"
)

// query collects the findings of every rule package. Built-in rules live
// under data.configward.rules, custom ones under data.configward.custom.
const query = "f := data.configward[_][_].findings[_]"

// Version is one compiled set of modules.
type Version struct {
	// Hash identifies the module set (sha256 over names and sources).
	Hash string
	// WantsObjects is true when custom modules are loaded. Only custom rules
	// read input.object and input.oldObject (the built-in ones get
	// everything they need as references), and converting a whole object
	// to Rego's representation costs more than evaluating every built-in
	// rule, so without custom rules the objects are left out.
	WantsObjects bool
	prepared     rego.PreparedEvalQuery
}

// Compile compiles modules (file name -> Rego source, v1 syntax) together
// with the built-in ones. Errors carry the file and line.
func Compile(ctx context.Context, custom map[string]string) (*Version, error) {
	modules, err := BuiltinModules()
	if err != nil {
		return nil, err
	}
	for name, src := range custom {
		if _, clash := modules[name]; clash {
			return nil, fmt.Errorf("custom module %q has the name of a built-in module", name)
		}
		modules[name] = src
	}
	opts := []func(*rego.Rego){
		rego.Query(query),
		rego.SetRegoVersion(ast.RegoV1),
		// A builtin error (say, a bad sprintf) must fail the evaluation,
		// not silently drop a finding.
		rego.StrictBuiltinErrors(true),
	}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(modules)) {
		opts = append(opts, rego.Module(name, modules[name]))
		fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(modules[name]), modules[name])
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, err
	}
	return &Version{Hash: hex.EncodeToString(h.Sum(nil)), WantsObjects: len(custom) > 0, prepared: pq}, nil
}

// BuiltinModules returns the embedded rule modules, without their tests.
func BuiltinModules() (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(policies.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") || strings.HasSuffix(path, "_test.rego") {
			return err
		}
		src, err := fs.ReadFile(policies.FS, path)
		if err != nil {
			return err
		}
		out["policies/"+path] = string(src)
		return nil
	})
	return out, err
}

// Eval runs every rule on one input document.
func (v *Version) Eval(ctx context.Context, input ast.Value) ([]rules.Finding, error) {
	rs, err := v.prepared.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return nil, err
	}
	out := make([]rules.Finding, 0, len(rs))
	for _, r := range rs {
		m, ok := r.Bindings["f"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("a rule returned a finding that is not an object: %v", r.Bindings["f"])
		}
		f := rules.Finding{Rule: str(m["rule"]), Message: str(m["message"]), Path: str(m["path"]), Action: rules.Action(str(m["action"]))}
		if f.Rule == "" || f.Message == "" {
			return nil, fmt.Errorf("a rule returned a finding without rule or message: %v", m)
		}
		switch f.Action {
		case "", rules.Deny, rules.Warn, rules.Audit, rules.Off:
		default:
			return nil, fmt.Errorf("rule %s returned the unknown action %q (want Deny, Warn, Audit or Off)", f.Rule, f.Action)
		}
		out = append(out, f)
	}
	// Rego sets have no order a user should see change between requests.
	slices.SortFunc(out, func(a, b rules.Finding) int {
		return strings.Compare(a.Rule+"\x00"+a.Path+"\x00"+a.Message, b.Rule+"\x00"+b.Path+"\x00"+b.Message)
	})
	return out, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
