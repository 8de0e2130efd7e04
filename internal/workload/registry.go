package workload

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Registry is a set of workload kinds, keyed by GroupKind: the built-in
// kinds and the custom kinds of a Declaration. It never changes once made,
// so one value can be shared by every handler and controller of a process.
type Registry struct {
	types  []*Type
	byGK   map[schema.GroupKind]*Type
	byType map[reflect.Type]*Type
}

func mustRegistry(types []*Type) *Registry {
	r, err := newRegistry(types)
	if err != nil {
		panic(err)
	}
	return r
}

func newRegistry(types []*Type) (*Registry, error) {
	r := &Registry{types: types, byGK: map[schema.GroupKind]*Type{}, byType: map[reflect.Type]*Type{}}
	for _, t := range types {
		if _, dup := r.byGK[t.GroupKind()]; dup {
			return nil, fmt.Errorf("workload kind %s is declared twice", t.GroupKind())
		}
		r.byGK[t.GroupKind()] = t
		if t.goType != nil {
			r.byType[t.goType] = t
		}
	}
	return r, nil
}

// NewRegistry returns the built-in kinds plus the declared ones. A
// declaration is validated again here (see Declaration.validate), so a
// Registry never holds a kind that could shadow a built-in one.
func NewRegistry(decls []Declaration) (*Registry, error) {
	types := slices.Clone(table)
	for i := range decls {
		d := decls[i]
		if err := d.validate(); err != nil {
			return nil, fmt.Errorf("workload kind %d (%s): %w", i+1, d.describe(), err)
		}
		types = append(types, customType(&d))
	}
	return newRegistry(types)
}

// Types lists every kind's Type, built-in first, in declaration order.
func (r *Registry) Types() []*Type { return slices.Clone(r.types) }

// Kinds lists every kind of the registry, built-in first, in declaration
// order.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, len(r.types))
	for i, t := range r.types {
		out[i] = t.Kind
	}
	return out
}

// RolledKinds lists the kinds whose pod template configward keeps in step
// with their config (see Traits.Rolled), in the order of Kinds.
func (r *Registry) RolledKinds() []Kind {
	var out []Kind
	for _, t := range r.types {
		if t.Rolled() {
			out = append(out, t.Kind)
		}
	}
	return out
}

// Type returns the kind gk, if it is a workload kind of the registry.
func (r *Registry) Type(gk schema.GroupKind) (*Type, bool) {
	t, ok := r.byGK[gk]
	return t, ok
}

// TypeOf finds the kind of an object: by Go type for a typed one (objects
// read from a cache do not carry their TypeMeta), by the GroupKind it
// carries for an unstructured one.
func (r *Registry) TypeOf(obj runtime.Object) (*Type, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		t, found := r.byGK[u.GroupVersionKind().GroupKind()]
		return t, found && t.custom != nil
	}
	if obj == nil {
		return nil, false
	}
	t, ok := r.byType[reflect.TypeOf(obj).Elem()]
	return t, ok
}

// For returns the handle of a workload object whose kind is not known yet.
func (r *Registry) For(obj client.Object) (Object, bool) {
	t, ok := r.TypeOf(obj)
	if !ok {
		return Object{}, false
	}
	return t.Wrap(obj), true
}

// Resolve finds a kind the way kubectl reads one: by its name, plural or
// short name, in any case, optionally qualified by its group
// ("deploy", "deployments.apps", "CronJob"). Only kinds among kinds count.
func (r *Registry) Resolve(name string, kinds []Kind) (Kind, bool) {
	name, group, hasGroup := strings.Cut(strings.ToLower(name), ".")
	for _, k := range kinds {
		t, ok := r.byGK[k.GroupKind()]
		if !ok || (hasGroup && group != k.Group) {
			continue
		}
		if name == strings.ToLower(k.Kind) || name == k.Resource || slices.Contains(t.ShortNames, name) {
			return k, true
		}
	}
	return Kind{}, false
}

// WrittenByOwner reports whether obj is written by its owner's side: a
// workload of a kind of the registry controls it and the user writing it
// is that kind's controller (Traits.Controllers). Only then does the owner
// stand for obj at admission: anyone may put a controller reference on
// what they create, naming a real ReplicaSet whose UID they can read.
func (r *Registry) WrittenByOwner(obj metav1.Object, user string) bool {
	t, ok := r.controller(obj)
	return ok && slices.Contains(t.Controllers, user)
}

// controller is the kind of the workload that controls obj, if any.
func (r *Registry) controller(obj metav1.Object) (*Type, bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return nil, false
	}
	return r.TypeOfOwner(ref)
}

// TypeOfOwner is the kind of the registry an owner reference names, by its
// group and Kind (a declared kind may share its Kind with a built-in one);
// false for a kind the registry does not know or an apiVersion that does
// not parse. Every reading of an owner reference as a workload kind goes
// through here, so none compares kind names on its own.
func (r *Registry) TypeOfOwner(ref *metav1.OwnerReference) (*Type, bool) {
	gk, ok := ownerGroupKind(ref)
	if !ok {
		return nil, false
	}
	t, ok := r.byGK[gk]
	return t, ok
}

// ControlledByWorkload reports whether a workload of a kind of the registry
// controls obj. Only such an owner stands for obj: it was judged, and it is
// what a delete of config in use would break. Any other controller (a
// ConfigMap named as owner, an unknown operator) proves nothing. With an
// Argo Rollout declared, the ReplicaSets it controls count as controlled.
func (r *Registry) ControlledByWorkload(obj metav1.Object) bool {
	_, ok := r.controller(obj)
	return ok
}

// TopOwnerOf is the top-level owner of obj (a pod, say), as TopOwner finds
// it, reading each owner between from c (a cache) as a kind of the
// registry; an owner that is not there, or is another object of its name
// (another UID), ends the walk. nil for an object without a controller.
func (r *Registry) TopOwnerOf(ctx context.Context, c client.Reader, obj metav1.Object) *metav1.OwnerReference {
	return TopOwner(metav1.GetControllerOf(obj), func(ref *metav1.OwnerReference) *metav1.OwnerReference {
		owner, ok, _ := r.read(ctx, c, obj.GetNamespace(), ref)
		if !ok {
			return nil
		}
		return metav1.GetControllerOf(owner.Obj)
	})
}

// TopWorkloadOf is the top-level workload obj (a pod, say) belongs to, read
// from c (a cache): TopOwnerOf's answer as an object of its kind. False for
// an object no workload controls, or whose top-level owner is of a kind the
// registry does not know, is not in c, or is another object of its name
// (another UID); an error only where c fails to answer otherwise. The
// pod-path webhook places a new pod in a wave by it and the reload reports
// name the workload whose pod rejected a change: one walk, so both always
// find the same workload.
func (r *Registry) TopWorkloadOf(ctx context.Context, c client.Reader, obj metav1.Object) (Object, bool, error) {
	top := r.TopOwnerOf(ctx, c, obj)
	if top == nil {
		return Object{}, false, nil
	}
	return r.read(ctx, c, obj.GetNamespace(), top)
}

// read is the object ref names in namespace, from c, when it is of a kind
// of the registry and still the object ref was written for (same UID); the
// error is c's, but for NotFound.
func (r *Registry) read(ctx context.Context, c client.Reader, namespace string, ref *metav1.OwnerReference) (Object, bool, error) {
	t, ok := r.TypeOfOwner(ref)
	if !ok {
		return Object{}, false, nil
	}
	o := t.New()
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, o); err != nil {
		return Object{}, false, client.IgnoreNotFound(err)
	}
	if o.GetUID() != ref.UID {
		return Object{}, false, nil
	}
	return t.Wrap(o), true, nil
}
