package status

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
)

// deliveriesOf says, for each workload an open config delivery holds or
// moves ("namespace/Kind/name"), which wave of which delivery it is in and
// what that wave waits for. A cluster without the ConfigDelivery CRD (an
// older configward) has none; without the right to read them, status
// still works and says what it cannot show.
func deliveriesOf(ctx context.Context, c client.Reader, in []client.ListOption) (map[string][]string, string, error) {
	var list v1alpha1.ConfigDeliveryList
	if read, note, err := listOptional(ctx, c, &list, in, "configdeliveries.configward.dev", "",
		"which wave of a config delivery each workload is in does not show"); !read {
		return nil, note, err
	}
	byNamespace := map[string][]v1alpha1.ConfigDelivery{}
	for _, d := range list.Items {
		byNamespace[d.Namespace] = append(byNamespace[d.Namespace], d)
	}
	out := map[string][]string{}
	for ns, recs := range byNamespace {
		for w, ps := range delivery.Positions(recs) {
			for _, p := range ps {
				out[ns+"/"+w] = append(out[ns+"/"+w], describe(p))
			}
		}
	}
	return out, "", nil
}

func describe(p delivery.Position) string {
	where := fmt.Sprintf("%s: ConfigDelivery %s, wave %s (%d of %d)", p.Config, p.Record, p.Wave, p.Index+1, p.Waves)
	switch {
	case p.RolledBack && p.Hot:
		return where + fmt.Sprintf(", rolled back: its pods in this wave got the content they had back; %s: %s", p.State, p.Message)
	case p.RolledBack:
		return where + fmt.Sprintf(", rolled back to its previous revision; %s: %s", p.State, p.Message)
	case p.Started:
		return where + fmt.Sprintf(", %s: %s", p.State, p.Message) + checks(p.Checks)
	case p.Hot:
		return where + fmt.Sprintf(", its pods in this wave keep the content they have until this wave starts; the delivery is %s at wave %s", p.State, p.CurrentWave)
	}
	return where + fmt.Sprintf(", keeps its revision until this wave starts; the delivery is %s at wave %s", p.State, p.CurrentWave)
}

// checks says what a wave's analysis checks measured last.
func checks(cs []v1alpha1.CheckStatus) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s (%s; %d measured, %d failed)", c.Name, c.Result, c.Message, c.Measurements, c.Failures))
	}
	if len(out) == 0 {
		return ""
	}
	return "; checks: " + strings.Join(out, "; ")
}

// listOptional lists what status shows beside workloads, of a kind the
// cluster may not serve (its CRD not installed: absent says so, "" for
// nothing to say) or that the user may not read (forbidden says what then
// does not show). read is false in both cases: status goes on without it.
func listOptional(ctx context.Context, c client.Reader, list client.ObjectList, in []client.ListOption, resource, absent, forbidden string) (read bool, note string, err error) {
	err = c.List(ctx, list, in...)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return false, absent, nil
	case apierrors.IsForbidden(err):
		return false, "you may not list " + resource + ": " + forbidden, nil
	case err != nil:
		return false, "", fmt.Errorf("listing %s: %w", strings.SplitN(resource, ".", 2)[0], err)
	}
	return true, "", nil
}
