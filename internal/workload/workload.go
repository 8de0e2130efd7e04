// Package workload maps the workload kinds configward stamps to their pod
// template: where it sits in the object, and how to read and annotate it.
//
// Kinds live in a Registry keyed by GroupKind: the built-in kinds (typed Go
// objects) plus the custom kinds a platform team declares (see
// Declaration), handled as *unstructured.Unstructured with the pod template
// at a declared path. The group is part of the key because OpenKruise ships
// an apps.kruise.io StatefulSet beside apps' own. The package-level
// functions answer for the built-in kinds only; code that must see custom
// kinds holds a *Registry, passed to it at start (a nil *Registry is the
// built-in one, so zero-valued handlers keep working).
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

// GroupKind returns the kind as a schema.GroupKind, the registry's key.
func (k Kind) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: k.Group, Kind: k.Kind}
}

// GroupVersionResource returns the kind's resource as a schema.GroupVersionResource.
func (k Kind) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
}

// kindRow is everything configward knows of one workload kind: its names,
// where its pod template sits (nil for a Pod, which is its own template;
// metadata and spec hang off it), how to make an empty one, and how to
// reach the template inside a typed object. A declared (custom) kind has
// no template accessor and its Declaration instead.
type kindRow struct {
	Kind
	templatePath []string
	new          func() client.Object
	template     func(runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec)
	custom       *Declaration
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

// table is the one list of built-in workload kinds.
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

// builtin is the registry of the built-in kinds alone.
var builtin = mustRegistry(table)

// Builtin returns the registry of the built-in kinds, which is also what a
// nil *Registry means.
func Builtin() *Registry { return builtin }

// Kinds lists every built-in workload kind whose pod template gets the
// config hash.
var Kinds = builtin.Kinds()

// Lookup returns the built-in Kind named kind, if it is one. Built-in kinds
// do not share a Kind; code that may see custom kinds uses Registry.Lookup.
func Lookup(kind string) (Kind, bool) {
	for _, r := range builtin.rows {
		if r.Kind.Kind == kind {
			return r.Kind, true
		}
	}
	return Kind{}, false
}

// builtinGK is the GroupKind of the built-in kind named kind, or an empty
// one (which no registry holds).
func builtinGK(kind string) schema.GroupKind {
	k, _ := Lookup(kind)
	return k.GroupKind()
}

// PodTemplatePath returns the JSON field path to a built-in kind's pod
// template metadata, or nil for a kind that is not one.
func PodTemplatePath(kind string) []string { return builtin.PodTemplatePath(builtinGK(kind)) }

// PodSpecPath returns the JSON field path to a built-in kind's pod spec, or
// nil for a kind that is not one.
func PodSpecPath(kind string) []string { return builtin.PodSpecPath(builtinGK(kind)) }

// AnnotationPatchPath returns the JSON pointer (RFC 6901) to a built-in
// kind's pod template annotations map, or "".
func AnnotationPatchPath(kind string) string { return builtin.AnnotationPatchPath(builtinGK(kind)) }

// AnnotationKeyPatchPath returns the JSON pointer to one annotation of a
// built-in kind's pod template, or "".
func AnnotationKeyPatchPath(kind, key string) string {
	return builtin.AnnotationKeyPatchPath(builtinGK(kind), key)
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

// ControlledByWorkload reports whether a built-in workload controls obj
// (see Registry.ControlledByWorkload).
func ControlledByWorkload(obj metav1.Object) bool { return builtin.ControlledByWorkload(obj) }

// Replacement says what a change of a workload's pod template does to the
// pods it already runs.
type Replacement struct {
	// Reason is empty when the workload's own update strategy replaces its
	// pods; otherwise a short label for metrics (on-delete, paused,
	// replicaset, declared).
	Reason string
	// Why and Until complete, for people, "running pods keep the old
	// config: <Why>; they get the new one when <Until>".
	Why, Until string
}

// PodReplacement tells whether changing a built-in workload's pod template
// replaces the pods it runs (see Registry.PodReplacement).
func PodReplacement(obj runtime.Object) Replacement { return builtin.PodReplacement(obj) }

// builtinReplacement is PodReplacement of the typed kinds. A CronJob's next
// Job uses the new template, which is its rollout. Jobs are not covered:
// their template cannot change.
func builtinReplacement(obj runtime.Object) Replacement {
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

// New returns an empty typed object of a built-in kind with its TypeMeta
// set, so it can be used with a client or decoded into directly.
func New(kind string) (client.Object, bool) { return builtin.New(builtinGK(kind)) }

// KindOf names the kind of a built-in workload object, which objects read
// from a cache do not carry in their TypeMeta.
func KindOf(obj runtime.Object) (Kind, bool) { return builtin.KindOf(obj) }

// PodSpec returns the pod spec inside a built-in workload. It points into
// obj, so changes through it change obj.
func PodSpec(obj runtime.Object) (*corev1.PodSpec, bool) { return builtin.PodSpec(obj) }

// TemplateAnnotations returns a built-in workload's pod template
// annotations (the Pod's own for a Pod). The map may be nil.
func TemplateAnnotations(obj runtime.Object) (map[string]string, bool) {
	return builtin.TemplateAnnotations(obj)
}

// TemplateAnnotation returns one annotation of the pod template, and
// whether it is set.
func TemplateAnnotation(obj runtime.Object, key string) (string, bool) {
	return builtin.TemplateAnnotation(obj, key)
}

// SetTemplateAnnotation sets one annotation on a built-in workload's pod
// template, creating the map if needed.
func SetTemplateAnnotation(obj runtime.Object, key, value string) bool {
	return builtin.SetTemplateAnnotation(obj, key, value)
}
