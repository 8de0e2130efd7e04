package workload

import (
	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewList returns an empty list of the workload kind, for a client or
// cache List.
func NewList(kind string) (client.ObjectList, bool) {
	k, ok := Lookup(kind)
	if !ok {
		return nil, false
	}
	gvk := k.GroupVersionKind()
	gvk.Kind += "List"
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
