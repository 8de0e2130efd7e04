package inventory

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
)

// ContentKinds are the kinds of config whose content configward digests:
// ConfigMaps and Secrets. (A SecretProviderClass's content lives outside
// the cluster; the driver reports its versions.)
func ContentKinds() []refs.Kind { return []refs.Kind{refs.ConfigMap, refs.Secret} }

// NewObject is an empty object of kind to read one into: a Secret for
// refs.Secret, a ConfigMap for any other kind, since every caller names one
// of the ContentKinds (a SecretProviderClass is read as ClassMetadata). One
// place maps a refs.Kind to its Go type, so no reader picks its own.
func NewObject(kind refs.Kind) client.Object {
	if kind == refs.Secret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}

// KeyDigestsOf is the digest of every key of a ConfigMap (data and
// binaryData) or a Secret (data), nil for any other object. The cache's
// transforms digest with it, and so does every reader of a live object, so
// digests read from the API server and from the cache always compare.
func KeyDigestsOf(obj client.Object) map[string]string {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return digest.KeyDigests(o.Data, o.BinaryData)
	case *corev1.Secret:
		return digest.SecretKeyDigests(o.Data)
	}
	return nil
}

// ReadLive reads the ConfigMap or Secret key names from c, the API server
// (never the cache, which holds digests only), and returns it with its key
// digests. Where the cache may be behind (a pod can mount content before
// the cache sees it) or the values themselves are copied (snapshots,
// channels), this is the one read. The object holds the values: callers
// copy them or drop them, and never log or keep them. A NotFound error is
// returned as the client gives it.
func ReadLive(ctx context.Context, c client.Reader, kind refs.Kind, key types.NamespacedName) (client.Object, map[string]string, error) {
	if kind != refs.ConfigMap && kind != refs.Secret {
		return nil, nil, fmt.Errorf("inventory: configward reads no content of a %s", kind)
	}
	obj := NewObject(kind)
	if err := c.Get(ctx, key, obj); err != nil {
		return nil, nil, err
	}
	return obj, KeyDigestsOf(obj), nil
}
