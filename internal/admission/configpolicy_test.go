package admission

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

func configPolicy(name string, spec v1alpha1.ConfigPolicySpec) *v1alpha1.ConfigPolicy {
	return &v1alpha1.ConfigPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "configward.dev/v1alpha1", Kind: "ConfigPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       spec,
	}
}

const noLatestRego = `package configward.custom.no_latest

findings contains f if {
	some c in input.object.spec.template.spec.containers
	endswith(c.image, ":latest")
	f := {"rule": "no-latest", "path": "spec.template.spec.containers", "message": sprintf("container %q uses :latest", [c.name])}
}
`

func TestValidateConfigPolicies(t *testing.T) {
	good := configPolicy("strict", v1alpha1.ConfigPolicySpec{
		Rules:       map[string]v1alpha1.RuleSettings{"secret-in-env": {Action: "Deny"}, "no-latest": {Action: "Warn"}},
		CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: noLatestRego}},
		Pipeline:    v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer"}},
	})
	create := func(obj any) req {
		return req{op: admissionv1.Create, kind: configPolicyKind, resource: metav1.GroupVersionResource{Group: "configward.dev", Version: "v1alpha1", Resource: "configpolicies"}, object: obj}
	}
	for _, tc := range []struct {
		name string
		req  req
		want expect
	}{
		{"delete is not judged", req{op: admissionv1.Delete, kind: configPolicyKind, oldObject: good}, allowed("")},
		{"connect is not judged", req{op: admissionv1.Connect, kind: configPolicyKind}, allowed("")},
		{"undecodable object", create(`{"spec": 42`), errored(400, "configward: the ConfigPolicy in this request cannot be decoded: ")},
		{"object of another kind", create(configSchema("x", "", appSchema)),
			errored(400, "configward: the ConfigPolicy in this request cannot be decoded: unable to decode configward.dev/v1alpha1, Kind=ConfigSchema into *v1alpha1.ConfigPolicy")},
		// Neither kind nor resource is looked at.
		{"kind with no rules", req{op: admissionv1.Create, kind: deploymentKind, resource: deploymentsRes, object: good}, allowed("configward does not validate apps/v1, Kind=Deployment here")},
		{"a good policy", create(good), allowed("")},
		{"an update to a good policy", req{op: admissionv1.Update, kind: configPolicyKind, object: good, oldObject: good}, allowed("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &ValidateConfigPolicies{Policies: builtinPolicies(t)}
			tc.want.check(t, serve(h).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

func TestValidateConfigPoliciesRefusesInvalidPolicies(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1alpha1.ConfigPolicySpec
		want []cause
	}{
		{"unknown rule id", v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"nope": {Action: "Deny"}}},
			[]cause{{"spec.rules[nope]", metav1.CauseTypeFieldValueInvalid, `unknown rule id "nope" (built-in rules: config-in-use-delete, config-schema, hot-config-in-env, missing-config-ref, out-of-pipeline-edit, secret-file-mode, secret-in-env, subpath-config; or declare it in spec.customRules)`}}},
		{"Rego that does not compile", v1alpha1.ConfigPolicySpec{CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: "package configward.custom.no_latest\n\nfindings contains f if {\n\tf := undefined_thing\n}\n"}}},
			[]cause{{"spec.customRules", metav1.CauseTypeFieldValueInvalid, "configpolicy/bad/no-latest.rego:4: rego_unsafe_var_error: var undefined_thing is unsafe"}}},
		{"every problem at once", v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}},
			Rules:             map[string]v1alpha1.RuleSettings{"nope": {Action: "Deny"}, "also-nope": {}},
			CustomRules: []v1alpha1.CustomRule{
				{ID: "no-latest", Rego: "package configward.rules.x\n"},
				{ID: "secret-in-env", Rego: "package configward.custom.secret_in_env\n"},
				{ID: "mine", Rego: "package configward.custom.mine\n\nfindings contains f if {\n"},
			},
			Pipeline: v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer", "deployer"}},
		}, []cause{
			{"spec.namespaceSelector", metav1.CauseTypeFieldValueInvalid, `"Near" is not a valid label selector operator`},
			{"spec.customRules[0].rego", metav1.CauseTypeFieldValueInvalid, "the module's package is configward.rules.x; it must be configward.custom.no_latest"},
			{"spec.customRules[1].id", metav1.CauseTypeFieldValueInvalid, `"secret-in-env" is the id of a built-in rule`},
			{"spec.customRules[2].rego", metav1.CauseTypeFieldValueInvalid, "configpolicy/bad/mine.rego:4: rego_parse_error: unexpected eof token"},
			{"spec.rules[also-nope]", metav1.CauseTypeFieldValueInvalid, `unknown rule id "also-nope"`},
			{"spec.rules[nope]", metav1.CauseTypeFieldValueInvalid, `unknown rule id "nope"`},
			{"spec.pipeline.serviceAccounts[1]", metav1.CauseTypeFieldValueInvalid, `service account "deployer": want namespace/name`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &ValidateConfigPolicies{Policies: builtinPolicies(t)}
			r := req{op: admissionv1.Update, kind: configPolicyKind, object: configPolicy("bad", tc.spec), oldObject: configPolicy("bad", v1alpha1.ConfigPolicySpec{})}
			checkInvalid(t, serve(h).Handle(context.Background(), r.build(t)), "ConfigPolicy", "bad", tc.want)
		})
	}
}
