package inventory

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/workload"
)

func listFor(k workload.Kind) (client.ObjectList, error) {
	gvk := k.GroupVersionKind()
	gvk.Kind += "List"
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("no list type for %s: %w", k.Kind, err)
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%s is not a list", gvk)
	}
	return list, nil
}

func itemsOf(list client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("list item %T is not an object", o)
		}
		out = append(out, co)
	}
	return out, nil
}
