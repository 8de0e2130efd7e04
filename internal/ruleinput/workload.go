package ruleinput

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// TargetLookup answers what is known of a referenced ConfigMap, Secret or
// SecretProviderClass in
// the workload's namespace: the inventory at admission and in the
// controller, the given manifests in `configward check`.
type TargetLookup func(kind refs.Kind, name string) (Target, error)

// WorkloadInput gathers the input of the workload rules for w, whose pod
// spec is spec: its references with field paths rooted at the object (a
// declared kind's at its declared template path, so its findings read like
// a Deployment's with the kind and path substituted), and the facts of
// each target, looked up once per object. The objects themselves are left
// for the caller to add where custom rules read them.
func WorkloadInput(req Request, w workload.Object, spec *corev1.PodSpec, lookup TargetLookup) (Input, error) {
	podSpecPath := strings.Join(w.Type.PodSpecPath(), ".")
	type id struct {
		kind refs.Kind
		name string
	}
	targets := map[id]Target{}
	var references []Reference
	for _, r := range append(refs.FromPodSpec(spec), refs.CSIFromPodSpec(spec)...) {
		t, seen := targets[id{r.Kind, r.Name}]
		if !seen {
			var err error
			if t, err = lookup(r.Kind, r.Name); err != nil {
				return Input{}, err
			}
			targets[id{r.Kind, r.Name}] = t
		}
		r.Path = RootPath(r.Path, podSpecPath)
		r.MountFieldPath = RootPath(r.MountFieldPath, podSpecPath)
		references = append(references, Reference{Ref: r, Target: t})
	}
	return Input{
		Request: req,
		Workload: Workload{Kind: req.Kind, Namespace: req.Namespace, Name: req.Name,
			RolloutDisabled: w.RolloutsDisabled()},
		References: references,
	}, nil
}
