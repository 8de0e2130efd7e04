// Package workload maps the workload kinds configward stamps to their pod
// template: where it sits in the object, and how to read and annotate it on
// a typed object. Kinds are named by their Kind alone ("Deployment") because
// the set is fixed and no two of them share a Kind.
package workload

import (
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

// Kinds lists every workload kind whose pod template gets the config hash.
var Kinds = []Kind{
	{"apps", "v1", "Deployment", "deployments"},
	{"apps", "v1", "StatefulSet", "statefulsets"},
	{"apps", "v1", "DaemonSet", "daemonsets"},
	{"apps", "v1", "ReplicaSet", "replicasets"},
	{"batch", "v1", "Job", "jobs"},
	{"batch", "v1", "CronJob", "cronjobs"},
	{"", "v1", "Pod", "pods"},
}

// Lookup returns the Kind named kind, if it is a workload kind.
func Lookup(kind string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// templatePath is the path to the pod template (nil for a Pod, which is its
// own template); metadata and spec hang off it.
func templatePath(kind string) ([]string, bool) {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		return []string{"spec", "template"}, true
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template"}, true
	case "Pod":
		return nil, true
	}
	return nil, false
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
	k, ok := Lookup(kind)
	if !ok {
		return nil, false
	}
	var obj client.Object
	switch kind {
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "ReplicaSet":
		obj = &appsv1.ReplicaSet{}
	case "Job":
		obj = &batchv1.Job{}
	case "CronJob":
		obj = &batchv1.CronJob{}
	case "Pod":
		obj = &corev1.Pod{}
	}
	obj.GetObjectKind().SetGroupVersionKind(k.GroupVersionKind())
	return obj, true
}

// KindOf names the kind of a typed workload object, which objects read
// from a cache do not carry in their TypeMeta.
func KindOf(obj runtime.Object) (Kind, bool) {
	var kind string
	switch obj.(type) {
	case *appsv1.Deployment:
		kind = "Deployment"
	case *appsv1.StatefulSet:
		kind = "StatefulSet"
	case *appsv1.DaemonSet:
		kind = "DaemonSet"
	case *appsv1.ReplicaSet:
		kind = "ReplicaSet"
	case *batchv1.Job:
		kind = "Job"
	case *batchv1.CronJob:
		kind = "CronJob"
	case *corev1.Pod:
		kind = "Pod"
	}
	return Lookup(kind)
}

// podTemplate returns pointers into obj: the template metadata and pod spec.
func podTemplate(obj runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, true
	case *appsv1.StatefulSet:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, true
	case *appsv1.DaemonSet:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, true
	case *appsv1.ReplicaSet:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, true
	case *batchv1.Job:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, true
	case *batchv1.CronJob:
		t := &o.Spec.JobTemplate.Spec.Template
		return &t.ObjectMeta, &t.Spec, true
	case *corev1.Pod:
		return &o.ObjectMeta, &o.Spec, true
	}
	return nil, nil, false
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
