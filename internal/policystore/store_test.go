package policystore

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/policy"
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

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1alpha1.ConfigPolicySpec
		want string
	}{
		{"invalid selector", v1alpha1.ConfigPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}},
			`spec.namespaceSelector: "Near" is not a valid label selector operator`},
		{"unknown rule id", v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"secret-in-envv": {Action: "Deny"}}},
			`spec.rules: unknown rule id "secret-in-envv" (built-in rules: config-in-use-delete, config-schema, hot-config-in-env, missing-config-ref, out-of-pipeline-edit, secret-file-mode, secret-in-env, subpath-config; or declare it in spec.customRules)`},
		{"Rego that does not compile", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.custom.no_latest\n\nfindings contains f if {\n\tf := undefined_thing\n}\n"}}},
			`configpolicy/p/no-latest.rego:4: rego_unsafe_var_error: var undefined_thing is unsafe`},
		{"Rego syntax", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.custom.no_latest\n\nfindings contains f if {\n"}}},
			`spec.customRules[0] (no-latest): 1 error occurred: configpolicy/p/no-latest.rego:4: rego_parse_error: unexpected eof token`},
		{"wrong package", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.rules.x\n"}}},
			`the module's package is configward.rules.x; it must be configward.custom.no_latest`},
		{"custom id of a built-in", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "secret-in-env", Rego: "package configward.custom.secret_in_env\n"}}},
			`"secret-in-env" is the id of a built-in rule`},
		{"bad service account", v1alpha1.ConfigPolicySpec{Pipeline: v1alpha1.PipelineIdentities{ServiceAccounts: []string{"deployer"}}},
			`spec.pipeline.serviceAccounts[0]: service account "deployer": want namespace/name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(context.Background(), cp("p", 1, tc.spec))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
	if _, err := Compile(context.Background(), cp("p", 1, v1alpha1.ConfigPolicySpec{
		Rules:       map[string]v1alpha1.RuleSettings{"no-latest": {Action: "Deny"}, "secret-in-env": {AllowExemption: true}},
		CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Action: "Warn", Rego: noLatest}},
	})); err != nil {
		t.Errorf("a good policy was refused: %v", err)
	}
}

func TestSettingsMerge(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Current().Settings(ns(nil)); got.Scoped || got.ActionFor(policy.Finding{Rule: policy.SecretInEnv}) != policy.Warn {
		t.Fatalf("without policies the defaults apply: %+v", got)
	}
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	mustLoad(t, s, cp("strict", 1, v1alpha1.ConfigPolicySpec{NamespaceSelector: team,
		Rules: map[string]v1alpha1.RuleSettings{
			policy.SecretInEnv:   {Action: "Deny", AllowExemption: true},
			policy.SubpathConfig: {AllowExemption: true},
		},
		Pipeline:    v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer"}},
		Rollouts:    v1alpha1.RolloutSettings{ExcludeSecrets: true},
		CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Action: "Deny", Rego: noLatest}},
	}))
	mustLoad(t, s, cp("lenient", 1, v1alpha1.ConfigPolicySpec{
		Rules: map[string]v1alpha1.RuleSettings{
			policy.SecretInEnv:      {Action: "Off"},
			policy.MissingConfigRef: {Action: "Off", AllowExemption: true},
			policy.SubpathConfig:    {AllowExemption: true},
		},
		Pipeline: v1alpha1.PipelineIdentities{Groups: []string{"release"}},
		Rollouts: v1alpha1.RolloutSettings{Disabled: true},
	}))
	a := s.Current()

	both, lenientOnly := a.Settings(ns(map[string]string{"team": "a"})), a.Settings(ns(nil))
	for _, tc := range []struct {
		name string
		s    policy.Settings
		f    policy.Finding
		want policy.Action
	}{
		{"strictest of Deny and Off", both, policy.Finding{Rule: policy.SecretInEnv}, policy.Deny},
		{"Off where only the lenient policy selects", lenientOnly, policy.Finding{Rule: policy.SecretInEnv}, policy.Off},
		{"a policy that leaves a rule at its default keeps the default in play", both, policy.Finding{Rule: policy.MissingConfigRef}, policy.Warn},
		{"custom rule where its policy selects", both, policy.Finding{Rule: "no-latest"}, policy.Deny},
		{"custom rule dropped where its policy does not select", lenientOnly, policy.Finding{Rule: "no-latest"}, policy.Off},
		{"per-finding default untouched", both, policy.Finding{Rule: policy.SubpathConfig, Action: policy.Warn}, policy.Warn},
	} {
		if got := tc.s.ActionFor(tc.f); got != tc.want {
			t.Errorf("%s: %s = %s, want %s", tc.name, tc.f.Rule, got, tc.want)
		}
	}
	if !both.Exemptible[policy.SubpathConfig] || both.Exemptible[policy.SecretInEnv] || both.Exemptible[policy.MissingConfigRef] {
		t.Errorf("exemptible where every selecting policy allows it: %v", both.Exemptible)
	}
	if ids := a.Pipeline(ns(map[string]string{"team": "a"})); len(ids.ServiceAccounts) != 1 || len(ids.Groups) != 1 {
		t.Errorf("identities are combined: %+v", ids)
	}
	if on, secrets := a.Rollouts(ns(map[string]string{"team": "a"})); !on || !secrets {
		t.Errorf("rollouts stay on (and Secrets in) unless every policy says otherwise: %v %v", on, secrets)
	}
	if on, _ := a.Rollouts(ns(nil)); on {
		t.Error("rollouts are off where the only selecting policy turns them off")
	}
}

func TestLastKnownGood(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	good := cp("p", 1, v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{policy.SecretInEnv: {Action: "Deny"}}})
	mustLoad(t, s, good)
	before := s.Current()
	broken := cp("p", 2, v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{policy.SecretInEnv: {Action: "Off"}},
		CustomRules: []v1alpha1.CustomRule{{ID: "x", Rego: "package configward.custom.x\nfindings contains f if { f := nope }\n"}}})
	if err := s.Load(ctx, broken); err == nil {
		t.Fatal("a broken generation was loaded")
	}
	if s.Current() != before {
		t.Fatal("a failed load replaced the set in force")
	}
	if got := s.Current().Settings(nil).ActionFor(policy.Finding{Rule: policy.SecretInEnv}); got != policy.Deny {
		t.Errorf("the last good generation is not in force: %s", got)
	}
	s.Forget("p")
	if got := s.Current().Settings(nil).ActionFor(policy.Finding{Rule: policy.SecretInEnv}); got != policy.Warn {
		t.Errorf("a deleted policy is still in force: %s", got)
	}
}

func TestExempt(t *testing.T) {
	s := policy.Settings{Exemptible: map[string]bool{policy.SecretInEnv: true}}
	fs := []policy.Finding{{Rule: policy.SecretInEnv}, {Rule: policy.HotConfigInEnv}, {Rule: policy.MissingConfigRef}}
	notes := s.Exempt(fs, map[string]string{
		"configward.dev/exempt.secret-in-env":      "vendor image reads env only",
		"configward.dev/exempt.hot-config-in-env":  "because",
		"configward.dev/exempt.missing-config-ref": " ",
	})
	if fs[0].Exemption != "vendor image reads env only" || s.ActionFor(fs[0]) != policy.Audit {
		t.Errorf("allowed exemption: %+v", fs[0])
	}
	if fs[1].Exemption != "" || fs[2].Exemption != "" {
		t.Errorf("exemptions that do not count were applied: %+v", fs)
	}
	want := []string{
		"[hot-config-in-env] configward.dev/exempt.hot-config-in-env does not count here: the ConfigPolicies governing this namespace do not all set rules.hot-config-in-env.allowExemption, so the rule applies as usual",
		"[missing-config-ref] configward.dev/exempt.missing-config-ref has no reason, so it does not count: write why the object is exempt as the annotation's value",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes = %q\nwant %q", notes, want)
	}
}

func mustLoad(t *testing.T, s *Store, p *v1alpha1.ConfigPolicy) {
	t.Helper()
	if err := s.Load(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}
