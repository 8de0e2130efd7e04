package inventory

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reads records which reads reach the wrapped client; it is not an API
// server, only the other side of the wrapper.
type reads struct {
	client.Client
	got []string
}

func (r *reads) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.got = append(r.got, "get "+key.Name)
	return nil
}

func (r *reads) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	r.got = append(r.got, "list")
	return nil
}

func TestGuardClientRefusesDigestOnlyReads(t *testing.T) {
	inner := &reads{}
	c := GuardClient(inner)
	ctx := context.Background()
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
		if err := c.Get(ctx, client.ObjectKey{Name: "x"}, obj); !errors.Is(err, ErrDigestOnly) {
			t.Errorf("Get %T: %v, want ErrDigestOnly", obj, err)
		}
	}
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}} {
		if err := c.List(ctx, list); !errors.Is(err, ErrDigestOnly) {
			t.Errorf("List %T: %v, want ErrDigestOnly", list, err)
		}
	}
	if len(inner.got) != 0 {
		t.Fatalf("refused reads reached the cache: %v", inner.got)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "web"}, &appsv1.Deployment{}); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &appsv1.DeploymentList{}); err != nil {
		t.Fatal(err)
	}
	if len(inner.got) != 2 {
		t.Fatalf("other reads must pass through: %v", inner.got)
	}
}
