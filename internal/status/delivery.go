package status

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
)

// deliveriesOf says, for each workload an open config delivery holds or
// moves ("namespace/Kind/name"), which wave of which delivery it is in and
// what that wave waits for. A cluster without the ConfigDelivery CRD (an
// older configward) has none.
func deliveriesOf(ctx context.Context, c client.Reader, in []client.ListOption) (map[string][]string, error) {
	var list v1alpha1.ConfigDeliveryList
	if err := c.List(ctx, &list, in...); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing configdeliveries: %w", err)
	}
	out := map[string][]string{}
	for i := range list.Items {
		d := &list.Items[i]
		if !delivery.Open(d.Status.State) || d.Status.State == "" {
			continue
		}
		cur := delivery.CurrentWave(d)
		for wi, w := range d.Status.Waves {
			where := fmt.Sprintf("wave %s (%d of %d)", w.Name, wi+1, len(d.Status.Waves))
			switch {
			case wi < cur:
				continue // delivered: nothing to say
			case wi > cur:
				where += fmt.Sprintf(", keeps its revision until this wave starts; the delivery is %s at wave %s", d.Status.State, d.Status.CurrentWave)
			default:
				where += fmt.Sprintf(", %s: %s", d.Status.State, d.Status.Message)
			}
			for _, t := range w.Workloads {
				key := d.Namespace + "/" + t.Kind + "/" + t.Name
				out[key] = append(out[key], fmt.Sprintf("%s %s: ConfigDelivery %s, %s", d.Spec.Config.Kind, d.Spec.Config.Name, d.Name, where))
			}
		}
	}
	return out, nil
}
