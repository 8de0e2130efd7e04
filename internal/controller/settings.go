package controller

import (
	"context"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/churn"
)

// Settings are what the ConfigPolicies selecting a namespace say of
// rollouts and revisions there (see configpolicy.Active).
type Settings struct {
	// Rollouts: config-hash rollouts are on; Secrets: Secrets take part in
	// the hash.
	Rollouts, Secrets bool
	// Revisions: config snapshots are kept; RevisionSecrets: of Secrets too.
	Revisions, RevisionSecrets bool
	// Delivery is the delivery settings in force (nil: none), from the
	// ConfigPolicy DeliveryPolicy.
	Delivery       *v1alpha1.DeliverySettings
	DeliveryPolicy string
	// Flapping is when a ConfigMap or Secret changes too often to roll its
	// consumers.
	Flapping churn.Threshold
}

// SettingsFunc returns a namespace's Settings.
type SettingsFunc func(ctx context.Context, namespace string) (Settings, error)

// defaults are the settings without any ConfigPolicy.
var defaults = Settings{Rollouts: true, Secrets: true, Flapping: churn.Default}

func (f SettingsFunc) of(ctx context.Context, namespace string) (Settings, error) {
	if f == nil {
		return defaults, nil
	}
	return f(ctx, namespace)
}
