package configpolicy

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/flapping"
)

// NamespacePolicy is what the ConfigPolicies in force say, for one
// namespace, of what its workloads' templates carry: rollouts, revisions,
// delivery and flapping. It is built here alone (Active.For), and the
// webhook and every controller read this one struct. The rules' actions
// are apart (Active.Rules): they judge writes, and are not part of what a
// template carries.
type NamespacePolicy struct {
	// Rollouts: config-hash rollouts are on; Secrets: Secrets take part in
	// the hash.
	Rollouts, Secrets bool
	// Revisions: config snapshots are kept; RevisionSecrets: of Secrets
	// too (and Secrets are then delivered in waves too).
	Revisions, RevisionSecrets bool
	// Delivery is the delivery settings in force (nil: none), from the
	// ConfigPolicy named DeliveryPolicy.
	Delivery       *v1alpha1.DeliverySettings
	DeliveryPolicy string
	// Flapping is when a ConfigMap or Secret changes too often to roll its
	// consumers.
	Flapping flapping.Threshold
	// SnapshotsBlocked, where revisions are on, says why configward's
	// controller cannot write snapshots in the namespace now
	// (v1alpha1.SnapshotsBlockedAnnotation); "" while it can.
	SnapshotsBlocked string
}

// DefaultNamespacePolicy is what holds where no ConfigPolicy selects a
// namespace.
var DefaultNamespacePolicy = NamespacePolicy{Rollouts: true, Secrets: true, Flapping: flapping.Default}

// For is what the policies in this set say for ns (nil: a namespace the
// cache does not know yet, matched with no labels).
func (a *Active) For(ns *corev1.Namespace) NamespacePolicy {
	var p NamespacePolicy
	p.Rollouts, p.Secrets = a.rollouts(ns)
	p.Revisions, p.RevisionSecrets = a.revisions(ns)
	p.DeliveryPolicy, p.Delivery = a.delivery(ns)
	p.Flapping = a.flapping(ns)
	if p.Revisions && ns != nil {
		p.SnapshotsBlocked = ns.Annotations[v1alpha1.SnapshotsBlockedAnnotation]
	}
	return p
}

// For reads namespace name from reader (a cache) and returns what the
// policies in force now say for it; a nil Store has none in force.
func (s *Store) For(ctx context.Context, reader client.Reader, name string) (NamespacePolicy, error) {
	if s == nil {
		return DefaultNamespacePolicy, nil
	}
	ns, err := LookupNamespace(ctx, reader, name)
	if err != nil {
		return NamespacePolicy{}, err
	}
	return s.Current().For(ns), nil
}
