package inventory

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// cached passes a ConfigMap or Secret through the cache transform, since
// ContentChanged compares what the cache holds.
func cached(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	var out any
	var err error
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		out, err = TransformConfigMap(o)
	case *corev1.Secret:
		out, err = TransformSecret(o)
	default:
		return obj
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.(client.Object)
}

func TestContentChanged(t *testing.T) {
	cm := func(data map[string]string, mutate ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop", ResourceVersion: "1"}, Data: data}
		for _, m := range mutate {
			m(c)
		}
		return c
	}
	secret := func(data map[string]string, mutate ...func(*corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop", ResourceVersion: "1"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		for _, m := range mutate {
			m(s)
		}
		return s
	}
	reload := func(mode string) func(*corev1.ConfigMap) {
		return func(c *corev1.ConfigMap) {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[v1alpha1.ReloadAnnotation] = mode
		}
	}
	metadata := func(c *corev1.ConfigMap) {
		c.ResourceVersion, c.Generation = "2", 2
		c.Labels = map[string]string{"team": "a"}
		c.Annotations = map[string]string{"note": "edited", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
		c.OwnerReferences = []metav1.OwnerReference{{Kind: "Service", Name: "x"}}
	}
	base := map[string]string{"level": "info", "port": "80"}
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"ConfigMap unchanged", cm(base), cm(base), false},
		{"ConfigMap value changed", cm(base), cm(map[string]string{"level": "debug", "port": "80"}), true},
		{"ConfigMap key added", cm(base), cm(map[string]string{"level": "info", "port": "80", "new": ""}), true},
		{"ConfigMap key removed", cm(base), cm(map[string]string{"level": "info"}), true},
		{"ConfigMap key renamed, same value", cm(map[string]string{"a": "x"}), cm(map[string]string{"b": "x"}), true},
		{"ConfigMap value moved to binaryData", cm(map[string]string{"a": "x"}), cm(nil, func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"a": []byte("x")} }), true},
		{"ConfigMap binaryData changed", cm(nil, func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"a": {1}} }),
			cm(nil, func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"a": {2}} }), true},
		{"ConfigMap metadata only", cm(base), cm(base, metadata), false},
		{"ConfigMap made immutable", cm(base), cm(base, func(c *corev1.ConfigMap) { c.Immutable = new(bool); *c.Immutable = true }), false},
		{"reload mode rollout to hot", cm(base), cm(base, reload("hot")), true},
		{"reload mode hot to ignore", cm(base, reload("hot")), cm(base, reload("ignore")), true},
		{"reload mode ignore to rollout, by removing it", cm(base, reload("ignore")), cm(base), true},
		{"reload mode rollout spelt out", cm(base), cm(base, reload("rollout")), false},
		{"reload mode typo counts as rollout", cm(base), cm(base, reload("Hot")), false},
		{"Secret unchanged", secret(map[string]string{"password": "a"}), secret(map[string]string{"password": "a"}), false},
		{"Secret value changed", secret(map[string]string{"password": "a"}), secret(map[string]string{"password": "b"}), true},
		{"Secret key added", secret(map[string]string{"password": "a"}), secret(map[string]string{"password": "a", "user": "u"}), true},
		{"Secret metadata only", secret(map[string]string{"password": "a"}),
			secret(map[string]string{"password": "a"}, func(s *corev1.Secret) { s.Labels = map[string]string{"x": "y"}; s.ResourceVersion = "2" }), false},
		{"Secret reload mode changed", secret(map[string]string{"password": "a"}),
			secret(map[string]string{"password": "a"}, func(s *corev1.Secret) { s.Annotations = map[string]string{v1alpha1.ReloadAnnotation: "hot"} }), true},
		{"a ConfigMap replaced by a Secret", cm(base), secret(nil), true},
		{"a Secret replaced by a ConfigMap", secret(nil), cm(nil), true},
		{"anything else counts as changed", &appsv1.Deployment{}, &appsv1.Deployment{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, new := cached(t, tc.old), cached(t, tc.new)
			if got := ContentChanged(old, new); got != tc.want {
				t.Fatalf("ContentChanged = %v, want %v", got, tc.want)
			}
		})
	}
}
