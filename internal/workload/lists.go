package workload

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewList returns an empty list of a built-in workload kind, for a client
// or cache List.
func NewList(kind string) (client.ObjectList, bool) { return builtin.NewList(builtinGK(kind)) }

// NewList returns an empty list of the workload kind, for a client or
// cache List: typed for a built-in kind, unstructured for a declared one.
func (r *Registry) NewList(gk schema.GroupKind) (client.ObjectList, bool) {
	row, ok := r.row(gk)
	if !ok {
		return nil, false
	}
	gvk := row.GroupVersionKind()
	gvk.Kind += "List"
	if row.custom != nil {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		return list, true
	}
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil, false // every kind of the table has a list type in client-go
	}
	list, ok := obj.(client.ObjectList)
	return list, ok
}

// Items returns the objects of a list NewList made.
func Items(list client.ObjectList) []client.Object {
	objs, _ := meta.ExtractList(list) // fails only for a type that is not a list
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		if co, ok := o.(client.Object); ok {
			out = append(out, co)
		}
	}
	return out
}
