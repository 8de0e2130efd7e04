package inventory

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
)

// Each kind of config is read into its own Go type.
func TestNewObject(t *testing.T) {
	for _, tc := range []struct {
		kind refs.Kind
		want client.Object
	}{
		{refs.ConfigMap, &corev1.ConfigMap{}},
		{refs.Secret, &corev1.Secret{}},
	} {
		if got := NewObject(tc.kind); reflect.TypeOf(got) != reflect.TypeOf(tc.want) {
			t.Errorf("NewObject(%s) = %T, want %T", tc.kind, got, tc.want)
		}
	}
	for _, k := range ContentKinds() {
		if o := NewObject(k); o.GetName() != "" || o.GetResourceVersion() != "" {
			t.Errorf("NewObject(%s) is not empty: %v", k, o)
		}
	}
}

// A live object's digests are the ones the cache keeps of it, so the two
// compare: binaryData counts for a ConfigMap, nothing but data for a Secret.
func TestKeyDigestsOf(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"app.yaml": "level: info"}, BinaryData: map[string][]byte{"blob": {0xff, 0}}}
	secret := &corev1.Secret{Data: map[string][]byte{"password": []byte("hunter2")}, StringData: map[string]string{"ignored": "x"}}
	cachedCM, _ := TransformConfigMap(cm.DeepCopy())
	cachedSecret, _ := TransformSecret(secret.DeepCopy())
	for _, tc := range []struct {
		name   string
		obj    client.Object
		want   map[string]string
		cached string // the packed digests the cache holds, "" for none
	}{
		{"a ConfigMap's data and binaryData", cm, digest.KeyDigests(cm.Data, cm.BinaryData), cachedCM.(*corev1.ConfigMap).Data[packedKey]},
		{"a Secret's data alone", secret, digest.SecretKeyDigests(secret.Data), string(cachedSecret.(*corev1.Secret).Data[packedKey])},
		{"an empty ConfigMap", &corev1.ConfigMap{}, map[string]string{}, ""},
		{"no config at all", &corev1.Pod{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := KeyDigestsOf(tc.obj)
			if !maps.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Fatalf("KeyDigestsOf = %v, want %v", got, tc.want)
			}
			if tc.cached == "" {
				return
			}
			if cached, err := unpack(tc.cached); err != nil || !maps.Equal(cached, got) {
				t.Fatalf("the cache keeps %v (%v), the live object gives %v", cached, err, got)
			}
		})
	}
}

// A live read returns the object with its digests, the API server's errors
// as they are, and reads no kind whose content configward does not digest.
func TestReadLive(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}, Data: map[string]string{"a": "1"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Data: map[string][]byte{"password": []byte("p")}}
	unavailable := errors.New("the API server is unavailable")
	// apiServer answers the one Get ReadLive makes, as the API server would.
	apiServer := getter(func(key client.ObjectKey, obj client.Object) error {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			if key.Name == cm.Name {
				cm.DeepCopyInto(o)
				return nil
			}
			if key.Name == "down" {
				return unavailable
			}
		case *corev1.Secret:
			if key.Name == secret.Name {
				secret.DeepCopyInto(o)
				return nil
			}
		}
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	})
	for _, tc := range []struct {
		name     string
		kind     refs.Kind
		key      string
		want     map[string]string
		notFound bool
		err      error
	}{
		{"a ConfigMap", refs.ConfigMap, "flags", KeyDigestsOf(cm), false, nil},
		{"a Secret", refs.Secret, "db", KeyDigestsOf(secret), false, nil},
		{"a Secret of a ConfigMap's name", refs.Secret, "flags", nil, true, nil},
		{"a ConfigMap that is gone", refs.ConfigMap, "gone", nil, true, nil},
		{"an API server that does not answer", refs.ConfigMap, "down", nil, false, unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, got, err := ReadLive(context.Background(), apiServer, tc.kind, types.NamespacedName{Namespace: "shop", Name: tc.key})
			switch {
			case tc.notFound:
				if !apierrors.IsNotFound(err) || obj != nil {
					t.Fatalf("ReadLive = %v, %v, want NotFound", obj, err)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
			default:
				if err != nil || obj.GetName() != tc.key || !maps.Equal(got, tc.want) {
					t.Fatalf("ReadLive = %v, %v, %v; want %s with %v", obj, got, err, tc.key, tc.want)
				}
			}
		})
	}
	if _, _, err := ReadLive(context.Background(), apiServer, refs.SecretProviderClass, types.NamespacedName{Namespace: "shop", Name: "vault"}); err == nil {
		t.Fatal("a SecretProviderClass's content was read")
	}
}

// getter is a client.Reader whose Gets a function answers.
type getter func(client.ObjectKey, client.Object) error

func (g getter) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return g(key, obj)
}

func (getter) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("nothing is listed")
}
