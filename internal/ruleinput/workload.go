package ruleinput

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// TargetLookup answers what is known of a referenced ConfigMap or Secret in
// the workload's namespace: the inventory at admission, the given manifests
// in `configward check`.
type TargetLookup func(kind refs.Kind, name string) (Target, error)

// WorkloadInput gathers the input of the workload rules for obj, a workload
// of the given kind: its references with field paths rooted at the object,
// and the facts of each target, looked up once per object. Admission and
// `configward check` both build their input here, which is what makes them
// give the same findings. It reads the built-in kinds only; see
// WorkloadInputOf.
func WorkloadInput(req Request, obj client.Object, object, oldObject []byte, lookup TargetLookup) (Input, error) {
	return WorkloadInputOf(req, nil, obj, object, oldObject, lookup)
}

// WorkloadInputOf is WorkloadInput for the kinds of reg (nil: the built-in
// ones). A declared kind's field paths are rooted at its declared template
// path, so its findings read like a Deployment's with the kind and path
// substituted.
func WorkloadInputOf(req Request, reg *workload.Registry, obj client.Object, object, oldObject []byte, lookup TargetLookup) (Input, error) {
	kind := req.Kind
	spec, _ := reg.PodSpec(obj)
	k, _ := reg.KindOf(obj)
	podSpecPath := strings.Join(reg.PodSpecPath(k.GroupKind()), ".")
	type id struct {
		kind refs.Kind
		name string
	}
	targets := map[id]Target{}
	var references []Reference
	for _, r := range refs.FromPodSpec(spec) {
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
		Request:   req,
		Object:    object,
		OldObject: oldObject,
		Workload: Workload{Kind: kind, Namespace: req.Namespace, Name: req.Name,
			RolloutDisabled: workload.RolloutsDisabled(obj)},
		References: references,
	}, nil
}
