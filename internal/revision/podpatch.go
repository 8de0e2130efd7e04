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
	// A volume source comes once per mount but has one name to rewrite.
	rewritten := map[string]bool{}
	for _, r := range refs.FromPodSpec(spec) {
		src := Source{Kind: r.Kind, Name: r.Name}
		snap, ok := snaps[src]
		if !ok || !r.RewrittenAtCreate() || rewritten[r.NamePath] {
			continue
		}
		rewritten[r.NamePath] = true
		ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: pointer(r.NamePath), Value: snap})
		pinned[src] = true
	}
	return ops, pinned
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
