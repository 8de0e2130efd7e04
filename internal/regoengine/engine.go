// Package regoengine evaluates configward's rules written in Rego. The
// built-in modules are embedded from policies/; custom modules (ConfigPolicy
// customRules) can be added. A set of modules is compiled once into a
// Version whose prepared queries every request shares; internal/configpolicy
// decides which version is in force and swaps versions atomically. A review
// evaluates only the custom rules here (EvalCustom): the built-in ones run
// as Go (internal/builtinrules), and EvalBuiltin evaluates their Rego for
// the parity suite that holds the two together.
//
// Custom rules are sandboxed: they compile without network, runtime and
// non-deterministic built-ins (see SandboxedBuiltins), and each is
// evaluated on its own within a time budget per request. A custom rule that
// fails, runs out of time or reports a finding under another rule's id
// yields one finding under its own id saying so; it never fails the request
// nor stops the other rules.
package regoengine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/policies"
)

// builtinQuery collects the findings of every built-in rule package
// (data.configward.rules.<rule>). Custom rules, under
// data.configward.custom.<rule>, are queried one by one (customQuery).
const builtinQuery = "f := data.configward.rules[_].findings[_]"

func customQuery(id string) string { return "f := data." + Package(id) + ".findings[_]" }

// Package is the package a custom rule's module must declare:
// configward.custom.<id with - as _>.
func Package(id string) string {
	return "configward.custom." + strings.ReplaceAll(id, "-", "_")
}

// CustomModule is one custom rule: the module of a ConfigPolicy's
// spec.customRules entry.
type CustomModule struct {
	// Policy is the ConfigPolicy declaring the rule, for messages.
	Policy string
	// ID is the rule id its findings must carry; the module's package
	// must be Package(ID).
	ID string
	// File names the module in compile errors, e.g.
	// configpolicy/<policy>/<id>.rego; unique in a set.
	File string
	// Source is the module (Rego v1).
	Source string
}

// Option configures Compile.
type Option func(*options)

type options struct {
	budget time.Duration
}

// CustomRuleBudget sets the time each request gives the custom rules
// (DefaultCustomRuleBudget when not set, or set to zero or less).
func CustomRuleBudget(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.budget = d
		}
	}
}

// Version is one compiled set of modules.
type Version struct {
	// Hash identifies the module set (sha256 over names and sources).
	Hash string
	// WantsObjects is true when custom modules are loaded: then, and only
	// then, a review builds the Rego input document, objects and all (the
	// custom rules read input.object and input.oldObject). Without custom
	// rules, nothing of Rego runs on a review (internal/builtinrules).
	WantsObjects bool
	builtin      rego.PreparedEvalQuery
	custom       []customRule // sorted by id
	budget       time.Duration
}

type customRule struct {
	policy, id string
	query      rego.PreparedEvalQuery
}

// Compile compiles the custom modules together with the built-in ones, in
// the sandbox (see SandboxedBuiltins), and prepares one query for the
// built-in rules and one per custom rule. Errors carry the file and line;
// compile errors are an ast.Errors, in which each call of a sandboxed
// built-in is an error of code SandboxErrorCode (see SandboxViolations).
func Compile(ctx context.Context, custom []CustomModule, opts ...Option) (*Version, error) {
	o := options{budget: DefaultCustomRuleBudget}
	for _, opt := range opts {
		opt(&o)
	}
	sources, err := BuiltinModules()
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, m := range custom {
		switch {
		case m.ID == "":
			return nil, fmt.Errorf("custom module %q has no rule id", m.File)
		case ids[m.ID]:
			return nil, fmt.Errorf("custom rule id %q is declared twice", m.ID)
		}
		ids[m.ID] = true
		if _, clash := sources[m.File]; clash {
			return nil, fmt.Errorf("custom module %q has the name of a built-in or another custom module", m.File)
		}
		sources[m.File] = m.Source
	}

	sb := capabilities()
	popts := ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: sb.caps}
	modules := make(map[string]*ast.Module, len(sources))
	var parseErrs ast.Errors
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		src := sources[name]
		fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(src), src)
		mod, err := ast.ParseModuleWithOpts(name, src, popts)
		if err != nil {
			var errs ast.Errors
			if !errors.As(err, &errs) {
				return nil, err
			}
			parseErrs = append(parseErrs, errs...)
			continue
		}
		modules[name] = mod
	}
	if len(parseErrs) > 0 {
		return nil, parseErrs
	}
	for _, m := range custom {
		if got, want := strings.TrimPrefix(modules[m.File].Package.Path.String(), "data."), Package(m.ID); got != want {
			return nil, fmt.Errorf("%s: the module's package is %s; custom rule %q must declare %s", m.File, got, m.ID, want)
		}
	}
	// Configured as rego.New configures the compiler it makes itself.
	compiler := ast.NewCompiler().
		WithCapabilities(sb.caps).
		WithDefaultRegoVersion(ast.RegoV1).
		WithUseTypeCheckAnnotations(true)
	if compiler.Compile(modules); compiler.Failed() {
		return nil, explainSandbox(compiler.Errors)
	}

	prepare := func(query string) (rego.PreparedEvalQuery, error) {
		return rego.New(
			rego.Compiler(compiler),
			rego.Capabilities(sb.caps),
			rego.Query(query),
			rego.SetRegoVersion(ast.RegoV1),
			// A builtin error (say, a bad sprintf) must fail the
			// evaluation, not silently drop a finding.
			rego.StrictBuiltinErrors(true),
		).PrepareForEval(ctx)
	}
	v := &Version{Hash: hex.EncodeToString(h.Sum(nil)), WantsObjects: len(custom) > 0, budget: o.budget}
	if v.builtin, err = prepare(builtinQuery); err != nil {
		return nil, err
	}
	for _, m := range slices.SortedFunc(slices.Values(custom), func(a, b CustomModule) int { return strings.Compare(a.ID, b.ID) }) {
		q, err := prepare(customQuery(m.ID))
		if err != nil {
			return nil, fmt.Errorf("%s: custom rule %q cannot be queried (its findings must be a set of finding objects): %w", m.File, m.ID, err)
		}
		v.custom = append(v.custom, customRule{policy: m.Policy, id: m.ID, query: q})
	}
	return v, nil
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

// EvalBuiltin runs the built-in rules as written in Rego (policies/) on
// one input document; an error there fails the evaluation. Admission,
// `configward check` and the Reports run the same rules as Go
// (internal/builtinrules); this evaluation is the contract they are held
// to by the parity suite.
func (v *Version) EvalBuiltin(ctx context.Context, input ast.Value) ([]rules.Finding, error) {
	rs, err := v.builtin.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return nil, err
	}
	out := make([]rules.Finding, 0, len(rs))
	for _, r := range rs {
		f, err := finding(r)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	rules.SortFindings(out)
	return out, nil
}

// EvalCustom runs each custom rule on its own on one input document,
// within the version's budget (see evalCustom). A version without custom
// rules finds nothing.
func (v *Version) EvalCustom(ctx context.Context, input ast.Value) ([]rules.Finding, error) {
	if len(v.custom) == 0 {
		return nil, nil
	}
	out, err := v.evalCustom(ctx, input, nil)
	if err != nil {
		return nil, err
	}
	rules.SortFindings(out)
	return out, nil
}

// evalCustom evaluates each custom rule on its own and appends its
// findings, or the one finding that says why it has none.
//
// The custom rules share one budget per request. So that a runaway rule
// cannot starve the others, each rule runs under a deadline of its fair
// share of what is left, the remaining time divided by the rules still to
// run, and never less than budget/n: a rule that is quick leaves its time to
// the ones after it, and a rule that runs out is cut at its share, leaving
// the others theirs. Evaluation is cancelled between expressions (and inside
// long built-ins such as numbers.range), so a rule overruns its share by
// little.
func (v *Version) evalCustom(ctx context.Context, input ast.Value, out []rules.Finding) ([]rules.Finding, error) {
	n := len(v.custom)
	end := time.Now().Add(v.budget)
	for i, c := range v.custom {
		share := max(time.Until(end)/time.Duration(n-i), v.budget/time.Duration(n))
		rctx, cancel := context.WithTimeout(ctx, share)
		rs, err := c.query.Eval(rctx, rego.EvalParsedInput(input))
		timedOut := rctx.Err() != nil
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				// The request itself was cancelled or timed out.
				return nil, ctx.Err()
			}
			why := err.Error()
			if timedOut {
				why = "it ran out of its time budget (" + v.budgetNote(share) + ")"
			}
			out = append(out, c.failure(why))
			continue
		}
		// Well-formed findings under the rule's own id pass; the first
		// other one is reported instead of every other one.
		var problem string
		for _, r := range rs {
			f, err := finding(r)
			switch {
			case err != nil:
				if problem == "" {
					problem = err.Error()
				}
			case f.Rule != c.id:
				if problem == "" {
					problem = fmt.Sprintf("reported a finding for rule %q; a custom rule may only report its own id %q", f.Rule, c.id)
				}
			default:
				out = append(out, f)
			}
		}
		if problem != "" {
			out = append(out, c.failure(problem))
		}
	}
	return out, nil
}

// budgetNote describes the share a rule ran out of.
func (v *Version) budgetNote(share time.Duration) string {
	round := func(d time.Duration) time.Duration {
		if d >= time.Millisecond {
			return d.Round(time.Millisecond)
		}
		return d.Round(time.Microsecond)
	}
	if len(v.custom) == 1 {
		return round(v.budget).String()
	}
	return fmt.Sprintf("%s of the %s the custom rules share per request", round(share), round(v.budget))
}

// failure is the one finding of a custom rule that could not be evaluated.
// It carries no action: the rule's declared action applies.
func (c customRule) failure(why string) rules.Finding {
	of := ""
	if c.policy != "" {
		of = fmt.Sprintf(" of ConfigPolicy %q", c.policy)
	}
	return rules.Finding{Rule: c.id, Message: fmt.Sprintf("custom rule %q%s could not be evaluated: %s; fix the rule in its ConfigPolicy", c.id, of, why)}
}

// finding reads one result of a findings query.
func finding(r rego.Result) (rules.Finding, error) {
	m, ok := r.Bindings["f"].(map[string]any)
	if !ok {
		return rules.Finding{}, fmt.Errorf("a rule returned a finding that is not an object: %v", r.Bindings["f"])
	}
	f := rules.Finding{Rule: str(m["rule"]), Message: str(m["message"]), Path: str(m["path"]), Action: rules.Action(str(m["action"]))}
	if f.Rule == "" || f.Message == "" {
		return rules.Finding{}, fmt.Errorf("a rule returned a finding without rule or message: %v", m)
	}
	switch f.Action {
	case "", rules.Deny, rules.Warn, rules.Audit, rules.Off:
	default:
		return rules.Finding{}, fmt.Errorf("rule %s returned the unknown action %q (want Deny, Warn, Audit or Off)", f.Rule, f.Action)
	}
	return f, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
