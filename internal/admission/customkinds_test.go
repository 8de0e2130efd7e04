package admission

import (
	"context"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/workload"
)

var (
	rolloutKind     = metav1.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}
	rolloutResource = metav1.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
)

func argoKinds(t *testing.T) *workload.Registry {
	t.Helper()
	decls, err := workload.ParseDeclarations([]byte(`[{group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts,
  podTemplatePath: spec.template, templateRefPath: spec.workloadRef}]`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := workload.NewRegistry(decls)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// rolloutJSON is a Rollout whose template is template (a JSON object, or
// "" for none), with spec.workloadRef set to ref when not "".
func rolloutJSON(template, ref string) string {
	spec := `"replicas":1`
	if template != "" {
		spec += `,"template":` + template
	}
	if ref != "" {
		spec += `,"workloadRef":` + ref
	}
	return `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","namespace":"shop"},"spec":{` + spec + `}}`
}

const consumesAppTemplate = `{"spec":{"containers":[{"name":"app","image":"app","envFrom":[{"configMapRef":{"name":"app"}}]}]}}`

func TestConfigHashCustomKinds(t *testing.T) {
	appHash := digest.PodTemplateHash(testKey, testNS, []digest.Entry{appEntry})
	create := func(obj string) req {
		return req{op: admissionv1.Create, kind: rolloutKind, resource: rolloutResource, name: "web", object: obj}
	}
	refWarning := func(target, why string) string {
		return "[config-hash] Rollout shop/web takes its pod template from " + target + " (spec.workloadRef): " + why +
			", so this Rollout will not roll when its config changes. Reference a Deployment, or put the template in the Rollout."
	}
	for _, tc := range []struct {
		name  string
		kinds *workload.Registry
		req   req
		want  expect
	}{
		{name: "undeclared", kinds: workload.Builtin(), req: create(rolloutJSON(consumesAppTemplate, "")),
			want: allowed("argoproj.io/v1alpha1, Kind=Rollout is not a workload kind")},
		{name: "template without metadata: the patch adds it", kinds: argoKinds(t), req: create(rolloutJSON(consumesAppTemplate, "")),
			want: expect{allowed: true, code: 200, patches: []jsonpatch.Operation{{Operation: "add", Path: "/spec/template/metadata",
				Value: map[string]any{"annotations": map[string]string{v1alpha1.ConfigHashAnnotation: appHash}}}}}},
		{name: "template metadata without annotations", kinds: argoKinds(t),
			req: create(rolloutJSON(`{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"app","envFrom":[{"configMapRef":{"name":"app"}}]}]}}`, "")),
			want: expect{allowed: true, code: 200, patches: []jsonpatch.Operation{{Operation: "add", Path: "/spec/template/metadata/annotations",
				Value: map[string]string{v1alpha1.ConfigHashAnnotation: appHash}}}}},
		{name: "stale hash", kinds: argoKinds(t),
			req:  create(rolloutJSON(`{"metadata":{"annotations":{"configward.dev/config-hash":"sha256:old"}},"spec":{"containers":[{"name":"app","image":"app","envFrom":[{"configMapRef":{"name":"app"}}]}]}}`, "")),
			want: expect{allowed: true, code: 200, patches: []jsonpatch.Operation{{Operation: "add", Path: "/spec/template/metadata/annotations/configward.dev~1config-hash", Value: appHash}}}},
		{name: "a template that is no pod template", kinds: argoKinds(t), req: create(rolloutJSON(`{"spec":{"containers":"app"}}`, "")),
			want: allowed("").withWarnings("[config-hash] Rollout shop/web: spec.template.spec.containers: expected a list, not string, " +
				"so no config hash is stamped and it will not roll when its config changes. Fix the pod template.")},
		{name: "workloadRef to a Deployment: never stamped", kinds: argoKinds(t),
			req:  create(rolloutJSON("", `{"apiVersion":"apps/v1","kind":"Deployment","name":"web-base"}`)),
			want: allowed("takes its pod template from Deployment/web-base, which carries the config hash")},
		{name: "workloadRef to a PodTemplate: a warning", kinds: argoKinds(t),
			req:  create(rolloutJSON("", `{"apiVersion":"v1","kind":"PodTemplate","name":"tpl"}`)),
			want: allowed("").withWarnings(refWarning("PodTemplate/tpl", "configward does not stamp PodTemplates"))},
		{name: "workloadRef to a ReplicaSet: a warning", kinds: argoKinds(t),
			req: create(rolloutJSON("", `{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs"}`)),
			want: allowed("").withWarnings(refWarning("ReplicaSet/rs",
				"configward rolls a referenced template only through a Deployment (a ReplicaSet never replaces its pods)"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hashCache(t)
			h := &ConfigHash{Inventory: newInventory(c), Keys: hashkey.Fixed(testKey), Namespaces: c, Policies: builtinPolicies(t), Kinds: tc.kinds}
			tc.want.check(t, serve(h).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

// A declared kind is judged by the same rules as a Deployment, through the
// whole review handler: the one-pass typed decode has no Go type for it and
// must fall back to the general path.
func TestValidateWorkloadsCustomKind(t *testing.T) {
	h := workloadCache(t)
	h.Kinds = argoKinds(t)
	template := `{"spec":{"containers":[{"name":"app","image":"app","volumeMounts":[{"name":"f","mountPath":"/etc/f","subPath":"level"}]}],` +
		`"volumes":[{"name":"f","configMap":{"name":"flags"}}]}}`
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"argoproj.io","version":"v1alpha1","kind":"Rollout"},` +
		`"resource":{"group":"argoproj.io","version":"v1alpha1","resource":"rollouts"},"namespace":"shop","name":"web","operation":"CREATE",` +
		`"userInfo":{"username":"alice"},"object":` + rolloutJSON(template, "") + `}}`
	out := serveReview(t, serve(h), "application/json", body)
	want := `[subpath-config] Rollout shop/web container "app" mounts ConfigMap "flags" with subPath "level" at /etc/f ` +
		`(spec.template.spec.containers[0].volumeMounts[0]): subPath mounts never receive updates, and this ConfigMap is marked configward.dev/reload=hot. ` +
		`Mount the volume as a directory (drop the subPath) and point the app at the file inside it.`
	if out.Response.Allowed || out.Response.Result == nil || out.Response.Result.Message != want {
		t.Fatalf("got allowed=%v %+v, want denied with\n%s", out.Response.Allowed, out.Response.Result, want)
	}

	h.Kinds = workload.Builtin()
	if out := serveReview(t, serve(h), "application/json", body); !out.Response.Allowed {
		t.Fatalf("an undeclared kind was judged: %+v", out.Response.Result)
	}
}

// A template the rules cannot read is refused, never judged as empty.
func TestValidateWorkloadsUnreadableTemplate(t *testing.T) {
	h := workloadCache(t)
	h.Kinds = argoKinds(t)
	r := req{op: admissionv1.Create, kind: rolloutKind, resource: rolloutResource, name: "web", user: "alice",
		object: rolloutJSON(`{"spec":{"containers":[{"name":"app","volumeMounts":"all"}]}}`, "")}
	denied("configward: Rollout shop/web: spec.template.spec.containers.volumeMounts: expected a list, not string, so its pod template cannot be judged "+
		"(its CRD's schema does not check it). Fix the template and apply again.").check(t, serve(h).Handle(context.Background(), r.build(t)))
}
