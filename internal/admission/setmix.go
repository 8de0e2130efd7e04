package admission

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// setMixWarning warns about a workload whose pods could read a change set
// as a mix: it mounts two or more hot configs that reach it through
// delivery channels (so they may change together, as one set), and no
// reload agent triggers its program's reload once every member holds the
// set's content: none asked for, or one whose program watches its own
// files (the agent cannot hold that reload back). The kubelet swaps each
// volume on its own; separate volumes, or one projected volume, only
// narrow the window. "" when there is nothing to say. A workload another
// controls is not warned: its owner's write was.
func setMixWarning(ctx context.Context, inv *inventory.Inventory, policy configpolicy.NamespacePolicy, w workload.Object, namespace, name string, spec *corev1.PodSpec) (string, error) {
	if policy.Delivery == nil || w.Controlled() {
		return "", nil
	}
	trigger, asked := w.TemplateAnnotation(v1alpha1.ReloadAgentAnnotation)
	if asked && trigger != string(reload.Watch) {
		return "", nil
	}
	var channelled []string
	seen := map[revision.Source]bool{}
	for _, r := range refs.FromPodSpec(spec) {
		src := revision.Source{Kind: r.Kind, Name: r.Name}
		if (r.Via != refs.Volume && r.Via != refs.Projected) || seen[src] {
			continue
		}
		seen[src] = true
		o, err := inv.Get(ctx, r.Kind, namespace, r.Name)
		if err != nil {
			return "", err
		}
		if delivery.Channelled(o, policy) {
			channelled = append(channelled, src.String())
		}
	}
	if len(channelled) < 2 {
		return "", nil
	}
	why := fmt.Sprintf("without the reload agent (%s)", v1alpha1.ReloadAgentAnnotation)
	if asked {
		why = fmt.Sprintf("with %s: watch, whose program reloads by itself when a file changes", v1alpha1.ReloadAgentAnnotation)
	}
	return fmt.Sprintf("[config-set] %s %s/%s mounts hot %s, which reach its pods through delivery channels and may change together as one set, %s: "+
		"the kubelet swaps each volume on its own, so the program can read one member new and another old. Separate volumes, or one projected volume, narrow that window but do not close it; "+
		"only the agent triggering the reload (a signal or an HTTP call) prevents a reload on a mix: it reloads once every member holds the set's content.",
		w.Type.Kind.Kind, namespace, name, strings.Join(channelled, ", "), why), nil
}
