package delivery

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// ConfigIndex is the cache index of ConfigDeliveries by the config they
// deliver ("ConfigMap/<name>", as inventory.IndexValue).
const ConfigIndex = "configward.dev/delivers"

// IndexRecords registers ConfigIndex; both processes read deliveries
// through it.
func IndexRecords(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.ConfigDelivery{}, ConfigIndex, func(o client.Object) []string {
		return []string{delivers(o.(*v1alpha1.ConfigDelivery))}
	})
}

// delivers is the config d delivers, as ConfigIndex holds it.
func delivers(d *v1alpha1.ConfigDelivery) string {
	return inventory.IndexValue(refs.Kind(d.Spec.Config.Kind), d.Spec.Config.Name)
}

// Records lists the deliveries of one config, newest first, as copies the
// caller may change.
func Records(ctx context.Context, r client.Reader, namespace string, src revision.Source) ([]*v1alpha1.ConfigDelivery, error) {
	return records(ctx, r, namespace, src)
}

// records lists the deliveries of one config with extra list options.
func records(ctx context.Context, r client.Reader, namespace string, src revision.Source, opts ...client.ListOption) ([]*v1alpha1.ConfigDelivery, error) {
	var list v1alpha1.ConfigDeliveryList
	opts = append(opts, client.InNamespace(namespace), client.MatchingFields{ConfigIndex: inventory.IndexValue(src.Kind, src.Name)})
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing the deliveries of %s %s/%s: %w", src.Kind, namespace, src.Name, err)
	}
	out := make([]*v1alpha1.ConfigDelivery, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	sortNewestFirst(out)
	return out, nil
}

// latest is the newest delivery of one config, nil when there is none: the
// cache's own object, never to be changed. Every stamp of every consumer
// reads it, and a record of a thousand workloads is too large to copy
// each time.
func latest(ctx context.Context, r client.Reader, namespace string, src revision.Source) (*v1alpha1.ConfigDelivery, error) {
	recs, err := records(ctx, r, namespace, src, client.UnsafeDisableDeepCopy)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	return recs[0], nil
}

// liveLatest is the newest delivery of one config as the API server has
// it (nil when there is none). The API server cannot select by the cache's
// index: the namespace's records are filtered here, which is why only a
// disputed write pays for it.
func (p *Pinner) liveLatest(ctx context.Context, namespace string, src revision.Source) (*v1alpha1.ConfigDelivery, error) {
	var list v1alpha1.ConfigDeliveryList
	if err := p.Live.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the deliveries of %s %s/%s from the API server: %w", src.Kind, namespace, src.Name, err)
	}
	var recs []*v1alpha1.ConfigDelivery
	want := inventory.IndexValue(src.Kind, src.Name)
	for i := range list.Items {
		if d := &list.Items[i]; delivers(d) == want {
			recs = append(recs, d)
		}
	}
	if len(recs) == 0 {
		return nil, nil
	}
	sortNewestFirst(recs)
	return recs[0], nil
}

// Pinner answers, from the cache, which revision of each delivered config
// a workload's template must name (see Pin). The webhook and the rollout
// controller stamp with its answer, so neither can move a consumer past
// its wave.
type Pinner struct {
	// Reader reads ConfigDeliveries, indexed by IndexRecords.
	Reader client.Reader
	// Live reads ConfigDeliveries from the API server, for a write whose
	// snapshots the cache's answer disputes (nil: the cache answers alone).
	Live      client.Reader
	Inventory *inventory.Inventory
}

// Pinned is what the open deliveries say of one workload's template.
type Pinned struct {
	// Snapshots is the snapshot each delivered config it consumes must be
	// pinned to; configs read at their current content are left out.
	Snapshots revision.Snapshots
	// Reached: a delivery has reached the workload (see Reached).
	Reached bool
}

// Pins returns what the open deliveries of the configs a pod spec consumes
// (consumed, refs.ConsumedBy) say of the workload kind/name whose stored
// template names stored. key is the installation's key.
//
// written are the snapshots the write being judged names (nil where no
// write is judged). A writer that moves a delivered config to a snapshot
// other than the cache's answer is, as a rule, configward's controller
// acting on a wave that started (or was rolled back) a moment ago, which
// this process's cache has not seen yet: that config's record is then read
// from the API server (Live), and the writer is judged by it, so the
// controller's stamp sticks the first time.
func (p *Pinner) Pins(ctx context.Context, key []byte, namespace string, policy configpolicy.NamespacePolicy, kind, name string, consumed []refs.Consumption, stored, written revision.Snapshots) (Pinned, error) {
	var out Pinned
	if p == nil || policy.Delivery == nil {
		return out, nil
	}
	for _, c := range consumed {
		src := revision.Source{Kind: c.Kind, Name: c.Name}
		o, delivered, err := p.Delivered(ctx, namespace, policy, src)
		if err != nil {
			return Pinned{}, err
		}
		if !delivered {
			continue
		}
		rec, err := latest(ctx, p.Reader, namespace, src)
		if err != nil {
			return Pinned{}, err
		}
		current := p.Inventory.SnapshotName(key, o)
		pin := Pin(rec, current, kind, name, stored[src])
		if w := written[src]; p.Live != nil && w != "" && w != stored[src] && w != cmp.Or(pin, current) {
			if rec, err = p.liveLatest(ctx, namespace, src); err != nil {
				return Pinned{}, err
			}
			pin = Pin(rec, current, kind, name, stored[src])
		}
		out.Reached = out.Reached || Reached(rec, current, kind, name)
		if pin != "" && pin != current {
			if out.Snapshots == nil {
				out.Snapshots = revision.Snapshots{}
			}
			out.Snapshots[src] = pin
		}
	}
	return out, nil
}

// Delivered reports whether changes of src are delivered in waves in a
// namespace with policy: delivery is on there, and src exists, is
// rollout-mode, is no snapshot itself, and is a ConfigMap or, where Secrets
// have revisions, a Secret that gets snapshots.
func (p *Pinner) Delivered(ctx context.Context, namespace string, policy configpolicy.NamespacePolicy, src revision.Source) (inventory.Object, bool, error) {
	if policy.Delivery == nil || (src.Kind == refs.Secret && !policy.RevisionSecrets) {
		return inventory.Object{}, false, nil
	}
	o, err := p.Inventory.Get(ctx, src.Kind, namespace, src.Name)
	if err != nil || !o.Exists || o.Mode != inventory.Rollout {
		return o, false, err
	}
	if _, isSnapshot := revision.SnapshotOf(o.Labels, o.Annotations); isSnapshot {
		return o, false, nil
	}
	if src.Kind == refs.Secret && !revision.Copied(o.Type) {
		return o, false, nil
	}
	return o, true, nil
}

// Channelled says whether o, a ConfigMap or Secret, reaches pods through
// channels in a namespace with policy: delivery is on there, and o is hot,
// is neither a snapshot nor a channel itself, and is a ConfigMap or, where
// Secrets have revisions, a Secret that gets snapshots.
func Channelled(o inventory.Object, policy configpolicy.NamespacePolicy) bool {
	if policy.Delivery == nil || !o.Exists || o.Mode != inventory.Hot {
		return false
	}
	if _, isSnapshot := revision.SnapshotOf(o.Labels, o.Annotations); isSnapshot {
		return false
	}
	if _, _, isChannel := channel.Of(o.Labels, o.Annotations); isChannel {
		return false
	}
	switch o.Kind {
	case refs.ConfigMap:
		return true
	case refs.Secret:
		return policy.RevisionSecrets && revision.Copied(o.Type)
	}
	return false
}

// RecordName names the seq-th delivery of src: the kind, the config's name
// (cut to keep the name within a DNS subdomain's length) and seq.
func RecordName(src revision.Source, seq int64) string {
	name := src.Name
	if len(name) > 200 {
		name = name[:200]
	}
	return fmt.Sprintf("%s-%s-%d", strings.ToLower(string(src.Kind)), name, seq)
}
