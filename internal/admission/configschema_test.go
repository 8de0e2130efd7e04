package admission

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/rules"
)

func configSchema(name string, uid types.UID, spec v1alpha1.ConfigSchemaSpec) *v1alpha1.ConfigSchema {
	return &v1alpha1.ConfigSchema{
		TypeMeta:   metav1.TypeMeta{APIVersion: "configward.dev/v1alpha1", Kind: "ConfigSchema"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: uid, Generation: 1},
		Spec:       spec,
	}
}

// appSchema governs ConfigMap "app": key "port" is required and holds a
// JSON integer; no other key is allowed.
var appSchema = v1alpha1.ConfigSchemaSpec{
	ConfigMapNames: []string{"app"},
	Keys:           []v1alpha1.KeySchema{{Name: "port", Format: "json", Required: true, Schema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"integer"}`)}}},
}

const (
	appBreaksSchema = `[config-schema] ConfigMap shop/app breaks ConfigSchema "app" (1 violation); fix the values and apply again:` + "\n" +
		`  key "port": required key is missing`
	configSchemaNote = `[config-schema] configward.dev/exempt.config-schema does not count here: the ConfigPolicies governing this namespace ` +
		`do not all set rules.config-schema.allowExemption, so the rule applies as usual`
)

func TestValidateConfigMaps(t *testing.T) {
	cm := func(name string, data, annotations map[string]string) *corev1.ConfigMap {
		return configMap(name, data, annotations)
	}
	create := func(obj any) req {
		return req{op: admissionv1.Create, kind: configMapKind, resource: configMapsResource, name: "app", user: "alice", object: obj}
	}
	broken := cm("app", map[string]string{"other": "1"}, nil)
	exempt := func(reason string) *corev1.ConfigMap {
		return cm("app", map[string]string{}, map[string]string{v1alpha1.ExemptAnnotationPrefix + "config-schema": reason})
	}
	for _, tc := range []struct {
		name    string
		req     req
		policy  *v1alpha1.ConfigPolicySpec
		schemas client.Reader // default: the cache
		want    expect
	}{
		// Malformed requests and requests without rules.
		{name: "kind with no rules", req: req{op: admissionv1.Create, kind: secretKind, resource: secretsResource, object: secret("db", nil, nil)},
			want: allowed("configward has no schema rules for /v1, Kind=Secret")},
		{name: "delete is not judged", req: req{op: admissionv1.Delete, kind: configMapKind, resource: configMapsResource, oldObject: broken}, want: allowed("")},
		{name: "connect is not judged", req: req{op: admissionv1.Connect, kind: configMapKind, resource: configMapsResource}, want: allowed("")},
		{name: "undecodable object", req: create(`{"data": 42}`), want: errored(400, "configward: the ConfigMap in this request cannot be decoded: ")},
		{name: "object of another kind", req: create(secret("app", nil, nil)),
			want: errored(400, "configward: the ConfigMap in this request cannot be decoded: unable to decode /v1, Kind=Secret into *v1.ConfigMap")},
		// Neither resource nor subresource is looked at: these are judged.

		// Behaviour.
		{name: "ConfigMap breaking its schema", req: create(cm("app", nil, nil)), want: denied(appBreaksSchema)},
		{name: "every violation is listed", req: create(broken), want: denied(`[config-schema] ConfigMap shop/app breaks ConfigSchema "app" (2 violations); fix the values and apply again:` +
			"\n" + `  key "port": required key is missing` +
			"\n" + `  key "other": data key is not declared by the schema and undeclared keys are not allowed`)},
		{name: "ConfigMap keeping its schema", req: create(cm("app", map[string]string{"port": "8080"}, nil)), want: allowed("")},
		{name: "update breaking the schema", req: req{op: admissionv1.Update, kind: configMapKind, resource: configMapsResource, name: "app",
			object: cm("app", map[string]string{"port": `"80"`}, nil), oldObject: cm("app", map[string]string{"port": "80"}, nil)},
			want: denied(`[config-schema] ConfigMap shop/app breaks ConfigSchema "app" (1 violation); fix the values and apply again:` + "\n" + `  key "port" line 1 column 1: expected integer, found string "80"`)},
		// An update that leaves the values as they were is not refused (the
		// garbage collector removing a dangling owner reference); its
		// findings come back as warnings.
		{name: "metadata-only update of a ConfigMap already breaking its schema", req: req{op: admissionv1.Update, kind: configMapKind, resource: configMapsResource, name: "app",
			user: "system:serviceaccount:kube-system:generic-garbage-collector", object: cm("app", nil, nil), oldObject: func() *corev1.ConfigMap {
				c := cm("app", nil, nil)
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "gone", UID: "u"}}
				return c
			}()},
			want: allowed("").withWarnings(rules.Warning(rules.Finding{Rule: rules.ConfigSchema, Message: strings.TrimPrefix(appBreaksSchema, "[config-schema] ")}))},
		{name: "an update that changes the values is judged in full", req: req{op: admissionv1.Update, kind: configMapKind, resource: configMapsResource, name: "app",
			object: cm("app", map[string]string{"port": "x"}, nil), oldObject: cm("app", nil, nil)},
			want: denied(`[config-schema] ConfigMap shop/app breaks ConfigSchema "app" (1 violation); fix the values and apply again:` + "\n" +
				`  key "port" line 1 column 1: invalid JSON: invalid character 'x' looking for beginning of value`)},
		{name: "ConfigMap no schema governs", req: create(cm("other", map[string]string{"anything": "goes"}, nil)), want: allowed("")},
		{name: "object without a namespace takes the request's", req: create(func() *corev1.ConfigMap { c := cm("app", nil, nil); c.Namespace = ""; return c }()),
			want: denied(appBreaksSchema)},
		{name: "annotation naming an existing schema", req: create(cm("other", nil, map[string]string{v1alpha1.SchemaAnnotation: "app"})),
			want: denied(`[config-schema] ConfigMap shop/other breaks ConfigSchema "app" (1 violation); fix the values and apply again:` + "\n" + `  key "port": required key is missing`)},
		{name: "annotation naming a missing schema", req: create(cm("other", nil, map[string]string{v1alpha1.SchemaAnnotation: "nope"})),
			want: denied(`[config-schema] ConfigMap shop/other names ConfigSchema "nope" in configward.dev/schema, which does not exist in namespace shop: ` +
				`a missing schema never means anything goes. Create the schema first, or fix the annotation.`)},
		{name: "schema that does not compile", req: create(cm("legacy", nil, nil)),
			want: errored(403, `[config-schema] ConfigMap shop/legacy is governed by ConfigSchema "broken", which does not compile (`, `): fix the schema first.`)},
		{name: "exemption no ConfigPolicy allows", req: create(exempt("migrating")), want: denied(appBreaksSchema).withWarnings(configSchemaNote)},
		{name: "exemption without a reason", req: create(exempt(" ")),
			policy: &v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"config-schema": {AllowExemption: true}}},
			want: denied(appBreaksSchema).withWarnings(`[config-schema] configward.dev/exempt.config-schema has no reason, so it does not count: ` +
				`write why the object is exempt as the annotation's value`)},
		{name: "exemption a ConfigPolicy allows", req: create(exempt("migrating")),
			policy: &v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"config-schema": {AllowExemption: true}}},
			want: expect{allowed: true, code: 200, audit: map[string]string{"config-schema": appBreaksSchema +
				` (Audit: exempted by configward.dev/exempt.config-schema: "migrating")`}}},
		{name: "a ConfigPolicy making config-schema a warning", req: create(cm("app", nil, nil)),
			policy: &v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"config-schema": {Action: "Warn"}}},
			want:   allowed("").withWarnings(`[config-schema] ConfigMap shop/app breaks ConfigSchema "app" (1 violation); fix the values and apply again: key "port": required key is missing`)},
		{name: "schemas cannot be listed", req: create(cm("app", nil, nil)), schemas: failing(&v1alpha1.ConfigSchema{}, errors.New("boom")),
			want: errored(500, "configward: looking up ConfigSchemas: boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, namespace(testNS, nil),
				configSchema("app", "uid-app", appSchema),
				configSchema("broken", "uid-broken", v1alpha1.ConfigSchemaSpec{ConfigMapNames: []string{"legacy"}, Keys: []v1alpha1.KeySchema{{Pattern: "([", Format: "json"}}}),
			)
			h := &ValidateConfigMaps{Schemas: configschema.New(c), Policies: builtinPolicies(t), Namespaces: c}
			if tc.policy != nil {
				h.Policies = policiesWith(t, *tc.policy)
			}
			if tc.schemas != nil {
				h.Schemas = configschema.New(tc.schemas)
			}
			tc.want.check(t, serve(h).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

func TestValidateConfigSchemas(t *testing.T) {
	good := configSchema("app", "", appSchema)
	create := func(obj any) req {
		return req{op: admissionv1.Create, kind: configSchemaKind, resource: metav1.GroupVersionResource{Group: "configward.dev", Version: "v1alpha1", Resource: "configschemas"}, object: obj}
	}
	for _, tc := range []struct {
		name string
		req  req
		want expect
	}{
		{"delete is not judged", req{op: admissionv1.Delete, kind: configSchemaKind, oldObject: good}, allowed("")},
		{"connect is not judged", req{op: admissionv1.Connect, kind: configSchemaKind}, allowed("")},
		{"undecodable object", create(`{"spec": 42`), errored(400, "configward: the ConfigSchema in this request cannot be decoded: ")},
		{"object of another kind", create(&v1alpha1.ConfigPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "configward.dev/v1alpha1", Kind: "ConfigPolicy"}}),
			errored(400, "configward: the ConfigSchema in this request cannot be decoded: unable to decode configward.dev/v1alpha1, Kind=ConfigPolicy into *v1alpha1.ConfigSchema")},
		// Neither kind nor resource is looked at.
		{"kind with no rules", req{op: admissionv1.Create, kind: deploymentKind, resource: deploymentsRes, object: good}, allowed("configward does not validate apps/v1, Kind=Deployment here")},
		{"a good schema", create(good), allowed("")},
		{"an update to a good schema", req{op: admissionv1.Update, kind: configSchemaKind, object: good, oldObject: good}, allowed("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &ValidateConfigSchemas{}
			tc.want.check(t, serve(h).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

func TestValidateConfigSchemasRefusesInvalidSchemas(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1alpha1.ConfigSchemaSpec
		want []cause
	}{
		{"bad pattern", v1alpha1.ConfigSchemaSpec{Keys: []v1alpha1.KeySchema{{Pattern: "([", Format: "yaml"}}},
			[]cause{{"spec.keys[0].pattern", metav1.CauseTypeFieldValueInvalid, `invalid pattern "([": error parsing regexp`}}},
		{"every problem at once", v1alpha1.ConfigSchemaSpec{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}},
			Keys: []v1alpha1.KeySchema{
				{Name: "a", Format: "yaml"},
				{Name: "a", Format: "yaml"},
				{Name: "b", Pattern: "b.*", Format: "yaml"},
				{Format: "yaml"},
				{Name: "c", Format: "xml"},
				{Pattern: "d.*", Required: true, Format: "yaml"},
				{Name: "e", Format: "json", Schema: &apiextensionsv1.JSON{Raw: []byte(`{"type": 42}`)}},
			},
		}, []cause{
			{"spec.selector", metav1.CauseTypeFieldValueInvalid, `"Near" is not a valid label selector operator`},
			{"spec.keys[1].name", metav1.CauseTypeFieldValueInvalid, `key "a" is already declared by spec.keys[0]`},
			{"spec.keys[2]", metav1.CauseTypeFieldValueInvalid, `set either name or pattern, not both (name "b", pattern "b.*")`},
			{"spec.keys[3].name", metav1.CauseTypeFieldValueRequired, "set a name or a pattern"},
			{"spec.keys[4].format", metav1.CauseTypeFieldValueNotSupported, `"json", "yaml", "toml", "properties", "ini", "env", "text"`},
			{"spec.keys[5].required", metav1.CauseTypeFieldValueInvalid, `required applies only to a named key, not to pattern "d.*"`},
			{"spec.keys[6].schema", metav1.CauseTypeFieldValueInvalid, "schema does not compile"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &ValidateConfigSchemas{}
			cs := configSchema("bad", "", tc.spec)
			r := req{op: admissionv1.Create, kind: configSchemaKind, object: cs}
			checkInvalid(t, serve(h).Handle(context.Background(), r.build(t)), "ConfigSchema", "bad", tc.want)
		})
	}
}
