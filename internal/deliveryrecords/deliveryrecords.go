// Package deliveryrecords reads ConfigDelivery records: from an informer
// cache, indexed by the config they deliver, and, for a write the cache's
// answer disputes, from the API server. Which record counts (the latest)
// and what it decides are internal/delivery's, which reads nothing.
package deliveryrecords

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/revision"
)

// ConfigIndex is the cache index of ConfigDeliveries by the configs they
// deliver ("ConfigMap/<name>", as inventory.IndexValue): a change set's
// record under each member.
const ConfigIndex = "configward.dev/delivers"

// Index registers ConfigIndex; both processes read deliveries through it.
func Index(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.ConfigDelivery{}, ConfigIndex, func(o client.Object) []string {
		members := delivery.Members(o.(*v1alpha1.ConfigDelivery))
		out := make([]string, len(members))
		for i, m := range members {
			out[i] = indexValue(m)
		}
		return out
	})
}

func indexValue(src revision.Source) string { return inventory.IndexValue(src.Kind, src.Name) }

// Reader reads the records of each config.
type Reader struct {
	// Cache reads ConfigDeliveries, indexed by Index.
	Cache client.Reader
	// Live reads ConfigDeliveries from the API server, for a write whose
	// snapshots the cache's answer disputes (nil: the cache answers alone).
	Live client.Reader
}

// Of lists the deliveries of one config, newest first, as copies the
// caller may change.
func (r *Reader) Of(ctx context.Context, namespace string, src revision.Source) ([]*v1alpha1.ConfigDelivery, error) {
	return r.list(ctx, namespace, src)
}

// Latest is the newest delivery of one config (delivery.Latest), nil when
// there is none: the cache's own object, never to be changed. Every stamp
// of every consumer reads it, and a record of a thousand workloads is too
// large to copy each time.
func (r *Reader) Latest(ctx context.Context, namespace string, src revision.Source) (*v1alpha1.ConfigDelivery, error) {
	recs, err := r.list(ctx, namespace, src, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	return delivery.Latest(recs, src), nil
}

// LiveLatest is the newest delivery of one config as the API server has
// it (nil when there is none; the cache's answer where there is no Live).
// The API server cannot select by the cache's index: the namespace's
// records are filtered here, which is why only a disputed write pays for
// it.
func (r *Reader) LiveLatest(ctx context.Context, namespace string, src revision.Source) (*v1alpha1.ConfigDelivery, error) {
	if r.Live == nil {
		return r.Latest(ctx, namespace, src)
	}
	var list v1alpha1.ConfigDeliveryList
	if err := r.Live.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the deliveries of %s %s/%s from the API server: %w", src.Kind, namespace, src.Name, err)
	}
	return delivery.Latest(items(&list), src), nil
}

// list lists the deliveries of one config, newest first, with extra list
// options.
func (r *Reader) list(ctx context.Context, namespace string, src revision.Source, opts ...client.ListOption) ([]*v1alpha1.ConfigDelivery, error) {
	var list v1alpha1.ConfigDeliveryList
	opts = append(opts, client.InNamespace(namespace), client.MatchingFields{ConfigIndex: indexValue(src)})
	if err := r.Cache.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing the deliveries of %s %s/%s: %w", src.Kind, namespace, src.Name, err)
	}
	out := items(&list)
	delivery.SortNewestFirst(out)
	return out, nil
}

func items(list *v1alpha1.ConfigDeliveryList) []*v1alpha1.ConfigDelivery {
	out := make([]*v1alpha1.ConfigDelivery, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}
