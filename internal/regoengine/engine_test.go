package regoengine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/ruleinput/ruleinputtest"
	"github.com/configward/configward/internal/rules"
)

// bigInput is the Deployment of 10 containers and 20 references every
// rules benchmark measures.
func bigInput(t testing.TB) ruleinput.Input { return ruleinputtest.BigInput(t) }

func TestBuiltinRulesOnABigDeployment(t *testing.T) {
	version, err := Compile(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := bigInput(t).Value(version.WantsObjects)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := version.EvalBuiltin(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, f := range fs {
		count[f.Rule]++
	}
	if count[rules.HotConfigInEnv] != 1 || count[rules.SecretInEnv] != 10 || len(count) != 2 {
		t.Fatalf("findings by rule: %v", count)
	}
	d := rules.Settings{}.Decide(fs)
	if len(d.Denied) != 1 || len(d.Warned) != 10 {
		t.Fatalf("decision: %d denied, %d warned", len(d.Denied), len(d.Warned))
	}
}

func TestCompileReportsBrokenRegoWithItsLine(t *testing.T) {
	_, err := Compile(context.Background(), []CustomModule{{ID: "broken", File: "custom/broken.rego",
		Source: "package configward.custom.broken\n\nfindings contains f if {\n\tf := \n}\n"}})
	if err == nil || !strings.Contains(err.Error(), "custom/broken.rego:") {
		t.Fatalf("want a compile error naming the file and line, got %v", err)
	}
}

func TestCustomRuleFindingsAndBadActions(t *testing.T) {
	mk := func(action string) []CustomModule {
		return []CustomModule{{Policy: "team-a", ID: "team-label", File: "custom/team.rego", Source: `package configward.custom.team_label
findings contains {"rule": "team-label", "path": "metadata.labels", "message": "needs a team label", "action": "` + action + `"} if {
	not input.object.metadata.labels.team
}`}}
	}
	ctx := context.Background()
	in := ruleinput.Input{Object: []byte(`{"metadata":{"name":"x"}}`)}
	v, err := Compile(ctx, mk("Deny"))
	if err != nil {
		t.Fatal(err)
	}
	val, err := in.Value(v.WantsObjects)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := v.EvalCustom(ctx, val)
	if err != nil || len(fs) != 1 || fs[0].Rule != "team-label" || (rules.Settings{}).ActionFor(fs[0]) != rules.Deny {
		t.Fatalf("custom finding: %v, %v", fs, err)
	}
	// A custom rule's bad finding is its own problem, not the request's.
	v, err = Compile(ctx, mk("deny"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err = v.EvalCustom(ctx, val)
	want := rules.Finding{Rule: "team-label", Message: `custom rule "team-label" of ConfigPolicy "team-a" could not be evaluated: rule team-label returned the unknown action "deny" (want Deny, Warn, Audit or Off); fix the rule in its ConfigPolicy`}
	if err != nil || len(fs) != 1 || fs[0] != want {
		t.Fatalf("want the failure finding %+v, got %+v, %v", want, fs, err)
	}
}

func TestCompileChecksTheCustomRulesPackage(t *testing.T) {
	_, err := Compile(context.Background(), []CustomModule{{ID: "no-latest", File: "custom/x.rego", Source: "package configward.custom.x\nfindings := set()\n"}})
	if err == nil || err.Error() != `custom/x.rego: the module's package is configward.custom.x; custom rule "no-latest" must declare configward.custom.no_latest` {
		t.Fatalf("want a package error, got %v", err)
	}
}

func TestVersionsDifferInHash(t *testing.T) {
	ctx := context.Background()
	before, err := Compile(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Compile(ctx, []CustomModule{{ID: "x", File: "custom/x.rego", Source: "package configward.custom.x\nfindings := set()\n"}})
	if err != nil {
		t.Fatal(err)
	}
	if before.Hash == v.Hash || !v.WantsObjects || before.WantsObjects {
		t.Fatal("a version with custom modules must differ in hash and want objects")
	}
}

// BenchmarkBuiltinRulesInRego measures what a review paid for the built-in
// rules before they ran as Go (BenchmarkBuiltinRules in
// internal/builtinrules), on the same inputs: building the input document
// and evaluating every rule in Rego. It is kept to show the difference and
// what a custom rule's evaluation costs at least.
func BenchmarkBuiltinRulesInRego(b *testing.B) {
	ctx := context.Background()
	version, err := Compile(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range ruleinputtest.Benchmarks(b) {
		b.Run(bc.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := bc.In.Value(version.WantsObjects)
				if err != nil {
					b.Fatal(err)
				}
				fs, err := version.EvalBuiltin(ctx, v)
				if err != nil || len(fs) != bc.Want {
					b.Fatalf("%d findings (%v), want %d", len(fs), err, bc.Want)
				}
			}
		})
	}
}

// teamLabel is a well-behaved custom rule: bigInput's Deployment has no
// team label, so it reports one finding.
var teamLabel = CustomModule{Policy: "team-b", ID: "team-label", File: "configpolicy/team-b/team-label.rego", Source: `package configward.custom.team_label
findings contains {"rule": "team-label", "path": "metadata.labels", "message": "needs a team label"} if {
	not input.object.metadata.labels.team
}`}

func noLatest(body string) CustomModule {
	return CustomModule{Policy: "team-a", ID: "no-latest", File: "configpolicy/team-a/no-latest.rego",
		Source: "package configward.custom.no_latest\n\n" + body}
}

func failure(why string) rules.Finding {
	return rules.Finding{Rule: "no-latest", Message: `custom rule "no-latest" of ConfigPolicy "team-a" could not be evaluated: ` + why + "; fix the rule in its ConfigPolicy"}
}

// A custom rule that does not end, fails, or reports under another id
// yields one finding under its own id saying so, and the built-in rules and
// the other custom rules report as usual. "no-latest" is evaluated first
// (rules go by id), so a runaway one gets half the budget of two rules.
func TestCustomRulesAreContained(t *testing.T) {
	timeout := failure("it ran out of its time budget (50ms of the 100ms the custom rules share per request)")
	for _, tc := range []struct {
		name string
		rule CustomModule
		want []rules.Finding
	}{
		{"a loop that does not end", noLatest(`findings contains f if {
	n := numbers.range(1, 1000)
	some a in n
	some b in n
	some c in n
	some d in n
	a + b + c + d < 0
	f := {"rule": "no-latest", "message": "never"}
}`), []rules.Finding{timeout}},
		{"a range that does not end", noLatest(`findings contains f if {
	some i in numbers.range(1, 1e12)
	i < 0
	f := {"rule": "no-latest", "message": "never"}
}`), []rules.Finding{timeout}},
		{"a walk that explodes", noLatest(`findings contains f if {
	n := numbers.range(1, 300)
	x := [p | some i in n; some j in n; walk([n, n, n], [p, _])]
	count(x) < 0
	f := {"rule": "no-latest", "message": "never"}
}`), []rules.Finding{timeout}},
		{"a failing built-in", noLatest(`findings contains f if {
	f := {"rule": "no-latest", "message": sprintf("%d", [to_number("x")])}
}`), []rules.Finding{failure(`configpolicy/team-a/no-latest.rego:4: eval_builtin_error: to_number: strconv.ParseFloat: parsing "x": invalid syntax`)}},
		{"a conflict", noLatest(`x := 1

x := 2 if true

findings contains {"rule": "no-latest", "message": "m"} if x > 0
`), []rules.Finding{failure("configpolicy/team-a/no-latest.rego:5: eval_conflict_error: rule data.configward.custom.no_latest.x produced conflicting values:\n  1 at configpolicy/team-a/no-latest.rego:3\n  2 at configpolicy/team-a/no-latest.rego:5")}},
		{"a forged rule id", noLatest(`findings contains {"rule": "hot-config-in-env", "path": "spec", "message": "forged"}

findings contains {"rule": "no-latest", "path": "spec", "message": "a finding of its own"}
`), []rules.Finding{
			failure(`reported a finding for rule "hot-config-in-env"; a custom rule may only report its own id "no-latest"`),
			{Rule: "no-latest", Path: "spec", Message: "a finding of its own"},
		}},
		{"a finding without a message", noLatest(`findings contains {"rule": "no-latest"}
`), []rules.Finding{failure(`a rule returned a finding without rule or message: map[rule:no-latest]`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			version, err := Compile(ctx, []CustomModule{teamLabel, tc.rule})
			if err != nil {
				t.Fatal(err)
			}
			in, err := bigInput(t).Value(version.WantsObjects)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			fs, err := version.EvalCustom(ctx, in)
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Errorf("evaluation took %s", took)
			}
			if err != nil {
				t.Fatalf("a custom rule failed the request: %v", err)
			}
			count := map[string]int{}
			var got []rules.Finding
			for _, f := range fs {
				count[f.Rule]++
				if f.Rule == "no-latest" {
					got = append(got, f)
				}
			}
			if count["team-label"] != 1 || len(count) != 2 {
				t.Errorf("the other custom rule's findings: %v", count)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings of no-latest:\n%q\nwant\n%q", got, tc.want)
			}
			for _, f := range got {
				if f.Action != "" {
					t.Errorf("%q carries action %s; the rule's declared action must apply", f.Message, f.Action)
				}
			}
		})
	}
}

func TestCustomRuleBudgetOption(t *testing.T) {
	ctx := context.Background()
	version, err := Compile(ctx, []CustomModule{noLatest(`findings contains f if {
	some i in numbers.range(1, 1e12)
	i < 0
	f := {"rule": "no-latest", "message": "never"}
}`)}, CustomRuleBudget(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	in, err := bigInput(t).Value(version.WantsObjects)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fs, err := version.EvalCustom(ctx, in)
	took := time.Since(start)
	want := failure("it ran out of its time budget (10ms)")
	if err != nil || !slices.Contains(fs, want) || took > 250*time.Millisecond {
		t.Fatalf("after %s: %q, %v; want %q", took, fs, err, want)
	}

	// The request's own deadline is the request's failure, not the rule's.
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	version, err = Compile(ctx, []CustomModule{noLatest(`findings contains f if {
	some i in numbers.range(1, 1e12)
	i < 0
	f := {"rule": "no-latest", "message": "never"}
}`)}, CustomRuleBudget(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if fs, err := version.EvalCustom(short, in); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the request's deadline, got %q, %v", fs, err)
	}
}

func TestSandboxLeavesOut(t *testing.T) {
	out := SandboxedBuiltins()
	for _, name := range []string{"http.send", "net.lookup_ip_addr", "opa.runtime", "time.now_ns", "rand.intn", "uuid.rfc4122", "json.verify_schema"} {
		if !slices.Contains(out, name) {
			t.Errorf("the sandbox keeps %s: %v", name, out)
		}
	}
	for _, name := range []string{"sprintf", "walk", "numbers.range", "time.parse_rfc3339_ns"} {
		if Sandboxed(name) {
			t.Errorf("the sandbox leaves out %s", name)
		}
	}
}
