package inventory

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/refs"
)

// HotMount is a hot ConfigMap or Secret a pod spec mounts as a volume of
// its own, with what the inventory knows of it.
type HotMount struct {
	// Ref is the volume's reference (its first mount).
	Ref    refs.Ref
	Object Object
}

// Config is "Kind/name", as reload agents report it.
func (m HotMount) Config() string { return string(m.Ref.Kind) + "/" + m.Ref.Name }

// HotMounts lists the hot ConfigMaps and Secrets spec mounts as volumes of
// their own, one per volume, in spec order: the config a reload agent
// watches, and what configward says each pod of the spec made of. A hot
// source inside a projected volume shares its directory with other
// sources, so an agent cannot tell its files apart: it is not listed.
// Hot config mounted with subPath or read as env is refused before a
// workload is stored, so it is not here either.
func (inv *Inventory) HotMounts(ctx context.Context, namespace string, spec *corev1.PodSpec) ([]HotMount, error) {
	var out []HotMount
	seen := map[string]bool{}
	for _, r := range refs.FromPodSpec(spec) {
		if r.Via != refs.Volume || seen[r.Volume] {
			continue
		}
		seen[r.Volume] = true
		o, err := inv.Get(ctx, r.Kind, namespace, r.Name)
		if err != nil {
			return nil, err
		}
		if o.Exists && o.Mode == Hot {
			out = append(out, HotMount{Ref: r, Object: o})
		}
	}
	return out, nil
}

// Rolls says, for config of namespace, whether its changes roll the
// workloads that consume it: it is rollout-mode (or not known: counted as
// the default mode).
func (inv *Inventory) Rolls(ctx context.Context, namespace string) func(kind refs.Kind, name string) bool {
	return func(kind refs.Kind, name string) bool {
		o, err := inv.Get(ctx, kind, namespace, name)
		return err != nil || !o.Exists || o.Mode == Rollout
	}
}
