// Package inventorytest gives the unit tests of the packages that read the
// inventory (the admission handlers, the reload reports) one stand-in for
// the manager's cache, holding objects the way the informers hold them, so
// each package does not grow its own copy.
package inventorytest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/workload"
)

// cacheScheme is built once: tests, fuzz targets among them, make many
// caches.
var cacheScheme = scheme.Scheme()

// Cache returns a reader holding objs the way the manager's cache holds
// them: ConfigMaps and Secrets digest-only (inventory.TransformConfigMap and
// TransformSecret), every built-in workload kind indexed by the config it
// consumes (inventory.IndexConsumers). The transforms run on every read
// rather than on the way in: the fake client stores objects as JSON, and
// the packed digests of a transformed object are raw bytes that JSON does
// not keep (the real cache keeps the Go object, never serialised).
func Cache(t testing.TB, objs ...client.Object) client.Client {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(cacheScheme).WithObjects(objs...)
	if err := inventory.IndexConsumers(context.Background(), builderIndexer{b}, workload.Builtin(), workload.Builtin().Kinds()); err != nil {
		t.Fatal(err)
	}
	b.WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			return digestOnly(obj)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			switch l := list.(type) {
			case *corev1.ConfigMapList:
				for i := range l.Items {
					if err := digestOnly(&l.Items[i]); err != nil {
						return err
					}
				}
			case *corev1.SecretList:
				for i := range l.Items {
					if err := digestOnly(&l.Items[i]); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
	return b.Build()
}

// Inventory is the inventory of a cache made by Cache, for the built-in
// kinds, as inventory.Start returns it.
func Inventory(c client.Reader) *inventory.Inventory {
	return inventory.Over(c, workload.Builtin(), workload.Builtin().Kinds())
}

// builderIndexer registers indexes on a fake client builder, so the
// production index function (inventory.IndexConsumers) is the one in use.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// digestOnly replaces a ConfigMap or Secret, in place, by its cached form.
func digestOnly(obj client.Object) error {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		out, err := inventory.TransformConfigMap(o)
		if err != nil {
			return err
		}
		*o = *out.(*corev1.ConfigMap)
	case *corev1.Secret:
		out, err := inventory.TransformSecret(o)
		if err != nil {
			return err
		}
		*o = *out.(*corev1.Secret)
	}
	return nil
}
