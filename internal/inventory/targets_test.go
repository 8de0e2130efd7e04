package inventory

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// TestTargetsKeys checks the key names the rules' targets carry, read from
// the packed digests alone: sorted, and an empty list (never none) for an
// object without keys and for one that does not exist, as the rules' input
// document (which custom rules read) has always had them.
func TestTargetsKeys(t *testing.T) {
	// Stored whole and transformed on the way out, as the informers
	// transform what they cache (a fake client's JSON round trip would
	// mangle the packed bytes).
	c := fake.NewClientBuilder().WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"},
			Data: map[string]string{"z.yaml": "1", "a": "2"}, BinaryData: map[string][]byte{"m": {1}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "empty"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
			Data: map[string][]byte{"user": []byte("u"), "password": []byte("p")}},
	).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			var out any
			var err error
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				if out, err = TransformConfigMap(o); err == nil {
					*o = *out.(*corev1.ConfigMap)
				}
			case *corev1.Secret:
				if out, err = TransformSecret(o); err == nil {
					*o = *out.(*corev1.Secret)
				}
			}
			return err
		},
	}).Build()
	lookup := Over(c, workload.Builtin(), workload.Builtin().Kinds()).Targets(context.Background(), "shop")
	for _, tt := range []struct {
		kind   refs.Kind
		name   string
		exists bool
		keys   []string
	}{
		{refs.ConfigMap, "flags", true, []string{"a", "m", "z.yaml"}},
		{refs.ConfigMap, "empty", true, []string{}},
		{refs.ConfigMap, "gone", false, []string{}},
		{refs.Secret, "db", true, []string{"password", "user"}},
		{refs.Secret, "gone", false, []string{}},
	} {
		got, err := lookup(tt.kind, tt.name)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.kind, tt.name, err)
		}
		if !got.Known || got.Exists != tt.exists || got.Keys == nil || !slices.Equal(got.Keys, tt.keys) {
			t.Errorf("%s %s: %+v, want exists %v and keys %q", tt.kind, tt.name, got, tt.exists, tt.keys)
		}
	}
}
