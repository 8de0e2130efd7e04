package workload

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

const hashKey = "configward.dev/config-hash"

func TestKinds(t *testing.T) {
	tests := []struct {
		kind         string
		gv           string
		resource     string
		templatePath []string
		specPath     []string
		patchPath    string
	}{
		{"Deployment", "apps/v1", "deployments", []string{"spec", "template", "metadata"}, []string{"spec", "template", "spec"}, "/spec/template/metadata/annotations"},
		{"StatefulSet", "apps/v1", "statefulsets", []string{"spec", "template", "metadata"}, []string{"spec", "template", "spec"}, "/spec/template/metadata/annotations"},
		{"DaemonSet", "apps/v1", "daemonsets", []string{"spec", "template", "metadata"}, []string{"spec", "template", "spec"}, "/spec/template/metadata/annotations"},
		{"ReplicaSet", "apps/v1", "replicasets", []string{"spec", "template", "metadata"}, []string{"spec", "template", "spec"}, "/spec/template/metadata/annotations"},
		{"Job", "batch/v1", "jobs", []string{"spec", "template", "metadata"}, []string{"spec", "template", "spec"}, "/spec/template/metadata/annotations"},
		{"CronJob", "batch/v1", "cronjobs", []string{"spec", "jobTemplate", "spec", "template", "metadata"}, []string{"spec", "jobTemplate", "spec", "template", "spec"}, "/spec/jobTemplate/spec/template/metadata/annotations"},
		{"Pod", "v1", "pods", []string{"metadata"}, []string{"spec"}, "/metadata/annotations"},
	}
	if len(tests) != len(Kinds) {
		t.Fatalf("test covers %d kinds, Kinds has %d", len(tests), len(Kinds))
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			k, ok := Lookup(tt.kind)
			if !ok {
				t.Fatalf("Lookup(%q) not found", tt.kind)
			}
			if got := k.GroupVersionKind().GroupVersion().String(); got != tt.gv {
				t.Errorf("group/version = %q, want %q", got, tt.gv)
			}
			if k.Resource != tt.resource {
				t.Errorf("Resource = %q, want %q", k.Resource, tt.resource)
			}
			if got := PodTemplatePath(tt.kind); !reflect.DeepEqual(got, tt.templatePath) {
				t.Errorf("PodTemplatePath = %v, want %v", got, tt.templatePath)
			}
			if got := PodSpecPath(tt.kind); !reflect.DeepEqual(got, tt.specPath) {
				t.Errorf("PodSpecPath = %v, want %v", got, tt.specPath)
			}
			if got := AnnotationPatchPath(tt.kind); got != tt.patchPath {
				t.Errorf("AnnotationPatchPath = %q, want %q", got, tt.patchPath)
			}
			if got, want := AnnotationKeyPatchPath(tt.kind, hashKey), tt.patchPath+"/configward.dev~1config-hash"; got != want {
				t.Errorf("AnnotationKeyPatchPath = %q, want %q", got, want)
			}

			obj, ok := New(tt.kind)
			if !ok {
				t.Fatalf("New(%q) failed", tt.kind)
			}
			if got := obj.GetObjectKind().GroupVersionKind(); got != k.GroupVersionKind() {
				t.Errorf("New GVK = %v, want %v", got, k.GroupVersionKind())
			}
			if got, ok := KindOf(obj); !ok || got != k {
				t.Errorf("KindOf = %v, %v; want %v", got, ok, k)
			}

			if ann, ok := TemplateAnnotations(obj); !ok || ann != nil {
				t.Errorf("TemplateAnnotations on empty object = %v, %v; want nil, true", ann, ok)
			}
			if !SetTemplateAnnotation(obj, hashKey, "sha256:abc") {
				t.Fatal("SetTemplateAnnotation failed")
			}
			if !SetTemplateAnnotation(obj, "other", "x") {
				t.Fatal("SetTemplateAnnotation failed")
			}
			ann, _ := TemplateAnnotations(obj)
			if want := map[string]string{hashKey: "sha256:abc", "other": "x"}; !reflect.DeepEqual(ann, want) {
				t.Errorf("annotations = %v, want %v", ann, want)
			}

			spec, ok := PodSpec(obj)
			if !ok || spec == nil {
				t.Fatal("PodSpec failed")
			}
			spec.Containers = append(spec.Containers, corev1.Container{Name: "api"})

			// The paths must match the object's real JSON, which is what
			// admission patches apply to.
			doc := toJSON(t, obj)
			specJSON, ok := lookupPath(doc, tt.specPath).(map[string]any)
			if !ok {
				t.Fatalf("no pod spec at %v in %v", tt.specPath, doc)
			}
			if c, _ := specJSON["containers"].([]any); len(c) != 1 {
				t.Errorf("PodSpec does not point into the object: containers at %v = %v", tt.specPath, specJSON["containers"])
			}
			if got := lookupPointer(doc, AnnotationKeyPatchPath(tt.kind, hashKey)); got != "sha256:abc" {
				t.Errorf("value at %s = %v, want the annotation", AnnotationKeyPatchPath(tt.kind, hashKey), got)
			}
			if got := lookupPath(doc, append(tt.templatePath, "annotations", "other")); got != "x" {
				t.Errorf("value at %v = %v, want the annotation", tt.templatePath, got)
			}
		})
	}
}

func TestUnknownKind(t *testing.T) {
	for _, kind := range []string{"", "ConfigMap", "deployment", "ReplicationController"} {
		if _, ok := Lookup(kind); ok {
			t.Errorf("Lookup(%q) found", kind)
		}
		if p := PodTemplatePath(kind); p != nil {
			t.Errorf("PodTemplatePath(%q) = %v", kind, p)
		}
		if p := PodSpecPath(kind); p != nil {
			t.Errorf("PodSpecPath(%q) = %v", kind, p)
		}
		if p := AnnotationPatchPath(kind); p != "" {
			t.Errorf("AnnotationPatchPath(%q) = %q", kind, p)
		}
		if p := AnnotationKeyPatchPath(kind, "k"); p != "" {
			t.Errorf("AnnotationKeyPatchPath(%q) = %q", kind, p)
		}
		if o, ok := New(kind); ok || o != nil {
			t.Errorf("New(%q) = %v, %v", kind, o, ok)
		}
	}
}

func TestUnknownObject(t *testing.T) {
	objs := []runtime.Object{nil, &corev1.ConfigMap{}, &corev1.PodTemplate{}}
	for _, obj := range objs {
		if _, ok := PodSpec(obj); ok {
			t.Errorf("PodSpec(%T) ok", obj)
		}
		if _, ok := TemplateAnnotations(obj); ok {
			t.Errorf("TemplateAnnotations(%T) ok", obj)
		}
		if SetTemplateAnnotation(obj, "k", "v") {
			t.Errorf("SetTemplateAnnotation(%T) ok", obj)
		}
	}
}

func TestAnnotationKeyEscaping(t *testing.T) {
	if got, want := AnnotationKeyPatchPath("Pod", "a~b/c"), "/metadata/annotations/a~0b~1c"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func toJSON(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func lookupPath(doc any, path []string) any {
	for _, p := range path {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[p]
	}
	return doc
}

// lookupPointer resolves an RFC 6901 pointer independently of the code under
// test, so an escaping bug is not mirrored here.
func lookupPointer(doc any, ptr string) any {
	if !strings.HasPrefix(ptr, "/") {
		return nil
	}
	var path []string
	for _, tok := range strings.Split(ptr[1:], "/") {
		path = append(path, strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"))
	}
	return lookupPath(doc, path)
}

func TestPodReplacement(t *testing.T) {
	tests := []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{"Deployment", &appsv1.Deployment{}, ""},
		{"paused Deployment", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Paused: true}}, "paused"},
		{"StatefulSet, default strategy", &appsv1.StatefulSet{}, ""},
		{"StatefulSet OnDelete", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}}, "on-delete"},
		{"DaemonSet RollingUpdate", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}}}, ""},
		{"DaemonSet OnDelete", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}, "on-delete"},
		{"ReplicaSet", &appsv1.ReplicaSet{}, "replicaset"},
		{"CronJob: the next Job is its rollout", &batchv1.CronJob{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := PodReplacement(tt.obj)
			if r.Reason != tt.want {
				t.Fatalf("Reason = %q, want %q", r.Reason, tt.want)
			}
			if (r.Reason == "") != (r.Why == "" && r.Until == "") {
				t.Fatalf("a reason needs an explanation and none without: %+v", r)
			}
		})
	}
}

func TestControlled(t *testing.T) {
	owner := func(apiVersion, kind string) metav1.ObjectMeta {
		return metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "u", Controller: ptr.To(true)}}}
	}
	tests := []struct {
		name                 string
		meta                 metav1.ObjectMeta
		controlled, workload bool
	}{
		{"nobody", metav1.ObjectMeta{}, false, false},
		{"a Deployment", owner("apps/v1", "Deployment"), true, true},
		{"a CronJob", owner("batch/v1", "CronJob"), true, true},
		{"Argo Rollouts: a controller, not a workload kind configward knows", owner("argoproj.io/v1alpha1", "Rollout"), true, false},
		{"a ConfigMap named as controller", owner("v1", "ConfigMap"), true, false},
		{"a kind of the wrong group", owner("example.com/v1", "Deployment"), true, false},
		{"an owner that is not the controller", metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "o", UID: "u"}}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &appsv1.ReplicaSet{ObjectMeta: tt.meta}
			if got := Controlled(obj); got != tt.controlled {
				t.Errorf("Controlled = %v, want %v", got, tt.controlled)
			}
			if got := ControlledByWorkload(obj); got != tt.workload {
				t.Errorf("ControlledByWorkload = %v, want %v", got, tt.workload)
			}
		})
	}
}
