package slimobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// kinds are the types with a slim form, in the order the fuzz target's
// kind byte picks them.
var kinds = []func() runtime.Object{
	func() runtime.Object { return &corev1.Pod{} },
	func() runtime.Object { return &appsv1.Deployment{} },
	func() runtime.Object { return &appsv1.StatefulSet{} },
	func() runtime.Object { return &appsv1.DaemonSet{} },
	func() runtime.Object { return &appsv1.ReplicaSet{} },
	func() runtime.Object { return &batchv1.Job{} },
	func() runtime.Object { return &batchv1.CronJob{} },
}

// passOver clears, in a typed object, what the slim decoding passes over:
// this list is the contract, written apart from the shadows it checks.
func passOver(obj runtime.Object) {
	meta := func(m *metav1.ObjectMeta) { m.ManagedFields = nil }
	spec := func(s *corev1.PodSpec) {
		s.Affinity, s.Overhead, s.Resources, s.TopologySpreadConstraints = nil, nil, nil, nil
		for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
			for i := range cs {
				cs[i].Resources = corev1.ResourceRequirements{}
				cs[i].LivenessProbe, cs[i].ReadinessProbe, cs[i].StartupProbe, cs[i].Lifecycle = nil, nil, nil, nil
			}
		}
		for i := range s.EphemeralContainers {
			c := &s.EphemeralContainers[i].EphemeralContainerCommon
			c.Resources = corev1.ResourceRequirements{}
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		}
	}
	template := func(t *corev1.PodTemplateSpec) { meta(&t.ObjectMeta); spec(&t.Spec) }
	switch o := obj.(type) {
	case *corev1.Pod:
		meta(&o.ObjectMeta)
		spec(&o.Spec)
		o.Status = corev1.PodStatus{}
	case *appsv1.Deployment:
		meta(&o.ObjectMeta)
		template(&o.Spec.Template)
		o.Status = appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		meta(&o.ObjectMeta)
		template(&o.Spec.Template)
		o.Spec.VolumeClaimTemplates = nil
		o.Status = appsv1.StatefulSetStatus{}
	case *appsv1.DaemonSet:
		meta(&o.ObjectMeta)
		template(&o.Spec.Template)
		o.Status = appsv1.DaemonSetStatus{}
	case *appsv1.ReplicaSet:
		meta(&o.ObjectMeta)
		template(&o.Spec.Template)
		o.Status = appsv1.ReplicaSetStatus{}
	case *batchv1.Job:
		meta(&o.ObjectMeta)
		template(&o.Spec.Template)
		o.Status = batchv1.JobStatus{}
	case *batchv1.CronJob:
		meta(&o.ObjectMeta)
		meta(&o.Spec.JobTemplate.ObjectMeta)
		template(&o.Spec.JobTemplate.Spec.Template)
		o.Status = batchv1.CronJobStatus{}
	default:
		panic(fmt.Sprintf("no slim form for %T", obj))
	}
}

// compare decodes text both ways, as the review's one-pass decoding does
// (utiljson, case-sensitive), and fails where the slim decoding breaks its
// promise: it refuses what the typed one accepts, or differs from it in
// anything but the fields it passes over.
func compare(t *testing.T, newObject func() runtime.Object, text []byte) {
	t.Helper()
	typed := newObject()
	typedErr := utiljson.Unmarshal(text, typed)
	target, ok := For(newObject())
	if !ok {
		t.Fatalf("no slim form for %T", typed)
	}
	slimErr := utiljson.Unmarshal(text, target.Into())
	if typedErr != nil {
		return // what the typed decoding refuses, the slim one may accept
	}
	if slimErr != nil {
		t.Fatalf("%T: the slim decoding refuses what the typed one accepts: %v\ntext: %.3000s", typed, slimErr, text)
	}
	passOver(typed)
	got := target.Object()
	if reflect.TypeOf(got) != reflect.TypeOf(typed) {
		t.Fatalf("slim decoding gave a %T, want a %T", got, typed)
	}
	if !reflect.DeepEqual(got, typed) {
		t.Fatalf("%T: the slim decoding differs from the typed one\ntyped: %s\nslim:  %s\ntext: %.3000s", typed, jsonOf(typed), jsonOf(got), text)
	}
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

var codecs = serializer.NewCodecFactory(runtime.NewScheme())

// generated is a random object of newObject's type with most fields set
// (the API machinery's own filler, with its rules for metadata, times and
// quantities), encoded as the API server would send it.
func generated(t testing.TB, newObject func() runtime.Object, seed int64) []byte {
	t.Helper()
	obj := newObject()
	fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs).NilChance(0.2).NumElements(1, 2).Fill(obj)
	text, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return text
}

func TestSlimDecodingOfGeneratedObjects(t *testing.T) {
	for _, newObject := range kinds {
		for seed := range int64(80) {
			compare(t, newObject, generated(t, newObject, seed))
		}
	}
}

// TestSlimDecodingPassesOverTheHeavyParts checks that the slim form builds
// none of what it promises to pass over, on an object where each is set.
func TestSlimDecodingPassesOverTheHeavyParts(t *testing.T) {
	text := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","managedFields":[{"manager":"kubectl","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
	"spec":{"template":{"metadata":{"managedFields":[{"manager":"x"}]},"spec":{"affinity":{"nodeAffinity":{}},"overhead":{"cpu":"1"},"resources":{"limits":{"cpu":"1"}},"topologySpreadConstraints":[{"maxSkew":1}],
	"containers":[{"name":"app","resources":{"limits":{"cpu":"1"}},"livenessProbe":{"periodSeconds":1},"readinessProbe":{"periodSeconds":1},"startupProbe":{"periodSeconds":1},"lifecycle":{"preStop":{"sleep":{"seconds":1}}},"env":[{"name":"A","value":"b"}]}]}}},
	"status":{"replicas":3}}`)
	target, _ := For(&appsv1.Deployment{})
	if err := utiljson.Unmarshal(text, target.Into()); err != nil {
		t.Fatal(err)
	}
	d := target.Object().(*appsv1.Deployment)
	want := appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
		}}},
	}
	if !reflect.DeepEqual(*d, want) {
		t.Fatalf("got  %s\nwant %s", jsonOf(d), jsonOf(&want))
	}
}

// specOf is the pod spec of an object of one of kinds.
func specOf(obj runtime.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.Spec
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	case *appsv1.ReplicaSet:
		return &o.Spec.Template.Spec
	case *batchv1.Job:
		return &o.Spec.Template.Spec
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.Spec
	}
	panic(fmt.Sprintf("no pod spec in %T", obj))
}

// comparePair fails where telling whether two objects' pod specs are equal
// from their slim decodings (what was decoded, then SamePodSpecs) gives
// another answer than comparing their typed decodings whole, as the
// workload webhook did before it decoded slim.
func comparePair(t *testing.T, newObject func() runtime.Object, a, b []byte) {
	t.Helper()
	typedA, typedB := newObject(), newObject()
	if utiljson.Unmarshal(a, typedA) != nil || utiljson.Unmarshal(b, typedB) != nil {
		return
	}
	want := equality.Semantic.DeepEqual(specOf(typedA), specOf(typedB))
	slimA, _ := For(newObject())
	slimB, _ := For(newObject())
	if err := errors.Join(utiljson.Unmarshal(a, slimA.Into()), utiljson.Unmarshal(b, slimB.Into())); err != nil {
		t.Fatalf("the slim decoding refuses what the typed one accepts: %v", err)
	}
	specA, specB := specOf(slimA.Object()), specOf(slimB.Object())
	got := equality.Semantic.DeepEqual(specA, specB) && SamePodSpecs(specA, specB, PassedOverBy(slimA), PassedOverBy(slimB))
	if got != want {
		t.Fatalf("%T: the pod specs are equal: %v read slim, %v read whole\na: %.3000s\nb: %.3000s", typedA, got, want, a, b)
	}
}

// TestSamePodSpecs compares generated objects with themselves and with
// variants: a passed-over part changed, another part changed, only status
// changed, and a quantity written another way (other bytes, the same
// value).
func TestSamePodSpecs(t *testing.T) {
	for _, newObject := range kinds {
		for seed := range int64(25) {
			text := generated(t, newObject, seed)
			comparePair(t, newObject, text, text)
			obj := newObject()
			if err := utiljson.Unmarshal(text, obj); err != nil {
				t.Fatal(err)
			}
			spec := specOf(obj)
			if len(spec.Containers) == 0 {
				spec.Containers = []corev1.Container{{Name: "app"}}
			}
			variants := map[string]func(o runtime.Object){
				"resources": func(o runtime.Object) {
					specOf(o).Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
				},
				"a probe": func(o runtime.Object) { specOf(o).Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 99} },
				"affinity": func(o runtime.Object) {
					specOf(o).Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
				},
				"the image": func(o runtime.Object) { specOf(o).Containers[0].Image = "other:9" },
			}
			base, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			for name, change := range variants {
				changed := obj.DeepCopyObject()
				change(changed)
				b, err := json.Marshal(changed)
				if err != nil {
					t.Fatal(name, err)
				}
				comparePair(t, newObject, base, b)
			}
			// The same limit written two ways.
			specOf(obj).Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			one, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			milli := bytes.Replace(one, []byte(`"limits":{"cpu":"1"}`), []byte(`"limits":{"cpu":"1000m"}`), 1)
			if bytes.Equal(one, milli) {
				t.Fatal("the limit was not rewritten")
			}
			comparePair(t, newObject, one, milli)
		}
	}
}

// FuzzSlimDecoding compares the slim decoding with the typed one on every
// input: each object alone (see compare), and the two as an update's old
// and new objects (see comparePair). Seeds: generated objects of every
// kind.
func FuzzSlimDecoding(f *testing.F) {
	for i, newObject := range kinds {
		for seed := range int64(3) {
			f.Add(uint8(i), generated(f, newObject, seed), generated(f, newObject, seed+1))
		}
	}
	f.Add(uint8(1), []byte(`{"spec":{"template":{"spec":{"containers":[]}}}}`), []byte(`{"spec":{"template":{"spec":{"containers":[{"resources":{}}]}}}}`))
	f.Add(uint8(0), []byte(`{"spec":{"containers":null,"initContainers":[{"resources":7}]}}`), []byte(`{"spec":{"containers":[{"resources":{"limits":{"cpu":"1"}},"resources":{"requests":{"cpu":"1"}}}]}}`))
	f.Fuzz(func(t *testing.T, kind uint8, text, other []byte) {
		newObject := kinds[int(kind)%len(kinds)]
		compare(t, newObject, text)
		comparePair(t, newObject, text, other)
	})
}

func TestTypedDecodesEveryField(t *testing.T) {
	text := generated(t, kinds[1], 7)
	want := &appsv1.Deployment{}
	if err := utiljson.Unmarshal(text, want); err != nil {
		t.Fatal(err)
	}
	got := &appsv1.Deployment{}
	target := Typed(got)
	if err := utiljson.Unmarshal(text, target.Into()); err != nil {
		t.Fatal(err)
	}
	if target.Object() != got || !reflect.DeepEqual(got, want) {
		t.Fatalf("Typed did not decode every field:\ngot  %s\nwant %s", jsonOf(got), jsonOf(want))
	}
}

// BenchmarkDecoding decodes a Deployment of 10 containers as the API
// server sends it (managed fields, resources, two probes each, status)
// typed and slim.
func BenchmarkDecoding(b *testing.B) {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "shop", UID: "u", ResourceVersion: "12", Generation: 3, CreationTimestamp: metav1.Now(),
			Labels: map[string]string{"app": "big"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: "Update", APIVersion: "apps/v1",
				Time: &metav1.Time{}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{}}}}}`)}}},
		Status: appsv1.DeploymentStatus{Replicas: 3, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: "HTTP"}},
		PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	for i := range 10 {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "app", ImagePullPolicy: "IfNotPresent", TerminationMessagePath: "/dev/termination-log",
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
			LivenessProbe: probe, ReadinessProbe: probe,
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("cm-%d", i)}}}},
		})
	}
	text, err := json.Marshal(d)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := utiljson.Unmarshal(text, &appsv1.Deployment{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("slim", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, _ := For(&appsv1.Deployment{})
			if err := utiljson.Unmarshal(text, t.Into()); err != nil {
				b.Fatal(err)
			}
			t.Object()
		}
	})
}
