package inventory

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// Snapshots names the snapshot that each config a revision of spec reads
// gets for its content now: every rollout-mode ConfigMap it consumes, and
// with secrets every such Secret but service-account tokens. A consumed
// object that does not exist gets none (the pod names the original, and
// waits for it as it always has); hot and ignore objects get none (they are
// meant to change under running pods). Names are keyed with key, the
// installation's key.
func (inv *Inventory) Snapshots(ctx context.Context, key []byte, namespace string, spec *corev1.PodSpec, secrets bool) (revision.Snapshots, error) {
	out := revision.Snapshots{}
	for _, c := range refs.Consumed(refs.FromPodSpec(spec)) {
		if c.Kind == refs.Secret && !secrets {
			continue
		}
		o, err := inv.Get(ctx, c.Kind, namespace, c.Name)
		if err != nil {
			return nil, err
		}
		if !o.Exists || o.Mode != Rollout || (c.Kind == refs.Secret && !revision.Copied(o.Type)) {
			continue
		}
		if _, isSnapshot := revision.SnapshotOf(o.Labels, o.Annotations); isSnapshot {
			continue // already a snapshot: pinned as it is
		}
		content := digest.Content(o.KeyDigests, nil)
		out[revision.Source{Kind: c.Kind, Name: c.Name}] = revision.SnapshotName(key, namespace, c.Kind, c.Name, content)
	}
	return out, nil
}

// SnapshotWritten reports whether the snapshot named snap of src is in the
// cache as configward writes it: immutable, labelled, a copy of src.
func (inv *Inventory) SnapshotWritten(ctx context.Context, namespace string, src revision.Source, snap string) (bool, error) {
	o, err := inv.Get(ctx, src.Kind, namespace, snap)
	if err != nil || !o.Exists {
		return false, err
	}
	of, ok := revision.SnapshotOf(o.Labels, o.Annotations)
	return ok && of == src.Name && o.Immutable, nil
}
