package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

var metaExtractList = meta.ExtractList

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
