// Package workload is the one home of what configward knows about each
// workload kind: its names, where its pod template sits in the object, how
// its own controller treats a template change, and its traits (a Pod is its
// own template, a Job's template is immutable, a CronJob's next run takes
// the template). Nothing outside this package compares kind names.
//
// Kinds live in a Registry keyed by GroupKind: the built-in kinds (typed Go
// objects) plus the custom kinds a platform team declares (see
// Declaration), handled as *unstructured.Unstructured with the pod template
// at a declared path. The group is part of the key because OpenKruise ships
// an apps.kruise.io StatefulSet beside apps' own. A request finds its kind's
// Type once (Registry.Type, Registry.TypeOf) and carries an Object handle
// from there.
package workload

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// Traits are the facts about a kind that decide how configward treats it.
// A declared kind has none of them but Controllers: its objects are rolled
// like a Deployment's, held back only by its notRolledWhen conditions.
type Traits struct {
	// Controllers are the users the kind's controller writes as: the
	// objects an object of the kind controls (a Deployment's ReplicaSets,
	// a ReplicaSet's Pods) are judged at their owner only when one of them
	// writes them (see Registry.WrittenByOwner). Empty: never.
	Controllers []string
	// OwnTemplate: the object is its own pod template (a Pod). Its spec
	// cannot change, so it keeps the config hash it was created with, is
	// never re-stamped, and its controlling workload stands for it.
	OwnTemplate bool
	// ImmutableTemplate: the pod template cannot change once created (a
	// Job): configward never re-stamps it; a new object uses new config.
	ImmutableTemplate bool
	// NextRunTakesTemplate: only the next run uses a new template (a
	// CronJob's next Job); runs already started keep theirs.
	NextRunTakesTemplate bool
	// ShortNames are kubectl's short names of the kind.
	ShortNames []string
	// JudgedSubresources are the subresources whose writes change the pod
	// spec, and so are judged like the object (a Pod's ephemeralcontainers,
	// written by `kubectl debug`).
	JudgedSubresources []string
	// RunsPodsForOwner: an object of the kind that another controls stands
	// between that owner and the pods (a Deployment's ReplicaSets, a
	// CronJob's Jobs): a pod belongs to the owner (see TopOwner).
	RunsPodsForOwner bool
}

// Rolled reports whether configward keeps the kind's pod template in step
// with its config (the rollout controller, drift, status): every kind but
// one that is its own template.
func (t Traits) Rolled() bool { return !t.OwnTemplate }

// Hold says why running pods keep their config: "running pods keep the old
// config: <Why>; they get the new one when <Until>". The zero Hold holds
// nothing.
type Hold struct {
	// Reason is a short label for metrics and Reports (paused, on-delete,
	// replicaset, declared, ...).
	Reason     string
	Why, Until string
}

// specTemplate is where most kinds keep their pod template.
var specTemplate = []string{"spec", "template"}

// table is the one list of built-in workload kinds.
var table = []*Type{
	typed(Kind{"apps", "v1", "Deployment", "deployments"}, Traits{Controllers: controllerOf("deployment-controller"), ShortNames: []string{"deploy"}}, specTemplate,
		func(o *appsv1.Deployment) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		},
		func(o *appsv1.Deployment) Hold {
			if o.Spec.Paused {
				return Hold{Reason: "paused", Why: "the Deployment is paused", Until: "it is resumed (kubectl rollout resume)"}
			}
			return Hold{}
		}),
	typed(Kind{"apps", "v1", "StatefulSet", "statefulsets"}, Traits{Controllers: controllerOf("statefulset-controller"), ShortNames: []string{"sts"}}, specTemplate,
		func(o *appsv1.StatefulSet) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		},
		func(o *appsv1.StatefulSet) Hold {
			if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
				return onDelete
			}
			return Hold{}
		}),
	typed(Kind{"apps", "v1", "DaemonSet", "daemonsets"}, Traits{Controllers: controllerOf("daemon-set-controller"), ShortNames: []string{"ds"}}, specTemplate,
		func(o *appsv1.DaemonSet) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		},
		func(o *appsv1.DaemonSet) Hold {
			if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
				return onDelete
			}
			return Hold{}
		}),
	typed(Kind{"apps", "v1", "ReplicaSet", "replicasets"}, Traits{Controllers: controllerOf("replicaset-controller"), ShortNames: []string{"rs"}, RunsPodsForOwner: true}, specTemplate,
		func(o *appsv1.ReplicaSet) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		},
		func(*appsv1.ReplicaSet) Hold {
			return Hold{Reason: "replicaset", Why: "a ReplicaSet never replaces running pods", Until: "each pod is deleted (use a Deployment to roll them)"}
		}),
	finishedWhen(typed(Kind{"batch", "v1", "Job", "jobs"}, Traits{Controllers: controllerOf("job-controller"), ImmutableTemplate: true, RunsPodsForOwner: true}, specTemplate,
		func(o *batchv1.Job) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		}, nil),
		func(o *batchv1.Job) bool {
			for _, c := range o.Status.Conditions {
				if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		}),
	// A CronJob's next Job uses the new template, which is its rollout.
	typed(Kind{"batch", "v1", "CronJob", "cronjobs"}, Traits{Controllers: controllerOf("cronjob-controller"), NextRunTakesTemplate: true, ShortNames: []string{"cj"}},
		[]string{"spec", "jobTemplate", "spec", "template"},
		func(o *batchv1.CronJob) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return &o.Spec.JobTemplate.Spec.Template.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec
		}, nil),
	finishedWhen(typed(Kind{"", "v1", "Pod", "pods"}, Traits{OwnTemplate: true, ShortNames: []string{"po"}, JudgedSubresources: []string{"ephemeralcontainers"}}, nil,
		func(o *corev1.Pod) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return &o.ObjectMeta, &o.Spec
		}, nil),
		func(o *corev1.Pod) bool {
			return o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed
		}),
}

// ControllerManager is the user kube-controller-manager writes as when it
// does not use a service account per controller
// (--use-service-account-credentials=false, its default).
const ControllerManager = "system:kube-controller-manager"

// controllerOf is who writes for one of kube-controller-manager's
// controllers: the process itself, or the controller's service account in
// kube-system (kubeadm's setting, and most managed clusters').
func controllerOf(name string) []string {
	return []string{ControllerManager, "system:serviceaccount:kube-system:" + name}
}

var onDelete = Hold{Reason: "on-delete", Why: "its updateStrategy is OnDelete", Until: "each pod is deleted"}

// builtin is the registry of the built-in kinds alone.
var builtin = mustRegistry(table)

// Builtin returns the registry of the built-in kinds.
func Builtin() *Registry { return builtin }

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

// typedObject is what a built-in kind's accessors are written against.
type typedObject interface {
	runtime.Object
	metav1.Object
}

// builtinGroups are the API groups of the built-in kinds.
var builtinGroups = func() map[string]bool {
	out := map[string]bool{}
	for _, t := range table {
		out[t.Group] = true
	}
	return out
}()

// RecordKind names the kind in records that outlive a request (a
// ConfigDelivery's targets, the positions `configward status` shows): see
// RecordKindOf.
func (t *Type) RecordKind() string { return RecordKindOf(t.Group, t.Kind.Kind) }

// RecordKindOf names a kind known by its group and Kind in records: its
// Kind in the groups of the built-in kinds, Kind.group in any other, since
// a declared kind may share its Kind with a built-in one (apps.kruise.io's
// StatefulSet).
func RecordKindOf(group, kind string) string {
	if builtinGroups[group] {
		return kind
	}
	return kind + "." + group
}

// TopOwner follows a controller reference from a pod up to the top-level
// workload it belongs to: an object of a kind that runs pods for an owner
// (RunsPodsForOwner: a Deployment's ReplicaSet, a CronJob's Job) hands on to
// its own controller, which controllerOf reads (nil when it has none, or it
// cannot be read). Kinds are compared with their group: Volcano's
// batch.volcano.sh Job owns pods and is a workload of its own.
func TopOwner(ref *metav1.OwnerReference, controllerOf func(*metav1.OwnerReference) *metav1.OwnerReference) *metav1.OwnerReference {
	for hops := 0; ref != nil && hops < maxOwnerHops; hops++ {
		if !runsPodsForOwner(ref) {
			return ref
		}
		up := controllerOf(ref)
		if up == nil {
			return ref
		}
		ref = up
	}
	return ref
}

// maxOwnerHops bounds the owner walk: ReplicaSet and Job are controlled by
// top-level workloads, which nothing built in controls, so one hop is the
// most the built-in kinds need; the bound guards against owner loops
// written by hand.
const maxOwnerHops = 2

// runsPodsForOwner reports whether ref names an object of a built-in kind
// that runs pods for an owner.
func runsPodsForOwner(ref *metav1.OwnerReference) bool {
	t, ok := builtin.TypeOfOwner(ref)
	return ok && t.RunsPodsForOwner
}

// ownerGroupKind is the group and Kind an owner reference names; false
// when its apiVersion does not parse (nothing can be of that kind).
func ownerGroupKind(ref *metav1.OwnerReference) (schema.GroupKind, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupKind{}, false
	}
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, true
}
