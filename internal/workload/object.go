package workload

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Object is one workload object with its Type, found once: every question
// about the object's pod template is answered through it.
type Object struct {
	// Obj is the object itself: typed for a built-in kind, unstructured for
	// a declared one.
	Obj  client.Object
	Type *Type
}

func (w Object) unstructured() *unstructured.Unstructured {
	return w.Obj.(*unstructured.Unstructured)
}

func (w Object) templateMeta() []string { return w.Type.PodTemplatePath() }

// PodSpec returns the pod spec inside the object. For a built-in kind it
// points into the object, so changes through it change the object; for a
// declared kind it is a copy converted from the object's map (empty when the
// object has no template, as an Argo Rollout with a workloadRef), so changes
// through it change nothing. The error says why a declared kind's template
// cannot be read as a pod spec (a CRD whose schema lets anything through):
// the spec is then empty, and must not be judged as if it were the
// object's.
func (w Object) PodSpec() (*corev1.PodSpec, error) {
	if w.Type.custom != nil {
		return unstructuredPodSpec(w.unstructured(), w.Type.templatePath)
	}
	_, spec := w.Type.template(w.Obj)
	return spec, nil
}

// TemplateAnnotations returns the pod template's annotations (the Pod's own
// for a Pod). The map may be nil when the template has none; for a declared
// kind it is a copy.
func (w Object) TemplateAnnotations() map[string]string {
	if w.Type.custom != nil {
		a, _, _ := unstructured.NestedStringMap(w.unstructured().Object, append(w.templateMeta(), "annotations")...)
		return a
	}
	meta, _ := w.Type.template(w.Obj)
	return meta.Annotations
}

// TemplateAnnotation returns one annotation of the pod template, and
// whether it is set.
func (w Object) TemplateAnnotation(key string) (string, bool) {
	v, ok := w.TemplateAnnotations()[key]
	return v, ok
}

// ConfigHash is the config hash on the pod template, and whether there is one.
func (w Object) ConfigHash() (string, bool) {
	return w.TemplateAnnotation(v1alpha1.ConfigHashAnnotation)
}

// SetTemplateAnnotation sets one annotation on the pod template, creating
// the map (and, for a declared kind, the template metadata) if needed.
func (w Object) SetTemplateAnnotation(key, value string) {
	if w.Type.custom != nil {
		_ = unstructured.SetNestedField(w.unstructured().Object, value, append(w.templateMeta(), "annotations", key)...)
		return
	}
	meta, _ := w.Type.template(w.Obj)
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = value
}

// RemoveTemplateAnnotation removes one annotation from the pod template.
func (w Object) RemoveTemplateAnnotation(key string) {
	if w.Type.custom != nil {
		unstructured.RemoveNestedField(w.unstructured().Object, append(w.templateMeta(), "annotations", key)...)
		return
	}
	meta, _ := w.Type.template(w.Obj)
	delete(meta.Annotations, key)
}

// TemplateMetadataPresent reports whether the pod template has a metadata
// map: a JSON patch adding annotations under a missing map fails, so the
// patch must then add the metadata itself. Typed objects always have it.
func (w Object) TemplateMetadataPresent() bool {
	if w.Type.custom == nil {
		return true
	}
	_, found, _ := unstructured.NestedMap(w.unstructured().Object, w.templateMeta()...)
	return found
}

// Hold says why changing the pod template does not replace the pods the
// object runs, if it does not: the built-in kinds' strategies (paused,
// OnDelete, a bare ReplicaSet), and a declared kind's notRolledWhen
// conditions.
func (w Object) Hold() Hold {
	if w.Type.custom != nil {
		return w.Type.custom.hold(w.unstructured())
	}
	return w.Type.hold(w.Obj)
}

// Finished reports whether the object ran to completion: a Pod that
// succeeded or failed, a Job that completed or failed. It runs nothing and
// needs no config any more.
func (w Object) Finished() bool { return w.Type.finished != nil && w.Type.finished(w.Obj) }

// Controlled reports whether another object controls this one (see the
// package function Controlled).
func (w Object) Controlled() bool { return Controlled(w.Obj) }

// RolloutsDisabled reports whether the object opted out of config-hash
// rollouts.
func (w Object) RolloutsDisabled() bool { return RolloutsDisabled(w.Obj) }

// TemplateRef returns what a declared kind's templateRefPath holds in the
// object (an Argo Rollout's spec.workloadRef: apiVersion, kind, name), and
// whether the object takes its pod template from another object that way.
func (w Object) TemplateRef() (TemplateRef, bool) {
	d := w.Type.custom
	if d == nil || d.TemplateRefPath == "" {
		return TemplateRef{}, false
	}
	ref, found, err := unstructured.NestedMap(w.unstructured().Object, d.templateRefPath()...)
	if !found || err != nil || len(ref) == 0 {
		return TemplateRef{}, false
	}
	s := func(k string) string { v, _ := ref[k].(string); return v }
	return TemplateRef{Path: d.TemplateRefPath, APIVersion: s("apiVersion"), Kind: s("kind"), Name: s("name")}, true
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

// RolledThrough says whether configward rolls a workload through the
// object it references: only a Deployment, a workload of its own that is
// stamped and rolled as usual and whose changes Argo follows. Otherwise it
// says why not, for the writer.
func (t TemplateRef) RolledThrough() (bool, string) {
	switch t.GroupKind() {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return true, ""
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		return false, "configward rolls a referenced template only through a Deployment (a ReplicaSet never replaces its pods)"
	}
	return false, "configward does not stamp " + t.Kind + "s"
}

// SameTemplate reports whether w's pod template equals other's, once the
// annotations named in ignore are left out of both: configward's own
// annotations change without the pipeline writing a new revision.
func (w Object) SameTemplate(other Object, ignore ...string) bool {
	strip := func(a map[string]string) map[string]string {
		out := make(map[string]string, len(a))
		for k, v := range a {
			if !slices.Contains(ignore, k) {
				out[k] = v
			}
		}
		return out
	}
	if w.Type.custom != nil {
		mine, _, _ := unstructured.NestedMap(w.unstructured().Object, w.Type.templatePath...)
		theirs, _, _ := unstructured.NestedMap(other.unstructured().Object, other.Type.templatePath...)
		for _, m := range []map[string]any{mine, theirs} {
			for _, k := range ignore {
				unstructured.RemoveNestedField(m, "metadata", "annotations", k)
			}
		}
		return equality.Semantic.DeepEqual(mine, theirs)
	}
	meta, spec := w.Type.template(w.Obj)
	otherMeta, otherSpec := other.Type.template(other.Obj)
	return equality.Semantic.DeepEqual(spec, otherSpec) && equality.Semantic.DeepEqual(meta.Labels, otherMeta.Labels) &&
		equality.Semantic.DeepEqual(strip(meta.Annotations), strip(otherMeta.Annotations))
}
