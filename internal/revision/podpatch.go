package revision

import (
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/refs"
)

// PodPatch is the JSON patch that points a pod's references from the
// originals to their snapshots in snaps. It follows refs.FromPodSpec and
// rewrites what refs.Entries says can be rewritten when a pod is created:
// every ConfigMap and Secret reference but those of ephemeral containers,
// which a pod cannot have then. Pinned lists the sources it rewrote;
// references to other objects stay as written.
func PodPatch(spec *corev1.PodSpec, snaps Snapshots) (ops []jsonpatch.Operation, pinned map[Source]bool) {
	pinned = map[Source]bool{}
	ops = Repoint(spec, func(r refs.Ref) string {
		src := Source{Kind: r.Kind, Name: r.Name}
		snap, ok := snaps[src]
		if ok {
			pinned[src] = true
		}
		return snap
	})
	return ops, pinned
}

// Repoint is the JSON patch that points each reference of a pod spec that
// can be rewritten when the pod is created (refs.Ref.RewrittenAtCreate) at
// the name to gives it ("" leaves it as written). A volume source comes
// once per mount but has one name to rewrite. Snapshots (PodPatch) and hot
// config's channels are both pointed at through it.
func Repoint(spec *corev1.PodSpec, to func(refs.Ref) string) []jsonpatch.Operation {
	var ops []jsonpatch.Operation
	rewritten := map[string]bool{}
	for _, r := range refs.FromPodSpec(spec) {
		if !r.RewrittenAtCreate() || rewritten[r.NamePath] {
			continue
		}
		name := to(r)
		if name == "" {
			continue
		}
		rewritten[r.NamePath] = true
		ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: pointer(r.NamePath), Value: name})
	}
	return ops
}

// pointer is the JSON pointer of a field path rooted at a Pod:
// "spec.volumes[1].secret.secretName" is /spec/volumes/1/secret/secretName.
// The pod spec's field names hold neither "~" nor "/", which a pointer
// would have to escape.
func pointer(fieldPath string) string {
	var b strings.Builder
	for _, part := range strings.Split(fieldPath, ".") {
		name, index, isList := strings.Cut(part, "[")
		b.WriteString("/" + name)
		if isList {
			b.WriteString("/" + strings.TrimSuffix(index, "]"))
		}
	}
	return b.String()
}
