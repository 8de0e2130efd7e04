package workload

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
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
	reg := Builtin()
	if len(tests) != len(reg.Kinds()) {
		t.Fatalf("test covers %d kinds, the registry has %d", len(tests), len(reg.Kinds()))
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			gv, _ := schema.ParseGroupVersion(tt.gv)
			typ, ok := reg.Type(schema.GroupKind{Group: gv.Group, Kind: tt.kind})
			if !ok {
				t.Fatalf("Type(%q) not found", tt.kind)
			}
			k := typ.Kind
			if got := k.GroupVersionKind().GroupVersion().String(); got != tt.gv {
				t.Errorf("group/version = %q, want %q", got, tt.gv)
			}
			if k.Resource != tt.resource {
				t.Errorf("Resource = %q, want %q", k.Resource, tt.resource)
			}
			if got := typ.PodTemplatePath(); !reflect.DeepEqual(got, tt.templatePath) {
				t.Errorf("PodTemplatePath = %v, want %v", got, tt.templatePath)
			}
			if got := typ.PodSpecPath(); !reflect.DeepEqual(got, tt.specPath) {
				t.Errorf("PodSpecPath = %v, want %v", got, tt.specPath)
			}
			if got := typ.AnnotationPatchPath(); got != tt.patchPath {
				t.Errorf("AnnotationPatchPath = %q, want %q", got, tt.patchPath)
			}
			if got, want := typ.AnnotationKeyPatchPath(hashKey), tt.patchPath+"/configward.dev~1config-hash"; got != want {
				t.Errorf("AnnotationKeyPatchPath = %q, want %q", got, want)
			}

			obj := typ.New()
			if got := obj.GetObjectKind().GroupVersionKind(); got != k.GroupVersionKind() {
				t.Errorf("New GVK = %v, want %v", got, k.GroupVersionKind())
			}
			w, ok := reg.For(obj)
			if !ok || w.Type != typ {
				t.Errorf("For = %v, %v; want %v", w.Type, ok, k)
			}
			if list := typ.NewList(); list == nil || len(Items(list)) != 0 {
				t.Errorf("NewList = %v", list)
			}

			if ann := w.TemplateAnnotations(); ann != nil {
				t.Errorf("TemplateAnnotations on empty object = %v; want nil", ann)
			}
			w.SetTemplateAnnotation(hashKey, "sha256:abc")
			w.SetTemplateAnnotation("other", "x")
			if want := map[string]string{hashKey: "sha256:abc", "other": "x"}; !reflect.DeepEqual(w.TemplateAnnotations(), want) {
				t.Errorf("annotations = %v, want %v", w.TemplateAnnotations(), want)
			}
			if h, ok := w.ConfigHash(); !ok || h != "sha256:abc" {
				t.Errorf("ConfigHash = %q, %v", h, ok)
			}

			spec, err := w.PodSpec()
			if err != nil || spec == nil {
				t.Fatalf("PodSpec = %v, %v", spec, err)
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
			if got := lookupPointer(doc, typ.AnnotationKeyPatchPath(hashKey)); got != "sha256:abc" {
				t.Errorf("value at %s = %v, want the annotation", typ.AnnotationKeyPatchPath(hashKey), got)
			}
			if got := lookupPath(doc, append(tt.templatePath, "annotations", "other")); got != "x" {
				t.Errorf("value at %v = %v, want the annotation", tt.templatePath, got)
			}
			w.RemoveTemplateAnnotation(hashKey)
			if _, ok := w.ConfigHash(); ok {
				t.Error("annotation not removed")
			}
		})
	}
}

// The traits are the kind facts the rest of configward asks for instead of
// comparing kind names.
func TestTraits(t *testing.T) {
	reg := Builtin()
	traits := func(group, kind string) Traits {
		typ, ok := reg.Type(schema.GroupKind{Group: group, Kind: kind})
		if !ok {
			t.Fatalf("no %s", kind)
		}
		return typ.Traits
	}
	if tr := traits("", "Pod"); !tr.OwnTemplate || tr.Rolled() || !slices.Contains(tr.JudgedSubresources, "ephemeralcontainers") {
		t.Errorf("Pod: %+v", tr)
	}
	if tr := traits("batch", "Job"); !tr.ImmutableTemplate || !tr.Rolled() {
		t.Errorf("Job: %+v", tr)
	}
	if tr := traits("batch", "CronJob"); !tr.NextRunTakesTemplate || !tr.Rolled() {
		t.Errorf("CronJob: %+v", tr)
	}
	if tr := traits("apps", "Deployment"); tr.OwnTemplate || tr.ImmutableTemplate || tr.NextRunTakesTemplate || len(tr.JudgedSubresources) > 0 {
		t.Errorf("Deployment: %+v", tr)
	}
	rolled := reg.RolledKinds()
	if len(rolled) != len(reg.Kinds())-1 || slices.ContainsFunc(rolled, func(k Kind) bool { return k.Kind == "Pod" }) {
		t.Errorf("RolledKinds = %v", rolled)
	}
}

func TestResolve(t *testing.T) {
	reg := Builtin()
	for name, want := range map[string]string{
		"deploy": "Deployment", "deployments.apps": "Deployment", "Deployment": "Deployment", "STS": "StatefulSet",
		"cj": "CronJob", "cronjobs.batch": "CronJob", "replicaset": "ReplicaSet",
	} {
		k, ok := reg.Resolve(name, reg.RolledKinds())
		if !ok || k.Kind != want {
			t.Errorf("Resolve(%q) = %v, %v; want %s", name, k, ok, want)
		}
	}
	for _, name := range []string{"deploy.batch", "po", "configmap", ""} {
		if k, ok := reg.Resolve(name, reg.RolledKinds()); ok {
			t.Errorf("Resolve(%q) = %v", name, k)
		}
	}
}

func TestUnknownKind(t *testing.T) {
	for _, gk := range []schema.GroupKind{{}, {Kind: "ConfigMap"}, {Group: "apps", Kind: "deployment"}, {Kind: "ReplicationController"}, {Kind: "Deployment"}} {
		if _, ok := Builtin().Type(gk); ok {
			t.Errorf("Type(%v) found", gk)
		}
	}
}

func TestUnknownObject(t *testing.T) {
	for _, obj := range []client.Object{nil, &corev1.ConfigMap{}, &corev1.PodTemplate{}} {
		if _, ok := Builtin().For(obj); ok {
			t.Errorf("For(%T) ok", obj)
		}
	}
}

func TestAnnotationKeyEscaping(t *testing.T) {
	pod, _ := Builtin().Type(schema.GroupKind{Kind: "Pod"})
	if got, want := pod.AnnotationKeyPatchPath("a~b/c"), "/metadata/annotations/a~0b~1c"; got != want {
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

func TestHold(t *testing.T) {
	tests := []struct {
		name string
		obj  client.Object
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
		{"Job", &batchv1.Job{}, ""},
		{"Pod", &corev1.Pod{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ok := Builtin().For(tt.obj)
			if !ok {
				t.Fatal("not a workload")
			}
			r := w.Hold()
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
			if got := Builtin().ControlledByWorkload(obj); got != tt.workload {
				t.Errorf("ControlledByWorkload = %v, want %v", got, tt.workload)
			}
		})
	}
}

// A pod belongs to the top-level workload behind the built-in kinds that
// run pods for an owner, compared with their group.
func TestTopOwner(t *testing.T) {
	ref := func(apiVersion, kind, name string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: new(true)}
	}
	owners := map[string]*metav1.OwnerReference{
		"rs":      ref("apps/v1", "Deployment", "web"),
		"job":     ref("batch/v1", "CronJob", "nightly"),
		"volcano": ref("example.com/v1", "Queue", "q"),
		"loop":    ref("apps/v1", "ReplicaSet", "loop"),
	}
	up := func(r *metav1.OwnerReference) *metav1.OwnerReference { return owners[r.Name] }
	for name, tc := range map[string]struct {
		controller *metav1.OwnerReference
		want       string
	}{
		"a Deployment's ReplicaSet": {ref("apps/v1", "ReplicaSet", "rs"), "Deployment/web"},
		"a CronJob's Job":           {ref("batch/v1", "Job", "job"), "CronJob/nightly"},
		"a bare ReplicaSet":         {ref("apps/v1", "ReplicaSet", "bare"), "ReplicaSet/bare"},
		"a StatefulSet":             {ref("apps/v1", "StatefulSet", "db"), "StatefulSet/db"},
		"Volcano's Job is its own":  {ref("batch.volcano.sh/v1alpha1", "Job", "volcano"), "Job/volcano"},
		"an owner loop ends":        {ref("apps/v1", "ReplicaSet", "loop"), "ReplicaSet/loop"},
		"no controller":             {nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := ""
			if top := TopOwner(tc.controller, up); top != nil {
				got = top.Kind + "/" + top.Name
			}
			if got != tc.want {
				t.Fatalf("TopOwner = %q, want %q", got, tc.want)
			}
		})
	}
}

// Records name a kind by its Kind in the built-in groups, Kind.group in
// any other: one rule for a kind known by its Type or by its group.
func TestRecordKind(t *testing.T) {
	for _, tc := range []struct{ group, kind, want string }{
		{"apps", "Deployment", "Deployment"}, {"batch", "Job", "Job"}, {"", "Pod", "Pod"},
		{"apps.kruise.io", "StatefulSet", "StatefulSet.apps.kruise.io"}, {"argoproj.io", "Rollout", "Rollout.argoproj.io"},
	} {
		if got := RecordKindOf(tc.group, tc.kind); got != tc.want {
			t.Errorf("RecordKindOf(%q, %q) = %q, want %q", tc.group, tc.kind, got, tc.want)
		}
	}
	for _, typ := range Builtin().Types() {
		if typ.RecordKind() != RecordKindOf(typ.Group, typ.Kind.Kind) {
			t.Errorf("%s: RecordKind %q disagrees with RecordKindOf", typ.GroupKind(), typ.RecordKind())
		}
	}
}

// The stamp's parts sit where the kind keeps them: the hash and snapshots
// on the pod template, the marker and the CSI record on the workload; a
// Pod, its own template, has only the first two, and "" takes a part off.
func TestStampRoundTrip(t *testing.T) {
	full := Stamp{Hash: "h", Snapshots: "ConfigMap/a=a-1", RolledBackFrom: "g", SecretVersions: "v"}
	deployment, _ := Builtin().Type(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	d := deployment.Wrap(&appsv1.Deployment{})
	d.SetStamp(full)
	if got := d.Stamp(); got != full {
		t.Fatalf("Deployment: %+v", got)
	}
	dep := d.Obj.(*appsv1.Deployment)
	if dep.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation] != "h" || dep.Annotations[v1alpha1.RolledBackFromAnnotation] != "g" ||
		dep.Spec.Template.Annotations[v1alpha1.RolledBackFromAnnotation] != "" {
		t.Fatalf("parts in the wrong place: template %v, metadata %v", dep.Spec.Template.Annotations, dep.Annotations)
	}
	d.SetStamp(Stamp{Hash: "h"})
	if got := d.Stamp(); got != (Stamp{Hash: "h"}) || len(dep.Annotations) != 0 {
		t.Fatalf("parts not taken off: %+v %v", got, dep.Annotations)
	}
	pod, _ := Builtin().Type(schema.GroupKind{Kind: "Pod"})
	p := pod.Wrap(&corev1.Pod{})
	p.SetStamp(full)
	if got := p.Stamp(); got != (Stamp{Hash: "h", Snapshots: "ConfigMap/a=a-1"}) {
		t.Fatalf("Pod: %+v", got)
	}
}
