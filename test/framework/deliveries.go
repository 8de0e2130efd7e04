package framework

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/revision"
)

// Deliveries lists the ConfigDeliveries of the ConfigMap or Secret called
// config in namespace ns (alone or in a change set), oldest first: what both the whole-cluster suite
// and the controller tier read of a delivery.
func (e *Env) Deliveries(ctx context.Context, ns, config string) ([]v1alpha1.ConfigDelivery, error) {
	var list v1alpha1.ConfigDeliveryList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []v1alpha1.ConfigDelivery
	for _, d := range list.Items {
		if slices.ContainsFunc(delivery.Members(&d), func(m revision.Source) bool { return m.Name == config }) {
			out = append(out, d)
		}
	}
	// A change set's records count the sequence of their first member:
	// creation orders them first.
	slices.SortFunc(out, func(a, b v1alpha1.ConfigDelivery) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), int(a.Spec.Sequence-b.Spec.Sequence))
	})
	return out, nil
}

// DeliveryState says where a delivery stands in one string the specs
// compare: "State/Reason@wave"; "none" for no delivery.
func DeliveryState(ds []v1alpha1.ConfigDelivery) string {
	if len(ds) == 0 {
		return "none"
	}
	s := ds[len(ds)-1].Status
	return fmt.Sprintf("%s/%s@%s", s.State, s.Reason, s.CurrentWave)
}
