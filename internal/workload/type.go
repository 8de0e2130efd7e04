package workload

import (
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Type is one workload kind of a registry: everything configward knows of
// it. Its names and traits are read directly; its objects are made with New
// and read through Wrap. A Type never changes once made.
type Type struct {
	Kind
	Traits
	// templatePath is where the pod template sits (nil for a Pod, which is
	// its own template); metadata and spec hang off it.
	templatePath []string
	goType       reflect.Type // nil for a declared kind
	// template reaches the template inside a typed object, hold says what
	// a template change leaves running; both nil for a declared kind.
	template func(runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec)
	hold     func(runtime.Object) Hold
	// finished says an object of a kind that runs to completion (a Pod, a
	// Job) has; nil for kinds that run until deleted.
	finished func(runtime.Object) bool
	custom   *Declaration
}

// typed builds the Type of a built-in kind from the accessors of its Go
// type. hold may be nil: the kind's controller always replaces its pods.
func typed[T typedObject](k Kind, traits Traits, templatePath []string, template func(T) (*metav1.ObjectMeta, *corev1.PodSpec), hold func(T) Hold) *Type {
	t := &Type{
		Kind:         k,
		Traits:       traits,
		templatePath: templatePath,
		goType:       reflect.TypeFor[T]().Elem(),
		template:     func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) { return template(o.(T)) },
		hold:         func(runtime.Object) Hold { return Hold{} },
	}
	if hold != nil {
		t.hold = func(o runtime.Object) Hold { return hold(o.(T)) }
	}
	return t
}

// finishedWhen gives a built-in kind that runs to completion its test of
// having finished.
func finishedWhen[T typedObject](t *Type, finished func(T) bool) *Type {
	t.finished = func(o runtime.Object) bool { return finished(o.(T)) }
	return t
}

// customType is the Type of a declared kind: unstructured objects with the
// declaration's GVK.
func customType(d *Declaration) *Type {
	return &Type{
		Kind:         Kind{Group: d.Group, Version: d.Version, Kind: d.Kind, Resource: d.Resource},
		Traits:       Traits{Controllers: d.Controllers},
		templatePath: strings.Split(d.PodTemplatePath, "."),
		custom:       d,
	}
}

// Custom reports whether the kind is declared (read as unstructured
// objects) rather than built in.
func (t *Type) Custom() bool { return t.custom != nil }

// TemplateRefPath is the field path where a declared kind may name another
// object to take its pod template from (an Argo Rollout's
// spec.workloadRef); nil for kinds that always hold their own template.
func (t *Type) TemplateRefPath() []string {
	if t.custom == nil || t.custom.TemplateRefPath == "" {
		return nil
	}
	return t.custom.templateRefPath()
}

// New returns an empty object of the kind with its TypeMeta set, so it can
// be used with a client or decoded into directly: typed for a built-in
// kind, unstructured for a declared one.
func (t *Type) New() client.Object {
	if t.custom != nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(t.GroupVersionKind())
		return u
	}
	obj := reflect.New(t.goType).Interface().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(t.GroupVersionKind())
	return obj
}

// NewList returns an empty list of the kind, for a client or cache List:
// typed for a built-in kind, unstructured for a declared one.
func (t *Type) NewList() client.ObjectList {
	gvk := t.GroupVersionKind()
	gvk.Kind += "List"
	if t.custom != nil {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		return list
	}
	// Every kind of the table has a list type in client-go's scheme.
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		panic("workload: no list type for " + gvk.String())
	}
	return obj.(client.ObjectList)
}

// Wrap returns the handle of obj, an object of this kind (of its Go type,
// or unstructured with its GroupKind); TypeOf finds the Type of an object
// whose kind is not known yet.
func (t *Type) Wrap(obj client.Object) Object { return Object{Obj: obj, Type: t} }

func (t *Type) under(field string) []string {
	return append(append([]string(nil), t.templatePath...), field)
}

// PodTemplatePath returns the JSON field path to the pod template's
// metadata.
func (t *Type) PodTemplatePath() []string { return t.under("metadata") }

// PodSpecPath returns the JSON field path to the pod spec.
func (t *Type) PodSpecPath() []string { return t.under("spec") }

// AnnotationPatchPath returns the JSON pointer (RFC 6901) to the pod
// template's annotations map. A JSON patch must "add" the whole map there
// when the template has no annotations yet, because adding a key under a
// missing map fails.
func (t *Type) AnnotationPatchPath() string {
	return "/" + strings.Join(append(t.PodTemplatePath(), "annotations"), "/")
}

// AnnotationKeyPatchPath returns the JSON pointer to one annotation of the
// pod template. The key is escaped because annotation keys such as
// "configward.dev/config-hash" contain "/", which would otherwise split the
// pointer.
func (t *Type) AnnotationKeyPatchPath(key string) string {
	return t.AnnotationPatchPath() + "/" + EscapePointer(key)
}

// EscapePointer escapes one token of a JSON pointer (RFC 6901): annotation
// keys such as "configward.dev/config-hash" contain "/".
func EscapePointer(token string) string { return pointerEscaper.Replace(token) }

// Items returns the objects of a list NewList made.
func Items(list client.ObjectList) []client.Object {
	objs, _ := metaExtractList(list) // fails only for a type that is not a list
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		if co, ok := o.(client.Object); ok {
			out = append(out, co)
		}
	}
	return out
}
