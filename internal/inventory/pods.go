package inventory

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// PodsIndex is the controller's cache index of Pods by the ConfigMaps and
// Secrets they read (IndexValue): every one their spec names
// (refs.FromPodSpec: originals, snapshots, channels), and every original
// whose snapshot their revision names (v1alpha1.ConfigSnapshotsAnnotation,
// which pods carry from their template). One lookup finds the pods of
// every revision of a config, pinned or not, and the pods of one channel:
// the delivery controller and the channels controller read pods through
// it, never by listing a namespace.
const PodsIndex = "configward.dev/reads"

// IndexPods registers PodsIndex.
func IndexPods(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, PodsIndex, func(o client.Object) []string {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return nil
		}
		return podReads(p)
	})
}

// podReads is what PodsIndex holds of p: each object once.
func podReads(p *corev1.Pod) []string {
	var out []string
	seen := map[string]bool{}
	add := func(kind refs.Kind, name string) {
		if v := IndexValue(kind, name); !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, r := range refs.FromPodSpec(&p.Spec) {
		add(r.Kind, r.Name)
	}
	snaps, _ := revision.Decode(p.Annotations[v1alpha1.ConfigSnapshotsAnnotation])
	for _, src := range snaps.Sorted() {
		add(src.Kind, src.Name)
	}
	return out
}

// PodsReading lists, for each of names (objects of kind in namespace), the
// pods that read it (PodsIndex) and have not ended (Succeeded or Failed;
// pods being deleted are kept, for the caller to count or not). They are
// the cache's own objects, never to be changed: a delivery reads every pod
// of a config at each look.
func (inv *Inventory) PodsReading(ctx context.Context, namespace string, kind refs.Kind, names ...string) (map[string][]*corev1.Pod, error) {
	out := make(map[string][]*corev1.Pod, len(names))
	for _, name := range names {
		if _, done := out[name]; done {
			continue
		}
		var list corev1.PodList
		if err := inv.reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{PodsIndex: IndexValue(kind, name)},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the pods that read %s %s/%s: %w", kind, namespace, name, err)
		}
		pods := make([]*corev1.Pod, 0, len(list.Items))
		for i := range list.Items {
			if p := &list.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				pods = append(pods, p)
			}
		}
		out[name] = pods
	}
	return out, nil
}
