// Package workload maps the workload kinds configward stamps to their pod
// template: where it sits in the object, and how to read and annotate it on
// a typed object. Kinds are named by their Kind alone ("Deployment") because
// the set is fixed and no two of them share a Kind.
package workload

import (
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Kind identifies a workload kind for the API (GVK) and for watches and RBAC
// (Resource).
type Kind struct {
	Group, Version, Kind, Resource string
}

// GroupVersionKind returns the kind as a schema.GroupVersionKind.
func (k Kind) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// GroupVersionResource returns the kind's resource as a schema.GroupVersionResource.
func (k Kind) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
}

// kindRow is everything configward knows of one workload kind: its names,
// where its pod template sits (nil for a Pod, which is its own template;
// metadata and spec hang off it), how to make an empty one, and how to
// reach the template inside a typed object.
type kindRow struct {
	Kind
	templatePath []string
	new          func() client.Object
	template     func(runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec)
}

// row builds a kindRow from the template accessor of one Go type.
func row[T client.Object](k Kind, templatePath []string, template func(T) (*metav1.ObjectMeta, *corev1.PodSpec)) kindRow {
	return kindRow{
		Kind:         k,
		templatePath: templatePath,
		new:          func() client.Object { return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(client.Object) },
		template:     func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) { return template(o.(T)) },
	}
}

var specTemplate = []string{"spec", "template"}

// table is the one list of workload kinds; everything kind-specific in this
// package reads it.
var table = []kindRow{
	row(Kind{"apps", "v1", "Deployment", "deployments"}, specTemplate, func(o *appsv1.Deployment) (*metav1.ObjectMeta, *corev1.PodSpec) {
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	}),
	row(Kind{"apps", "v1", "StatefulSet", "statefulsets"}, specTemplate, func(o *appsv1.StatefulSet) (*metav1.ObjectMeta, *corev1.PodSpec) {
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	}),
	row(Kind{"apps", "v1", "DaemonSet", "daemonsets"}, specTemplate, func(o *appsv1.DaemonSet) (*metav1.ObjectMeta, *corev1.PodSpec) {
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	}),
	row(Kind{"apps", "v1", "ReplicaSet", "replicasets"}, specTemplate, func(o *appsv1.ReplicaSet) (*metav1.ObjectMeta, *corev1.PodSpec) {
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	}),
	row(Kind{"batch", "v1", "Job", "jobs"}, specTemplate, func(o *batchv1.Job) (*metav1.ObjectMeta, *corev1.PodSpec) {
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	}),
	row(Kind{"batch", "v1", "CronJob", "cronjobs"}, []string{"spec", "jobTemplate", "spec", "template"}, func(o *batchv1.CronJob) (*metav1.ObjectMeta, *corev1.PodSpec) {
		return &o.Spec.JobTemplate.Spec.Template.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec
	}),
	row(Kind{"", "v1", "Pod", "pods"}, nil, func(o *corev1.Pod) (*metav1.ObjectMeta, *corev1.PodSpec) {
		return &o.ObjectMeta, &o.Spec
	}),
}

// Kinds lists every workload kind whose pod template gets the config hash.
var Kinds = func() []Kind {
	out := make([]Kind, len(table))
	for i, r := range table {
		out[i] = r.Kind
	}
	return out
}()

// byType finds a kind's row from a typed object.
var byType = func() map[reflect.Type]*kindRow {
	m := map[reflect.Type]*kindRow{}
	for i := range table {
		m[reflect.TypeOf(table[i].new())] = &table[i]
	}
	return m
}()

func lookupRow(kind string) (*kindRow, bool) {
	for i := range table {
		if table[i].Kind.Kind == kind {
			return &table[i], true
		}
	}
	return nil, false
}

// Lookup returns the Kind named kind, if it is a workload kind.
func Lookup(kind string) (Kind, bool) {
	r, ok := lookupRow(kind)
	if !ok {
		return Kind{}, false
	}
	return r.Kind, true
}

func templatePath(kind string) ([]string, bool) {
	r, ok := lookupRow(kind)
	if !ok {
		return nil, false
	}
	return r.templatePath, true
}

func under(kind, field string) []string {
	p, ok := templatePath(kind)
	if !ok {
		return nil
	}
	return append(p, field)
}

// PodTemplatePath returns the JSON field path to the pod template's
// metadata, or nil for a kind that is not a workload kind.
func PodTemplatePath(kind string) []string { return under(kind, "metadata") }

// PodSpecPath returns the JSON field path to the pod spec, or nil for a kind
// that is not a workload kind.
func PodSpecPath(kind string) []string { return under(kind, "spec") }

// AnnotationPatchPath returns the JSON pointer (RFC 6901) to the pod
// template's annotations map, or "" for a kind that is not a workload kind.
// A JSON patch must "add" the whole map there when the template has no
// annotations yet, because adding a key under a missing map fails.
func AnnotationPatchPath(kind string) string {
	p := PodTemplatePath(kind)
	if p == nil {
		return ""
	}
	return "/" + strings.Join(append(p, "annotations"), "/")
}

// AnnotationKeyPatchPath returns the JSON pointer to one annotation of the
// pod template, or "" for a kind that is not a workload kind. The key is
// escaped because annotation keys such as "configward.dev/config-hash"
// contain "/", which would otherwise split the pointer.
func AnnotationKeyPatchPath(kind, key string) string {
	p := AnnotationPatchPath(kind)
	if p == "" {
		return ""
	}
	return p + "/" + pointerEscaper.Replace(key)
}

// pointerEscaper escapes a JSON-pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// RolloutsDisabled reports whether obj opted out of config-hash rollouts.
func RolloutsDisabled(obj metav1.Object) bool {
	return obj.GetAnnotations()[v1alpha1.RolloutAnnotation] == v1alpha1.RolloutDisabled
}

// Controlled reports whether another object controls obj (a ReplicaSet of
// a Deployment, a Job of a CronJob, a Pod of anything). Its owner's template
// is what configward stamps and rolls: the owner finds its own ReplicaSets by
// comparing templates, so changing an owned template breaks its rollouts.
func Controlled(obj metav1.Object) bool { return metav1.GetControllerOf(obj) != nil }

// ControlledByWorkload reports whether a workload of a known kind controls
// obj. Only such an owner stands for obj: it was judged, and it is what a
// delete of config in use would break. Any other controller (a ConfigMap
// named as owner, an unknown operator) proves nothing.
func ControlledByWorkload(obj metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	k, ok := Lookup(ref.Kind)
	return ok && k.Group == gv.Group
}

// Replacement says what a change of a workload's pod template does to the
// pods it already runs.
type Replacement struct {
	// Reason is empty when the workload's own update strategy replaces its
	// pods; otherwise a short label for metrics (on-delete, paused,
	// replicaset).
	Reason string
	// Why and Until complete, for people, "running pods keep the old
	// config: <Why>; they get the new one when <Until>".
	Why, Until string
}

// PodReplacement tells whether changing obj's pod template replaces the
// pods it runs. A CronJob's next Job uses the new template, which is its
// rollout. Jobs are not covered: their template cannot change.
func PodReplacement(obj runtime.Object) Replacement {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Spec.Paused {
			return Replacement{"paused", "the Deployment is paused", "it is resumed (kubectl rollout resume)"}
		}
	case *appsv1.StatefulSet:
		if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
			return Replacement{"on-delete", "its updateStrategy is OnDelete", "each pod is deleted"}
		}
	case *appsv1.DaemonSet:
		if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			return Replacement{"on-delete", "its updateStrategy is OnDelete", "each pod is deleted"}
		}
	case *appsv1.ReplicaSet:
		return Replacement{"replicaset", "a ReplicaSet never replaces running pods", "each pod is deleted (use a Deployment to roll them)"}
	}
	return Replacement{}
}

// New returns an empty typed object of kind with its TypeMeta set, so it can
// be used with a client or decoded into directly.
func New(kind string) (client.Object, bool) {
	r, ok := lookupRow(kind)
	if !ok {
		return nil, false
	}
	obj := r.new()
	obj.GetObjectKind().SetGroupVersionKind(r.GroupVersionKind())
	return obj, true
}

// KindOf names the kind of a typed workload object, which objects read
// from a cache do not carry in their TypeMeta.
func KindOf(obj runtime.Object) (Kind, bool) {
	r, ok := byType[reflect.TypeOf(obj)]
	if !ok {
		return Kind{}, false
	}
	return r.Kind, true
}

// podTemplate returns pointers into obj: the template metadata and pod spec.
func podTemplate(obj runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec, bool) {
	r, ok := byType[reflect.TypeOf(obj)]
	if !ok {
		return nil, nil, false
	}
	meta, spec := r.template(obj)
	return meta, spec, true
}

// PodSpec returns the pod spec inside obj. It points into obj, so changes
// through it change obj.
func PodSpec(obj runtime.Object) (*corev1.PodSpec, bool) {
	_, spec, ok := podTemplate(obj)
	return spec, ok
}

// TemplateAnnotations returns the pod template's annotations (the Pod's own
// for a Pod). The map may be nil when the template has none.
func TemplateAnnotations(obj runtime.Object) (map[string]string, bool) {
	meta, _, ok := podTemplate(obj)
	if !ok {
		return nil, false
	}
	return meta.Annotations, true
}

// TemplateAnnotation returns one annotation of the pod template, and
// whether it is set.
func TemplateAnnotation(obj runtime.Object, key string) (string, bool) {
	a, _ := TemplateAnnotations(obj)
	v, ok := a[key]
	return v, ok
}

// SetTemplateAnnotation sets one annotation on the pod template, creating
// the map if needed. It reports false, changing nothing, for an object that
// is not a workload.
func SetTemplateAnnotation(obj runtime.Object, key, value string) bool {
	meta, _, ok := podTemplate(obj)
	if !ok {
		return false
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = value
	return true
}
