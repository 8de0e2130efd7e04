package rollouts

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configward/configward/internal/workload"
)

// A manager refuses two controllers of one name; a declared kind may share
// its Kind with a built-in one (OpenKruise's StatefulSet).
func TestControllerNamesAreUniqueAcrossGroups(t *testing.T) {
	decls, err := workload.ParseDeclarations([]byte(`[{group: apps.kruise.io, version: v1beta1, kind: StatefulSet, resource: statefulsets, podTemplatePath: spec.template},
 {group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts, podTemplatePath: spec.template}]`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := workload.NewRegistry(decls)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, k := range reg.Kinds() {
		typ, _ := reg.Type(k.GroupKind())
		name := controllerName(typ)
		if other, dup := seen[name]; dup {
			t.Errorf("%s and %s share the controller name %q", other, k.GroupKind(), name)
		}
		seen[name] = k.GroupKind().String()
	}
	named := func(group, kind string) string {
		typ, _ := reg.Type(schema.GroupKind{Group: group, Kind: kind})
		return controllerName(typ)
	}
	if got := named("apps", "Deployment"); got != "rollout-deployment" {
		t.Errorf("a built-in kind's controller was renamed: %q", got)
	}
	if got := named("argoproj.io", "Rollout"); got != "rollout-rollout-argoproj-io" {
		t.Errorf("Rollout's controller: %q", got)
	}
}
