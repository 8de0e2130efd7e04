package inventory

import (
	"reflect"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cache holds the same strings thousands of times: every pod of a
// ReplicaSet carries its labels, its owner, and the names of its
// containers, env vars, volumes and the config they read; every object
// its namespace. Decoding gives each object its own copies. The transforms
// intern them (unique.Make) so that equal strings share one copy, which
// lives as long as some cached object refers to it: less memory, the same
// values. What is unique per object (name, UID, resource version) is left
// alone; interning it would only add an entry.

func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internMap returns m with its keys and values interned (a new map: a
// map's keys cannot be replaced in place).
func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

// internMeta interns what objects share in their metadata: namespace,
// generateName, labels, annotations and owners.
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace, m.GenerateName = intern(m.Namespace), intern(m.GenerateName)
	m.Labels, m.Annotations = internMap(m.Labels), internMap(m.Annotations)
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.APIVersion, o.Kind, o.Name, o.UID = intern(o.APIVersion), intern(o.Kind), intern(o.Name), internUID(o.UID)
	}
	for i := range m.ManagedFields {
		f := &m.ManagedFields[i]
		f.Manager, f.APIVersion = intern(f.Manager), intern(f.APIVersion)
	}
}

func internUID[T ~string](u T) T { return T(intern(string(u))) }

// internAll interns every exported string reachable from v (a pointer):
// struct fields, slice elements, pointers' targets, and the keys and
// values of maps. It is for a pod spec or a template, where nearly every
// string is shared with the other pods of the same workload.
func internAll(v any) {
	internValue(reflect.ValueOf(v))
}

func internValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(intern(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			internValue(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				internValue(f)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes, not strings
		}
		for i := range v.Len() {
			internValue(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() || !v.CanSet() {
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			k := reflect.New(v.Type().Key()).Elem()
			k.Set(it.Key())
			internValue(k)
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			internValue(e)
			out.SetMapIndex(k, e)
		}
		v.Set(out)
	}
}
