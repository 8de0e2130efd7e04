package inventory

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/workload"
)

// Start registers the informers the inventory reads, so they start and sync
// with the manager's cache (and count for readiness) instead of lazily on the
// first request. The informers of consumerKinds are registered too, with
// the consumer index, so Consumers can answer for those kinds.
func Start(ctx context.Context, c cache.Cache, consumerKinds []workload.Kind) (*Inventory, error) {
	objs := []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}
	if len(consumerKinds) > 0 {
		if err := IndexConsumers(ctx, c, consumerKinds); err != nil {
			return nil, err
		}
		for _, k := range consumerKinds {
			obj, _ := workload.New(k.Kind)
			objs = append(objs, obj)
		}
	}
	for _, o := range objs {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return nil, fmt.Errorf("starting informer for %T: %w", o, err)
		}
	}
	return New(c), nil
}

// RolloutKinds are the workload kinds whose pod template configward keeps in
// step with their config: every workload kind but bare Pods, whose spec is
// immutable.
func RolloutKinds() []workload.Kind {
	var out []workload.Kind
	for _, k := range workload.Kinds {
		if k.Kind != "Pod" {
			out = append(out, k)
		}
	}
	return out
}
