package inventory

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrDigestOnly is what a guarded client answers to a read of ConfigMaps or
// Secrets.
var ErrDigestOnly = errors.New("the manager's cache holds ConfigMaps and Secrets with their values replaced by digests: " +
	"read digests through internal/inventory, or values through the manager's API reader")

// GuardClient wraps a manager's client so that reading a ConfigMap or a
// Secret through it fails instead of silently returning the digest-only
// form the cache keeps (see CacheOptions). Without the guard, a later Get
// through the manager's client would hand digests to code that expects
// values, and an Update of what it read would write digests back.
func GuardClient(c client.Client) client.Client { return guarded{c} }

type guarded struct{ client.Client }

func (g guarded) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if digestOnly(obj) {
		return fmt.Errorf("reading %T %s: %w", obj, key, ErrDigestOnly)
	}
	return g.Client.Get(ctx, key, obj, opts...)
}

func (g guarded) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if digestOnly(list) {
		return fmt.Errorf("listing %T: %w", list, ErrDigestOnly)
	}
	return g.Client.List(ctx, list, opts...)
}

func digestOnly(obj any) bool {
	switch obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret, *corev1.ConfigMapList, *corev1.SecretList:
		return true
	}
	return false
}
