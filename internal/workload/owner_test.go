package workload

import (
	"context"
	"errors"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An owner reference is read as a kind by group and Kind, and nothing else.
func TestTypeOfOwner(t *testing.T) {
	kruise := argoRegistry(t)
	for _, tc := range []struct {
		name       string
		reg        *Registry
		apiVersion string
		kind       string
		want       string // the Type's RecordKind, "" for none
	}{
		{"a ReplicaSet", Builtin(), "apps/v1", "ReplicaSet", "ReplicaSet"},
		{"a CronJob", Builtin(), "batch/v1", "CronJob", "CronJob"},
		{"a Pod", Builtin(), "v1", "Pod", "Pod"},
		{"a StatefulSet of another group", Builtin(), "apps.kruise.io/v1beta1", "StatefulSet", ""},
		{"the same, declared", kruise, "apps.kruise.io/v1beta1", "StatefulSet", "StatefulSet.apps.kruise.io"},
		{"a declared Rollout, any version", kruise, "argoproj.io/v1", "Rollout", "Rollout.argoproj.io"},
		{"a kind nobody declared", Builtin(), "example.com/v1", "Queue", ""},
		{"an apiVersion that does not parse", Builtin(), "apps/v1/x", "ReplicaSet", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if typ, ok := tc.reg.TypeOfOwner(&metav1.OwnerReference{APIVersion: tc.apiVersion, Kind: tc.kind}); ok {
				got = typ.RecordKind()
			}
			if got != tc.want {
				t.Fatalf("TypeOfOwner = %q, want %q", got, tc.want)
			}
		})
	}
}

// A pod's top-level workload is read from the cache as an object of its
// kind, and only while it is the object its pods' references name.
func TestTopWorkloadOf(t *testing.T) {
	controller := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: new(true)}}
	}
	meta := func(name string, uid types.UID, owners ...metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name, UID: uid, OwnerReferences: owners}
	}
	cache := objects{
		&appsv1.Deployment{ObjectMeta: meta("web", "web-1")},
		&appsv1.ReplicaSet{ObjectMeta: meta("web-abc", "rs-1", controller("apps/v1", "Deployment", "web", "web-1")...)},
		&appsv1.ReplicaSet{ObjectMeta: meta("orphan-abc", "rs-2", controller("apps/v1", "Deployment", "orphan", "orphan-1")...)},
		&batchv1.Job{ObjectMeta: meta("nightly-1", "job-1", controller("batch/v1", "CronJob", "nightly", "cron-1")...)},
		&batchv1.CronJob{ObjectMeta: meta("nightly", "cron-1")},
		&appsv1.StatefulSet{ObjectMeta: meta("db", "db-2")},
		&appsv1.ReplicaSet{ObjectMeta: meta("api-abc", "rs-3", controller("apps/v1", "Deployment", unreadable, "api-1")...)},
	}
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		want   string // Kind/name of the workload, "" for none
		err    bool
	}{
		{"a Deployment's pod", controller("apps/v1", "ReplicaSet", "web-abc", "rs-1"), "Deployment/web", false},
		{"a CronJob's pod", controller("batch/v1", "Job", "nightly-1", "job-1"), "CronJob/nightly", false},
		{"a pod of a ReplicaSet whose Deployment is gone", controller("apps/v1", "ReplicaSet", "orphan-abc", "rs-2"), "", false},
		{"a StatefulSet's pod", controller("apps/v1", "StatefulSet", "db", "db-2"), "StatefulSet/db", false},
		{"a pod of a StatefulSet since recreated", controller("apps/v1", "StatefulSet", "db", "db-1"), "", false},
		{"a pod of a kind nobody declared", controller("example.com/v1", "Queue", "q", "q-1"), "", false},
		{"a bare pod", nil, "", false},
		{"a pod whose workload the cache cannot read", controller("apps/v1", "ReplicaSet", "api-abc", "rs-3"), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: meta("pod", "pod-1", tc.owners...)}
			got := ""
			w, ok, err := Builtin().TopWorkloadOf(context.Background(), cache, pod)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", err, tc.err)
			}
			if ok {
				got = w.Type.Kind.Kind + "/" + w.Obj.GetName()
				if reflect.TypeOf(w.Obj) != reflect.TypeOf(w.Type.New()) {
					t.Errorf("read as %T, not as its kind", w.Obj)
				}
			}
			if got != tc.want {
				t.Fatalf("TopWorkloadOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// objects stands in for the cache TopWorkloadOf reads: it answers Gets of
// the typed objects it holds by Go type and name, and nothing more; a Get
// of an object named unreadable fails as a cache that cannot answer.
type objects []client.Object

const unreadable = "unreadable"

func (c objects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if key.Name == unreadable {
		return errors.New("the cache cannot answer")
	}
	for _, o := range c {
		if reflect.TypeOf(o) == reflect.TypeOf(obj) && o.GetNamespace() == key.Namespace && o.GetName() == key.Name {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

func (objects) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("TopWorkloadOf lists nothing")
}
