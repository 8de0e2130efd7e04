package workload

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"
)

const argoDecl = `
- group: argoproj.io
  version: v1alpha1
  kind: Rollout
  resource: rollouts
  podTemplatePath: spec.template
  templateRefPath: spec.workloadRef
  notRolledWhen:
  - {path: spec.paused, equals: "true", why: the Rollout is paused, until: it is resumed}
- group: apps.kruise.io
  version: v1beta1
  kind: StatefulSet
  resource: statefulsets
  podTemplatePath: spec.template
`

var rolloutGK = schema.GroupKind{Group: "argoproj.io", Kind: "Rollout"}

func argoRegistry(t *testing.T) *Registry {
	t.Helper()
	decls, err := ParseDeclarations([]byte(argoDecl))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRegistry(decls)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDeclarationErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown field", `[{group: a.io, version: v1, kind: A, resource: as, podTemplatePath: spec.template, notRolledWhn: []}]`, `unknown field "notRolledWhn"`},
		{"missing resource", `[{group: a.io, version: v1, kind: A, podTemplatePath: spec.template}]`, "resource is required"},
		{"empty path", `[{group: a.io, version: v1, kind: A, resource: as, podTemplatePath: ""}]`, "podTemplatePath: the path is empty"},
		{"bad path", `[{group: a.io, version: v1, kind: A, resource: as, podTemplatePath: spec..template}]`, "is not a dotted field path"},
		{"built-in collision", `[{group: apps, version: v1, kind: Deployment, resource: deployments, podTemplatePath: spec.template}]`, "Deployment.apps is a built-in workload kind"},
		{"duplicate", `[{group: a.io, version: v1, kind: A, resource: as, podTemplatePath: spec.template}, {group: a.io, version: v2, kind: A, resource: as, podTemplatePath: spec.template}]`, "declared twice"},
		{"no group", `[{version: v1, kind: A, resource: as, podTemplatePath: spec.template}]`, "group is required"},
		{"condition without why", `[{group: a.io, version: v1, kind: A, resource: as, podTemplatePath: spec.template, notRolledWhen: [{path: spec.paused, equals: "true"}]}]`, "notRolledWhen[0].why is required"},
		{"not a list", `group: a.io`, "expected a list"},
		{"empty controller", `[{group: a.io, version: v1, kind: A, resource: as, podTemplatePath: spec.template, controllers: [""]}]`, `controllers[0] "" must be a user name`},
		{"kube-controller-manager as a declared controller", `[{group: a.io, version: v1, kind: A, resource: as, podTemplatePath: spec.template, controllers: [system:kube-controller-manager]}]`,
			"controllers[0]: system:kube-controller-manager writes only for the built-in kinds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDeclarations([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestEmptyDeclarations(t *testing.T) {
	for _, y := range []string{"", "[]", "# nothing\n"} {
		decls, err := ParseDeclarations([]byte(y))
		if err != nil || len(decls) != 0 {
			t.Errorf("%q: %v, %v", y, decls, err)
		}
	}
}

// An apps.kruise.io StatefulSet is its own kind, not apps' StatefulSet.
func TestGroupKindKeys(t *testing.T) {
	r := argoRegistry(t)
	kruise, ok := r.Type(schema.GroupKind{Group: "apps.kruise.io", Kind: "StatefulSet"})
	if !ok || kruise.Version != "v1beta1" || !kruise.Custom() {
		t.Fatalf("kruise StatefulSet = %+v, %v", kruise, ok)
	}
	apps, ok := r.Type(schema.GroupKind{Group: "apps", Kind: "StatefulSet"})
	if !ok || apps.Custom() {
		t.Fatalf("apps StatefulSet = %+v, %v", apps, ok)
	}
	if _, typed := apps.New().(*appsv1.StatefulSet); !typed {
		t.Fatalf("apps StatefulSet is a %T", apps.New())
	}
	if u, isU := kruise.New().(*unstructured.Unstructured); !isU || u.GetAPIVersion() != "apps.kruise.io/v1beta1" {
		t.Fatalf("kruise StatefulSet is a %T", kruise.New())
	}
	if _, ok := Builtin().Type(kruise.GroupKind()); ok {
		t.Fatal("the built-in registry knows a custom kind")
	}
	if _, ok := r.Resolve("statefulsets.apps.kruise.io", r.RolledKinds()); !ok {
		t.Fatal("Resolve does not find the kruise StatefulSet by resource and group")
	}
}

func rollout(t *testing.T, r *Registry, doc string) Object {
	t.Helper()
	typ, _ := r.Type(rolloutGK)
	u := typ.New().(*unstructured.Unstructured)
	if err := yamlInto(doc, u); err != nil {
		t.Fatal(err)
	}
	w, ok := r.For(u)
	if !ok {
		t.Fatal("a Rollout is not a workload of the registry")
	}
	return w
}

const rolloutDoc = `
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        env: [{name: PASSWORD, value: hunter2}, {name: FLAGS, valueFrom: {configMapKeyRef: {name: flags, key: f}}}]
        volumeMounts: [{name: cfg, mountPath: /etc/app}]
      volumes: [{name: cfg, configMap: {name: web-config}}]
`

func TestUnstructuredTemplate(t *testing.T) {
	r := argoRegistry(t)
	w := rollout(t, r, rolloutDoc)
	spec, err := w.PodSpec()
	if err != nil || len(spec.Volumes) != 1 || spec.Volumes[0].ConfigMap.Name != "web-config" || spec.Containers[0].Env[1].ValueFrom == nil {
		t.Fatalf("PodSpec = %+v, %v", spec, err)
	}
	if w.Type.Resource != "rollouts" {
		t.Fatalf("Type = %+v", w.Type)
	}
	if _, ok := Builtin().For(w.Obj); ok {
		t.Fatal("the built-in registry reads a Rollout")
	}
	if w.TemplateMetadataPresent() {
		t.Fatal("the template has no metadata yet")
	}
	w.SetTemplateAnnotation(hashKey, "abc")
	if v, ok := w.TemplateAnnotation(hashKey); !ok || v != "abc" {
		t.Fatalf("annotation = %q, %v", v, ok)
	}
	if got, _, _ := unstructured.NestedString(w.Obj.(*unstructured.Unstructured).Object, "spec", "template", "metadata", "annotations", hashKey); got != "abc" {
		t.Fatalf("stored at the declared path: %q", got)
	}
	w.RemoveTemplateAnnotation(hashKey)
	if _, ok := w.TemplateAnnotation(hashKey); ok {
		t.Fatal("annotation not removed")
	}
	if got := w.Type.AnnotationKeyPatchPath(hashKey); got != "/spec/template/metadata/annotations/configward.dev~1config-hash" {
		t.Fatalf("patch path %q", got)
	}
	if got := strings.Join(w.Type.PodSpecPath(), "."); got != "spec.template.spec" {
		t.Fatalf("PodSpecPath %q", got)
	}
	_ = unstructured.SetNestedField(w.Obj.(*unstructured.Unstructured).Object, "not a list", "spec", "template", "spec", "containers")
	if _, err := w.PodSpec(); err == nil || !strings.Contains(err.Error(), "spec.template.spec.containers: expected a list, not string") {
		t.Fatalf("PodSpec of a template that is no pod spec: %v", err)
	}
}

func TestDeclaredNotRolledWhen(t *testing.T) {
	r := argoRegistry(t)
	w := rollout(t, r, rolloutDoc)
	if rep := w.Hold(); rep.Reason != "" {
		t.Fatalf("unpaused: %+v", rep)
	}
	_ = unstructured.SetNestedField(w.Obj.(*unstructured.Unstructured).Object, true, "spec", "paused")
	rep := w.Hold()
	if rep.Reason != "declared" || rep.Why != "the Rollout is paused" || rep.Until != "it is resumed" {
		t.Fatalf("paused: %+v", rep)
	}
}

func TestTemplateRefAndControl(t *testing.T) {
	r := argoRegistry(t)
	w := rollout(t, r, `
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: web-base}
`)
	ref, ok := w.TemplateRef()
	if !ok || ref.GroupKind() != (schema.GroupKind{Group: "apps", Kind: "Deployment"}) || ref.Name != "web-base" || ref.Path != "spec.workloadRef" {
		t.Fatalf("TemplateRef = %+v, %v", ref, ok)
	}
	if rolls, _ := ref.RolledThrough(); !rolls {
		t.Fatal("a referenced Deployment is not rolled through")
	}
	if rolls, why := (TemplateRef{APIVersion: "apps/v1", Kind: "ReplicaSet"}).RolledThrough(); rolls || !strings.Contains(why, "only through a Deployment") {
		t.Fatalf("a referenced ReplicaSet: %v, %q", rolls, why)
	}
	if _, ok := rollout(t, r, rolloutDoc).TemplateRef(); ok {
		t.Fatal("a Rollout with its own template has a reference")
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web", UID: "1", Controller: new(true)}}}}
	if !r.ControlledByWorkload(rs) {
		t.Fatal("a Rollout's ReplicaSet is not controlled by a workload")
	}
	if Builtin().ControlledByWorkload(rs) {
		t.Fatal("without the declaration, a Rollout is no workload")
	}
}

// A controller reference counts at admission only when the owner kind's
// controller writes the object: anyone may name a real owner.
func TestWrittenByOwner(t *testing.T) {
	owned := func(apiVersion, kind string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: "x", UID: "1", Controller: new(true)}}}}
	}
	declared, err := NewRegistry([]Declaration{
		{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout", Resource: "rollouts", PodTemplatePath: "spec.template",
			Controllers: []string{"system:serviceaccount:argo-rollouts:argo-rollouts"}},
		{Group: "example.com", Version: "v1", Kind: "Batch", Resource: "batches", PodTemplatePath: "spec.template"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		reg  *Registry
		pod  *corev1.Pod
		user string
		want bool
	}{
		{"a ReplicaSet's pod by its controller", Builtin(), owned("apps/v1", "ReplicaSet"), "system:serviceaccount:kube-system:replicaset-controller", true},
		{"a ReplicaSet's pod by kube-controller-manager itself", Builtin(), owned("apps/v1", "ReplicaSet"), ControllerManager, true},
		{"a ReplicaSet's pod by a person", Builtin(), owned("apps/v1", "ReplicaSet"), "alice", false},
		{"a ReplicaSet's pod by another controller", Builtin(), owned("apps/v1", "ReplicaSet"), "system:serviceaccount:kube-system:job-controller", false},
		{"a ReplicaSet's pod by a namesake in another namespace", Builtin(), owned("apps/v1", "ReplicaSet"), "system:serviceaccount:shop:replicaset-controller", false},
		{"a Job's pod by the Job controller", Builtin(), owned("batch/v1", "Job"), "system:serviceaccount:kube-system:job-controller", true},
		{"a Pod as owner", Builtin(), owned("v1", "Pod"), ControllerManager, false},
		{"no controller", Builtin(), &corev1.Pod{}, ControllerManager, false},
		{"a declared kind's object by its declared controller", declared, owned("argoproj.io/v1alpha1", "Rollout"), "system:serviceaccount:argo-rollouts:argo-rollouts", true},
		{"a declared kind's object by kube-controller-manager", declared, owned("argoproj.io/v1alpha1", "Rollout"), ControllerManager, false},
		{"a declared kind without controllers", declared, owned("example.com/v1", "Batch"), ControllerManager, false},
	} {
		if got := tc.reg.WrittenByOwner(tc.pod, tc.user); got != tc.want {
			t.Errorf("%s: WrittenByOwner = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func yamlInto(doc string, u *unstructured.Unstructured) error {
	return sigsyaml.Unmarshal([]byte(doc), &u.Object)
}
