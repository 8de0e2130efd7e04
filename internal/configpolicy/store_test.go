package configpolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/opa/v1/ast"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/rules"
)

const noLatest = `package configward.custom.no_latest

findings contains f if {
	some c in input.object.spec.template.spec.containers
	endswith(c.image, ":latest")
	f := {"rule": "no-latest", "path": "spec.template.spec.containers", "message": sprintf("container %q uses :latest", [c.name])}
}
`

func cp(name string, gen int64, spec v1alpha1.ConfigPolicySpec) *v1alpha1.ConfigPolicy {
	return &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}, Spec: spec}
}

func ns(labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
}

// TestValidate is a table of specs and the exact field errors each gets
// (type and path; the detail by its expected part, since compiler messages
// are OPA's own). Every problem is reported, not only the first.
func TestValidate(t *testing.T) {
	type problem struct {
		typ    field.ErrorType
		field  string
		detail string
	}
	for _, tc := range []struct {
		name string
		spec v1alpha1.ConfigPolicySpec
		want []problem
	}{
		{"a good policy", v1alpha1.ConfigPolicySpec{
			Rules:       map[string]v1alpha1.RuleSettings{"no-latest": {Action: "Deny"}, "secret-in-env": {AllowExemption: true}},
			CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Action: "Warn", Rego: noLatest}},
		}, nil},
		{"invalid selector", v1alpha1.ConfigPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}},
			[]problem{{field.ErrorTypeInvalid, "spec.namespaceSelector", `"Near" is not a valid label selector operator`}}},
		{"unknown rule id", v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"secret-in-envv": {Action: "Deny"}}},
			[]problem{{field.ErrorTypeInvalid, "spec.rules[secret-in-envv]", `unknown rule id "secret-in-envv" (built-in rules: config-in-use-delete, config-schema, hot-config-in-env, missing-config-ref, out-of-pipeline-edit, secret-file-mode, secret-in-env, subpath-config; or declare it in spec.customRules)`}}},
		{"Rego that does not compile", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.custom.no_latest\n\nfindings contains f if {\n\tf := undefined_thing\n}\n"}}},
			[]problem{{field.ErrorTypeInvalid, "spec.customRules", `configpolicy/p/no-latest.rego:4: rego_unsafe_var_error: var undefined_thing is unsafe`}}},
		{"Rego syntax", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.custom.no_latest\n\nfindings contains f if {\n"}}},
			[]problem{{field.ErrorTypeInvalid, "spec.customRules[0].rego", `configpolicy/p/no-latest.rego:4: rego_parse_error: unexpected eof token`}}},
		{"wrong package", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.rules.x\n"}}},
			[]problem{{field.ErrorTypeInvalid, "spec.customRules[0].rego", `the module's package is configward.rules.x; it must be configward.custom.no_latest`}}},
		{"custom id of a built-in", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "secret-in-env", Rego: "package configward.custom.secret_in_env\n"}}},
			[]problem{{field.ErrorTypeInvalid, "spec.customRules[0].id", `"secret-in-env" is the id of a built-in rule`}}},
		{"custom id twice", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: noLatest}, {ID: "no-latest", Rego: noLatest}}},
			[]problem{{field.ErrorTypeDuplicate, "spec.customRules[1].id", ""}}},
		{"bad service account", v1alpha1.ConfigPolicySpec{Pipeline: v1alpha1.PipelineIdentities{ServiceAccounts: []string{"deployer"}}},
			[]problem{{field.ErrorTypeInvalid, "spec.pipeline.serviceAccounts[0]", `service account "deployer": want namespace/name`}}},
		{"every problem at once", v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}},
			Rules:             map[string]v1alpha1.RuleSettings{"nope": {Action: "Deny"}},
			CustomRules:       []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.rules.x\n"}},
			Pipeline:          v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer", "deployer"}},
		}, []problem{
			{field.ErrorTypeInvalid, "spec.namespaceSelector", ""},
			{field.ErrorTypeInvalid, "spec.customRules[0].rego", ""},
			{field.ErrorTypeInvalid, "spec.rules[nope]", ""},
			{field.ErrorTypeInvalid, "spec.pipeline.serviceAccounts[1]", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			compiled, errs := Validate(context.Background(), cp("p", 1, tc.spec))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problems, want %d: %v", len(errs), len(tc.want), errs)
			}
			if (compiled == nil) != (len(tc.want) > 0) {
				t.Fatalf("compiled = %v with %d problems", compiled, len(errs))
			}
			for i, w := range tc.want {
				if errs[i].Type != w.typ || errs[i].Field != w.field || !strings.Contains(errs[i].Detail, w.detail) {
					t.Errorf("problem %d = %s %s %q, want %s %s containing %q", i, errs[i].Type, errs[i].Field, errs[i].Detail, w.typ, w.field, w.detail)
				}
			}
		})
	}
}

func TestSettingsMerge(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Current().Rules(ns(nil)); got.Scoped || got.ActionFor(rules.Finding{Rule: rules.SecretInEnv}) != rules.Warn {
		t.Fatalf("without policies the defaults apply: %+v", got)
	}
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	mustLoad(t, s, cp("strict", 1, v1alpha1.ConfigPolicySpec{NamespaceSelector: team,
		Rules: map[string]v1alpha1.RuleSettings{
			rules.SecretInEnv:   {Action: "Deny", AllowExemption: true},
			rules.SubpathConfig: {AllowExemption: true},
		},
		Pipeline:    v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer"}},
		Rollouts:    v1alpha1.RolloutSettings{ExcludeSecrets: true},
		CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Action: "Deny", Rego: noLatest}},
	}))
	mustLoad(t, s, cp("lenient", 1, v1alpha1.ConfigPolicySpec{
		Rules: map[string]v1alpha1.RuleSettings{
			rules.SecretInEnv:      {Action: "Off"},
			rules.MissingConfigRef: {Action: "Off", AllowExemption: true},
			rules.SubpathConfig:    {AllowExemption: true},
		},
		Pipeline: v1alpha1.PipelineIdentities{Groups: []string{"release"}},
		Rollouts: v1alpha1.RolloutSettings{Disabled: true},
	}))
	a := s.Current()

	both, lenientOnly := a.Rules(ns(map[string]string{"team": "a"})), a.Rules(ns(nil))
	for _, tc := range []struct {
		name string
		s    rules.Settings
		f    rules.Finding
		want rules.Action
	}{
		{"strictest of Deny and Off", both, rules.Finding{Rule: rules.SecretInEnv}, rules.Deny},
		{"Off where only the lenient policy selects", lenientOnly, rules.Finding{Rule: rules.SecretInEnv}, rules.Off},
		{"a policy that leaves a rule at its default keeps the default in play", both, rules.Finding{Rule: rules.MissingConfigRef}, rules.Warn},
		{"custom rule where its policy selects", both, rules.Finding{Rule: "no-latest"}, rules.Deny},
		{"custom rule dropped where its policy does not select", lenientOnly, rules.Finding{Rule: "no-latest"}, rules.Off},
		{"per-finding default untouched", both, rules.Finding{Rule: rules.SubpathConfig, Action: rules.Warn}, rules.Warn},
	} {
		if got := tc.s.ActionFor(tc.f); got != tc.want {
			t.Errorf("%s: %s = %s, want %s", tc.name, tc.f.Rule, got, tc.want)
		}
	}
	if !both.Exemptible[rules.SubpathConfig] || both.Exemptible[rules.SecretInEnv] || both.Exemptible[rules.MissingConfigRef] {
		t.Errorf("exemptible where every selecting policy allows it: %v", both.Exemptible)
	}
	if ids := a.Pipeline(ns(map[string]string{"team": "a"})); len(ids.ServiceAccounts) != 1 || len(ids.Groups) != 1 {
		t.Errorf("identities are combined: %+v", ids)
	}
	if p := a.For(ns(map[string]string{"team": "a"})); !p.Rollouts || !p.Secrets {
		t.Errorf("rollouts stay on (and Secrets in) unless every policy says otherwise: %+v", p)
	}
	if a.For(ns(nil)).Rollouts {
		t.Error("rollouts are off where the only selecting policy turns them off")
	}
}

func TestLastKnownGood(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	good := cp("p", 1, v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{rules.SecretInEnv: {Action: "Deny"}}})
	mustLoad(t, s, good)
	before := s.Current()
	broken := cp("p", 2, v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{rules.SecretInEnv: {Action: "Off"}},
		CustomRules: []v1alpha1.CustomRule{{ID: "x", Rego: "package configward.custom.x\nfindings contains f if { f := nope }\n"}}})
	if err := s.Load(ctx, broken); err == nil {
		t.Fatal("a broken generation was loaded")
	}
	if s.Current() != before {
		t.Fatal("a failed load replaced the set in force")
	}
	if got := s.Current().Rules(nil).ActionFor(rules.Finding{Rule: rules.SecretInEnv}); got != rules.Deny {
		t.Errorf("the last good generation is not in force: %s", got)
	}
	s.Forget("p")
	if got := s.Current().Rules(nil).ActionFor(rules.Finding{Rule: rules.SecretInEnv}); got != rules.Warn {
		t.Errorf("a deleted policy is still in force: %s", got)
	}
}

func TestExempt(t *testing.T) {
	s := rules.Settings{Exemptible: map[string]bool{rules.SecretInEnv: true}}
	fs := []rules.Finding{{Rule: rules.SecretInEnv}, {Rule: rules.HotConfigInEnv}, {Rule: rules.MissingConfigRef}}
	notes := s.Exempt(fs, map[string]string{
		"configward.dev/exempt.secret-in-env":      "vendor image reads env only",
		"configward.dev/exempt.hot-config-in-env":  "because",
		"configward.dev/exempt.missing-config-ref": " ",
	})
	if fs[0].Exemption != "vendor image reads env only" || s.ActionFor(fs[0]) != rules.Audit {
		t.Errorf("allowed exemption: %+v", fs[0])
	}
	if fs[1].Exemption != "" || fs[2].Exemption != "" {
		t.Errorf("exemptions that do not count were applied: %+v", fs)
	}
	want := []string{
		"[hot-config-in-env] configward.dev/exempt.hot-config-in-env does not count here: the ConfigPolicies governing this namespace do not all set rules.hot-config-in-env.allowExemption, so the rule applies as usual",
		"[missing-config-ref] configward.dev/exempt.missing-config-ref has no reason, so it does not count: write why the object is exempt as the annotation's value",
	}
	var got []string
	for _, n := range notes {
		got = append(got, rules.Line(n))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes = %q\nwant %q", notes, want)
	}
}

func mustLoad(t *testing.T, s *Store, p *v1alpha1.ConfigPolicy) {
	t.Helper()
	if err := s.Load(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// A custom rule id belongs to one policy: a second policy declaring it is
// refused at admission (Check), and when it was stored anyway (the webhook
// was not there) it stays out of force, says why, and comes in once the
// first policy is gone.
func TestCustomRuleIDsBelongToOnePolicy(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	first := cp("first", 1, v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: noLatest}}})
	second := cp("second", 1, v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: noLatest}}})
	mustLoad(t, s, first)

	_, errs := s.Check(ctx, second)
	if len(errs) != 1 || errs[0].Field != "spec.customRules" || !strings.Contains(errs[0].Detail, `custom rule id "no-latest" is declared by ConfigPolicy "first" too`) {
		t.Fatalf("Check = %v", errs)
	}
	if _, errs := s.Check(ctx, cp("first", 2, first.Spec)); len(errs) != 0 {
		t.Fatalf("a policy does not clash with its own earlier generation: %v", errs)
	}

	if err := s.Load(ctx, second); err == nil {
		t.Fatal("a clashing policy was put in force")
	}
	o, ok := s.OutcomeOf("second")
	if !ok || o.Generation != 1 || len(o.Problems) != 1 || !strings.Contains(o.Problems[0].Detail, "cannot be in force with the other ConfigPolicies") {
		t.Fatalf("outcome = %+v, %v", o, ok)
	}
	if _, ok := s.InForce("second"); ok {
		t.Fatal("second is in force")
	}

	s.Forget("first")
	if _, ok := s.InForce("second"); !ok {
		t.Fatal("second waited for first to go and was not put in force")
	}
	if o, _ := s.OutcomeOf("second"); len(o.Problems) != 0 {
		t.Fatalf("outcome still has problems: %v", o.Problems)
	}
}

// Custom rules compile without network, runtime and non-deterministic
// built-ins: a policy calling one is refused, with the rule, the line and
// the built-in named.
func TestValidateSandbox(t *testing.T) {
	const why = ", which ConfigPolicy rules may not use: network, runtime and non-deterministic built-ins are not available (rules must decide from their input alone)"
	call := func(id, expr string) v1alpha1.CustomRule {
		return v1alpha1.CustomRule{ID: id, Rego: "package " + ModulePackage(id) + "\n\nfindings contains f if {\n\tx := " + expr + "\n\tf := {\"rule\": \"" + id + "\", \"message\": sprintf(\"%v\", [x])}\n}\n"}
	}
	for _, tc := range []struct {
		name  string
		rules []v1alpha1.CustomRule
		want  field.ErrorList
	}{
		{"http.send", []v1alpha1.CustomRule{call("no-latest", `http.send({"method": "GET", "url": "https://example.com"})`)}, field.ErrorList{
			field.Invalid(field.NewPath("spec", "customRules").Index(0).Child("rego"), field.OmitValueType{}, "configpolicy/p/no-latest.rego:4: calls http.send"+why),
		}},
		{"opa.runtime and time.now_ns, in the second rule", []v1alpha1.CustomRule{
			{ID: "no-latest", Rego: noLatest},
			call("clock", "[opa.runtime(), time.now_ns()]"),
		}, field.ErrorList{
			field.Invalid(field.NewPath("spec", "customRules").Index(1).Child("rego"), field.OmitValueType{}, "configpolicy/p/clock.rego:4: calls opa.runtime"+why),
			field.Invalid(field.NewPath("spec", "customRules").Index(1).Child("rego"), field.OmitValueType{}, "configpolicy/p/clock.rego:4: calls time.now_ns"+why),
		}},
		{"non-deterministic ones", []v1alpha1.CustomRule{call("dice", `[rand.intn("x", 6), uuid.rfc4122("x"), net.lookup_ip_addr("example.com")]`)}, field.ErrorList{
			field.Invalid(field.NewPath("spec", "customRules").Index(0).Child("rego"), field.OmitValueType{}, "configpolicy/p/dice.rego:4: calls rand.intn"+why),
			field.Invalid(field.NewPath("spec", "customRules").Index(0).Child("rego"), field.OmitValueType{}, "configpolicy/p/dice.rego:4: calls uuid.rfc4122"+why),
			field.Invalid(field.NewPath("spec", "customRules").Index(0).Child("rego"), field.OmitValueType{}, "configpolicy/p/dice.rego:4: calls net.lookup_ip_addr"+why),
		}},
		{"a function of the rule's own is no built-in", []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.custom.no_latest\n\nnow_ns := 1\n\nsend(x) := x\n\nfindings contains {\"rule\": \"no-latest\", \"message\": send(\"m\")} if now_ns > 0\n"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Validate(context.Background(), cp("p", 1, v1alpha1.ConfigPolicySpec{CustomRules: tc.rules}))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problems, want %d: %v", len(errs), len(tc.want), errs)
			}
			for i := range tc.want {
				if *errs[i] != *tc.want[i] {
					t.Errorf("problem %d = %s %s %q\nwant %s %s %q", i, errs[i].Type, errs[i].Field, errs[i].Detail, tc.want[i].Type, tc.want[i].Field, tc.want[i].Detail)
				}
			}
		})
	}
}

// A custom rule that fails at evaluation yields one finding under its id,
// which takes the action its ConfigPolicy declares.
func TestCustomRuleFailureTakesTheDeclaredAction(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	mustLoad(t, s, cp("team-a", 1, v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Action: "Deny",
		Rego: "package configward.custom.no_latest\n\nfindings contains {\"rule\": \"no-latest\", \"message\": sprintf(\"%d\", [to_number(input.request.name)])}\n"}}}))
	a := s.Current()
	fs, err := a.Version.EvalCustom(ctx, ast.MustParseTerm(`{"request": {"name": "web"}, "references": []}`).Value)
	if err != nil {
		t.Fatal(err)
	}
	want := rules.Finding{Rule: "no-latest", Message: `custom rule "no-latest" of ConfigPolicy "team-a" could not be evaluated: configpolicy/team-a/no-latest.rego:3: eval_builtin_error: to_number: strconv.ParseFloat: parsing "web": invalid syntax; fix the rule in its ConfigPolicy`}
	if len(fs) != 1 || fs[0] != want {
		t.Fatalf("findings = %q\nwant %q", fs, want)
	}
	if got := a.Rules(ns(nil)).ActionFor(fs[0]); got != rules.Deny {
		t.Errorf("action = %s, want the declared Deny", got)
	}
}

func TestRevisionSettings(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		spec v1alpha1.ConfigPolicySpec
		want []string
	}{
		"revisions":               {v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true, Secrets: true}}, nil},
		"without rollouts":        {v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true}, Rollouts: v1alpha1.RolloutSettings{Disabled: true}}, []string{"spec.revisions.enabled"}},
		"Secrets without them":    {v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Secrets: true}}, []string{"spec.revisions.secrets"}},
		"Secrets out of the hash": {v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true, Secrets: true}, Rollouts: v1alpha1.RolloutSettings{ExcludeSecrets: true}}, []string{"spec.revisions.secrets"}},
	} {
		_, errs := Validate(ctx, &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec})
		var got []string
		for _, e := range errs {
			got = append(got, e.Field)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, errs, tc.want)
		}
	}
	// Two policies: revisions where either turns them on, Secrets where one
	// that does says so.
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	for i, spec := range []v1alpha1.ConfigPolicySpec{{Revisions: v1alpha1.RevisionSettings{Enabled: true}}, {Revisions: v1alpha1.RevisionSettings{Enabled: true, Secrets: true}}, {}} {
		if err := s.Load(ctx, &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Generation: 1}, Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	if p := s.Current().For(nil); !p.Revisions || !p.RevisionSecrets {
		t.Fatalf("revisions: %+v", p)
	}
}

// A namespace's fingerprint moves when a policy selecting it changes, and
// not when one selecting only other namespaces does: the drift
// controller's findings cache, keyed by it, survives the latter.
func TestFingerprintFollowsTheSelectingPolicies(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	selects := func(team string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"team": team}}
	}
	policy := func(team string, generation int64, action v1alpha1.Action) *v1alpha1.ConfigPolicy {
		return cp("for-"+team, generation, v1alpha1.ConfigPolicySpec{NamespaceSelector: selects(team),
			Rules: map[string]v1alpha1.RuleSettings{rules.SecretInEnv: {Action: action}}})
	}
	a, b := ns(map[string]string{"team": "a"}), ns(map[string]string{"team": "b"})
	mustLoad(t, s, policy("a", 1, "Warn"))
	mustLoad(t, s, policy("b", 1, "Warn"))
	beforeA, beforeB := s.Current().Fingerprint(a), s.Current().Fingerprint(b)
	if beforeA == beforeB {
		t.Fatal("namespaces selected by different policies share a fingerprint")
	}
	mustLoad(t, s, policy("b", 2, "Deny"))
	if got := s.Current().Fingerprint(a); got != beforeA {
		t.Errorf("a policy of namespace b changed namespace a's fingerprint: %q, was %q", got, beforeA)
	}
	if got := s.Current().Fingerprint(b); got == beforeB {
		t.Error("changing namespace b's policy left its fingerprint as it was")
	}
}

// A flapping threshold out of bounds is refused at admission; several
// policies combine into the one that catches flapping first.
func TestFlappingSettings(t *testing.T) {
	ctx := context.Background()
	withFlapping := func(changes int32, window string) v1alpha1.ConfigPolicySpec {
		d, err := time.ParseDuration(window)
		if err != nil {
			t.Fatal(err)
		}
		return v1alpha1.ConfigPolicySpec{Rollouts: v1alpha1.RolloutSettings{Flapping: &v1alpha1.FlappingSettings{Changes: changes, Window: metav1.Duration{Duration: d}}}}
	}
	for _, bad := range []v1alpha1.ConfigPolicySpec{withFlapping(101, "10m"), withFlapping(3, "1s"), withFlapping(3, "25h")} {
		if _, errs := Validate(ctx, cp("p", 1, bad)); len(errs) != 1 || errs[0].Field != "spec.rollouts.flapping" {
			t.Errorf("%+v: %v", bad.Rollouts.Flapping, errs)
		}
	}
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Current().For(nil).Flapping; got != flapping.Default {
		t.Fatalf("without policies: %+v, want the default", got)
	}
	for i, spec := range []v1alpha1.ConfigPolicySpec{withFlapping(5, "1m"), withFlapping(0, "30m"), {}} {
		if err := s.Load(ctx, cp(fmt.Sprint("p", i), 1, spec)); err != nil {
			t.Fatal(err)
		}
	}
	// changes 0 reads as the default 3; the fewest changes and the longest
	// window win; a policy without flapping settings adds nothing.
	if got, want := s.Current().For(nil).Flapping, (flapping.Threshold{Changes: 3, Window: 30 * time.Minute}); got != want {
		t.Fatalf("merged = %+v, want %+v", got, want)
	}
}
