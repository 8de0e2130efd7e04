package controller

import (
	"context"

	"github.com/configward/configward/internal/configpolicy"
)

// Settings are what the ConfigPolicies selecting a namespace say of
// rollouts, revisions, delivery and flapping there: the one struct of
// configpolicy.
type Settings = configpolicy.NamespacePolicy

// SettingsFunc returns a namespace's Settings.
type SettingsFunc func(ctx context.Context, namespace string) (Settings, error)

// defaults are the settings without any ConfigPolicy.
var defaults = configpolicy.DefaultNamespacePolicy

func (f SettingsFunc) of(ctx context.Context, namespace string) (Settings, error) {
	if f == nil {
		return defaults, nil
	}
	return f(ctx, namespace)
}
