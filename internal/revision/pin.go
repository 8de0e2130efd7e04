package revision

import (
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/refs"
)

// PodPatch is the JSON patch that points a pod's references (volumes,
// projected sources, env valueFrom and envFrom of its init and regular
// containers) from the originals to their snapshots in snaps. Pinned lists
// the sources it rewrote; references to other objects stay as written.
func PodPatch(spec *corev1.PodSpec, snaps Snapshots) (ops []jsonpatch.Operation, pinned map[Source]bool) {
	pinned = map[Source]bool{}
	replace := func(path string, kind refs.Kind, name string) {
		src := Source{Kind: kind, Name: name}
		if snap, ok := snaps[src]; ok {
			ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: path, Value: snap})
			pinned[src] = true
		}
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		at := fmt.Sprintf("/spec/volumes/%d", i)
		if cm := v.ConfigMap; cm != nil {
			replace(at+"/configMap/name", refs.ConfigMap, cm.Name)
		}
		if s := v.Secret; s != nil {
			replace(at+"/secret/secretName", refs.Secret, s.SecretName)
		}
		if p := v.Projected; p != nil {
			for j := range p.Sources {
				src := &p.Sources[j]
				sat := fmt.Sprintf("%s/projected/sources/%d", at, j)
				if cm := src.ConfigMap; cm != nil {
					replace(sat+"/configMap/name", refs.ConfigMap, cm.Name)
				}
				if s := src.Secret; s != nil {
					replace(sat+"/secret/name", refs.Secret, s.Name)
				}
			}
		}
	}
	for _, list := range []struct {
		field string
		cs    []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		field, cs := list.field, list.cs
		for i := range cs {
			c := &cs[i]
			at := fmt.Sprintf("/spec/%s/%d", field, i)
			for j := range c.Env {
				from := c.Env[j].ValueFrom
				if from == nil {
					continue
				}
				eat := fmt.Sprintf("%s/env/%d/valueFrom", at, j)
				if r := from.ConfigMapKeyRef; r != nil {
					replace(eat+"/configMapKeyRef/name", refs.ConfigMap, r.Name)
				}
				if r := from.SecretKeyRef; r != nil {
					replace(eat+"/secretKeyRef/name", refs.Secret, r.Name)
				}
			}
			for j := range c.EnvFrom {
				eat := fmt.Sprintf("%s/envFrom/%d", at, j)
				if r := c.EnvFrom[j].ConfigMapRef; r != nil {
					replace(eat+"/configMapRef/name", refs.ConfigMap, r.Name)
				}
				if r := c.EnvFrom[j].SecretRef; r != nil {
					replace(eat+"/secretRef/name", refs.Secret, r.Name)
				}
			}
		}
	}
	return ops, pinned
}
