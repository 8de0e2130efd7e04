package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Registry is a set of workload kinds, keyed by GroupKind: the built-in
// kinds and the custom kinds of a Declaration. It never changes once made,
// so one value can be shared by every handler and controller of a process.
// A nil *Registry is the built-in registry.
type Registry struct {
	rows   []kindRow
	byGK   map[schema.GroupKind]int
	byType map[reflect.Type]int
}

func mustRegistry(rows []kindRow) *Registry {
	r, err := newRegistry(rows)
	if err != nil {
		panic(err)
	}
	return r
}

func newRegistry(rows []kindRow) (*Registry, error) {
	r := &Registry{rows: rows, byGK: map[schema.GroupKind]int{}, byType: map[reflect.Type]int{}}
	for i, row := range rows {
		if _, dup := r.byGK[row.GroupKind()]; dup {
			return nil, fmt.Errorf("workload kind %s is declared twice", row.GroupKind())
		}
		r.byGK[row.GroupKind()] = i
		if row.custom == nil {
			r.byType[reflect.TypeOf(row.new())] = i
		}
	}
	return r, nil
}

// NewRegistry returns the built-in kinds plus the declared ones. A
// declaration is validated again here (see Declaration.validate), so a
// Registry never holds a kind that could shadow a built-in one.
func NewRegistry(decls []Declaration) (*Registry, error) {
	rows := append([]kindRow(nil), table...)
	for i := range decls {
		d := decls[i]
		if err := d.validate(); err != nil {
			return nil, fmt.Errorf("workload kind %d (%s): %w", i+1, d.describe(), err)
		}
		rows = append(rows, customRow(&d))
	}
	return newRegistry(rows)
}

func (r *Registry) orBuiltin() *Registry {
	if r == nil {
		return builtin
	}
	return r
}

// Kinds lists every kind of the registry, built-in first, in declaration
// order.
func (r *Registry) Kinds() []Kind {
	r = r.orBuiltin()
	out := make([]Kind, len(r.rows))
	for i, row := range r.rows {
		out[i] = row.Kind
	}
	return out
}

// Custom reports whether k is a declared (unstructured) kind.
func (r *Registry) Custom(gk schema.GroupKind) bool {
	row, ok := r.row(gk)
	return ok && row.custom != nil
}

func (r *Registry) row(gk schema.GroupKind) (*kindRow, bool) {
	r = r.orBuiltin()
	i, ok := r.byGK[gk]
	if !ok {
		return nil, false
	}
	return &r.rows[i], true
}

// rowOf finds the row of an object: by Go type for a typed one, by the
// GroupKind it carries for an unstructured one.
func (r *Registry) rowOf(obj runtime.Object) (*kindRow, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		row, found := r.row(u.GroupVersionKind().GroupKind())
		return row, found && row.custom != nil
	}
	r = r.orBuiltin()
	i, ok := r.byType[reflect.TypeOf(obj)]
	if !ok {
		return nil, false
	}
	return &r.rows[i], true
}

// Lookup returns the Kind of gk, if it is a workload kind.
func (r *Registry) Lookup(gk schema.GroupKind) (Kind, bool) {
	row, ok := r.row(gk)
	if !ok {
		return Kind{}, false
	}
	return row.Kind, true
}

// KindOf names the kind of a workload object: from its Go type (objects
// read from a cache do not carry their TypeMeta), or from the GVK an
// unstructured object carries.
func (r *Registry) KindOf(obj runtime.Object) (Kind, bool) {
	row, ok := r.rowOf(obj)
	if !ok {
		return Kind{}, false
	}
	return row.Kind, true
}

// New returns an empty object of kind gk with its TypeMeta set, so it can
// be used with a client or decoded into directly: typed for a built-in
// kind, unstructured for a declared one.
func (r *Registry) New(gk schema.GroupKind) (client.Object, bool) {
	row, ok := r.row(gk)
	if !ok {
		return nil, false
	}
	obj := row.new()
	obj.GetObjectKind().SetGroupVersionKind(row.GroupVersionKind())
	return obj, true
}

func (r *Registry) under(gk schema.GroupKind, field string) []string {
	row, ok := r.row(gk)
	if !ok {
		return nil
	}
	return append(append([]string(nil), row.templatePath...), field)
}

// PodTemplatePath returns the JSON field path to the pod template's
// metadata, or nil for a kind that is not a workload kind.
func (r *Registry) PodTemplatePath(gk schema.GroupKind) []string { return r.under(gk, "metadata") }

// PodSpecPath returns the JSON field path to the pod spec, or nil for a kind
// that is not a workload kind.
func (r *Registry) PodSpecPath(gk schema.GroupKind) []string { return r.under(gk, "spec") }

// AnnotationPatchPath returns the JSON pointer (RFC 6901) to the pod
// template's annotations map, or "" for a kind that is not a workload kind.
// A JSON patch must "add" the whole map there when the template has no
// annotations yet, because adding a key under a missing map fails.
func (r *Registry) AnnotationPatchPath(gk schema.GroupKind) string {
	p := r.PodTemplatePath(gk)
	if p == nil {
		return ""
	}
	return "/" + strings.Join(append(p, "annotations"), "/")
}

// AnnotationKeyPatchPath returns the JSON pointer to one annotation of the
// pod template, or "" for a kind that is not a workload kind. The key is
// escaped because annotation keys such as "configward.dev/config-hash"
// contain "/", which would otherwise split the pointer.
func (r *Registry) AnnotationKeyPatchPath(gk schema.GroupKind, key string) string {
	p := r.AnnotationPatchPath(gk)
	if p == "" {
		return ""
	}
	return p + "/" + pointerEscaper.Replace(key)
}

// ControlledByWorkload reports whether a workload of a kind of the registry
// controls obj. Only such an owner stands for obj: it was judged, and it is
// what a delete of config in use would break. Any other controller (a
// ConfigMap named as owner, an unknown operator) proves nothing. With an
// Argo Rollout declared, the ReplicaSets it controls count as controlled.
func (r *Registry) ControlledByWorkload(obj metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	_, ok := r.row(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	return ok
}

// PodReplacement tells whether changing obj's pod template replaces the
// pods it runs: the built-in kinds' strategies, and a declared kind's
// notRolledWhen conditions.
func (r *Registry) PodReplacement(obj runtime.Object) Replacement {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		row, found := r.rowOf(u)
		if !found {
			return Replacement{}
		}
		return row.custom.replacement(u)
	}
	return builtinReplacement(obj)
}

// PodSpec returns the pod spec inside obj. For a built-in kind it points
// into obj, so changes through it change obj; for a declared kind it is a
// copy converted from the object's map (empty when the object has no
// template, as an Argo Rollout with a workloadRef), so changes through it
// change nothing.
func (r *Registry) PodSpec(obj runtime.Object) (*corev1.PodSpec, bool) {
	row, ok := r.rowOf(obj)
	if !ok {
		return nil, false
	}
	if row.custom != nil {
		spec, _ := unstructuredPodSpec(obj.(*unstructured.Unstructured), row.templatePath)
		return spec, true
	}
	_, spec := row.template(obj)
	return spec, true
}

// PodSpecError says why a declared kind's pod template in obj cannot be
// read as a pod spec (a CRD whose schema lets anything through), so the
// webhooks can say so instead of judging an empty spec. It is nil for
// typed objects, and when there is no template at all.
func (r *Registry) PodSpecError(obj runtime.Object) error {
	row, ok := r.rowOf(obj)
	if !ok || row.custom == nil {
		return nil
	}
	_, err := unstructuredPodSpec(obj.(*unstructured.Unstructured), row.templatePath)
	return err
}

// TemplateAnnotations returns the pod template's annotations (the Pod's own
// for a Pod). The map may be nil when the template has none; for a declared
// kind it is a copy.
func (r *Registry) TemplateAnnotations(obj runtime.Object) (map[string]string, bool) {
	row, ok := r.rowOf(obj)
	if !ok {
		return nil, false
	}
	if row.custom != nil {
		a, _, _ := unstructured.NestedStringMap(obj.(*unstructured.Unstructured).Object, append(row.templateMeta(), "annotations")...)
		return a, true
	}
	meta, _ := row.template(obj)
	return meta.Annotations, true
}

// TemplateAnnotation returns one annotation of the pod template, and
// whether it is set.
func (r *Registry) TemplateAnnotation(obj runtime.Object, key string) (string, bool) {
	a, _ := r.TemplateAnnotations(obj)
	v, ok := a[key]
	return v, ok
}

// SetTemplateAnnotation sets one annotation on the pod template, creating
// the map (and, for a declared kind, the template metadata) if needed. It
// reports false, changing nothing, for an object that is not a workload.
func (r *Registry) SetTemplateAnnotation(obj runtime.Object, key, value string) bool {
	row, ok := r.rowOf(obj)
	if !ok {
		return false
	}
	if row.custom != nil {
		path := append(row.templateMeta(), "annotations", key)
		return unstructured.SetNestedField(obj.(*unstructured.Unstructured).Object, value, path...) == nil
	}
	meta, _ := row.template(obj)
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = value
	return true
}

// RemoveTemplateAnnotation removes one annotation from the pod template.
func (r *Registry) RemoveTemplateAnnotation(obj runtime.Object, key string) {
	row, ok := r.rowOf(obj)
	if !ok {
		return
	}
	if row.custom != nil {
		unstructured.RemoveNestedField(obj.(*unstructured.Unstructured).Object, append(row.templateMeta(), "annotations", key)...)
		return
	}
	meta, _ := row.template(obj)
	delete(meta.Annotations, key)
}

// TemplateMetadataPresent reports whether obj's pod template has a metadata
// map: a JSON patch adding annotations under a missing map fails, so the
// patch must then add the metadata itself. Typed objects always have it.
func (r *Registry) TemplateMetadataPresent(obj runtime.Object) bool {
	row, ok := r.rowOf(obj)
	if !ok || row.custom == nil {
		return ok
	}
	_, found, _ := unstructured.NestedMap(obj.(*unstructured.Unstructured).Object, row.templateMeta()...)
	return found
}

// TemplateRef returns what a declared kind's templateRefPath holds in obj
// (an Argo Rollout's spec.workloadRef: apiVersion, kind, name), and whether
// the object takes its pod template from another object that way.
func (r *Registry) TemplateRef(obj runtime.Object) (TemplateRef, bool) {
	row, ok := r.rowOf(obj)
	if !ok || row.custom == nil || row.custom.TemplateRefPath == "" {
		return TemplateRef{}, false
	}
	path := row.custom.templateRefPath()
	ref, found, err := unstructured.NestedMap(obj.(*unstructured.Unstructured).Object, path...)
	if !found || err != nil || len(ref) == 0 {
		return TemplateRef{}, false
	}
	s := func(k string) string { v, _ := ref[k].(string); return v }
	return TemplateRef{Path: row.custom.TemplateRefPath, APIVersion: s("apiVersion"), Kind: s("kind"), Name: s("name")}, true
}

// TemplateRef is a reference from a workload to the object it takes its
// pod template from.
type TemplateRef struct {
	// Path is the declared templateRefPath, for messages.
	Path                   string
	APIVersion, Kind, Name string
}

// GroupKind is the referenced object's GroupKind.
func (t TemplateRef) GroupKind() schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: t.Kind}
}

func (row *kindRow) templateMeta() []string {
	return append(append([]string(nil), row.templatePath...), "metadata")
}

// unstructuredPodSpec converts the pod spec under path into a typed copy.
// A spec that does not convert gives an empty one and the reason.
func unstructuredPodSpec(u *unstructured.Unstructured, path []string) (*corev1.PodSpec, error) {
	specPath := append(append([]string(nil), path...), "spec")
	m, found, err := unstructured.NestedMap(u.Object, specPath...)
	if err != nil {
		return &corev1.PodSpec{}, fmt.Errorf("%s is not an object", strings.Join(specPath, "."))
	}
	if !found {
		return &corev1.PodSpec{}, nil
	}
	spec := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, spec); err != nil {
		return &corev1.PodSpec{}, notAPodSpec(strings.Join(specPath, "."), m)
	}
	return spec, nil
}

// notAPodSpec names the field of a pod spec that has the wrong type, as
// encoding/json finds it (the unstructured converter's own error names no
// field): "spec.template.spec.containers: expected a list, not a string".
// It never quotes the value, which may be a Secret's.
func notAPodSpec(specPath string, m map[string]any) error {
	js, err := json.Marshal(m)
	if err == nil {
		var typeErr *json.UnmarshalTypeError
		if err = json.Unmarshal(js, &corev1.PodSpec{}); errors.As(err, &typeErr) {
			return fmt.Errorf("%s.%s: expected %s, not %s", specPath, typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
		}
	}
	return fmt.Errorf("%s is not a pod spec", specPath)
}

// jsonKind says which JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	default:
		return "a number"
	}
}
