package effects

import (
	"strconv"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/slimobject"
	"github.com/configward/configward/internal/workload"
)

func withData(cm *corev1.ConfigMap, value string) *corev1.ConfigMap {
	cm.Data = map[string]string{"level": value}
	return cm
}

// Effects wait for the version a write stored: the first one after the
// version the review started from, with the content the review described.
func TestEffectsWaitForWhatTheCacheShows(t *testing.T) {
	cm := func(uid, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags", UID: k8stypes.UID("u" + uid), ResourceVersion: rv}}
	}
	request := func(op admissionv1.Operation) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "shop",
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
	}
	for _, tc := range []struct {
		name     string
		req      admission.Request
		obj      *corev1.ConfigMap
		observed []*corev1.ConfigMap // informer events, in order
		deleted  bool
		want     int
	}{
		{"a create the cache then shows", request(admissionv1.Create), cm("1", ""), []*corev1.ConfigMap{cm("1", "10")}, false, 1},
		{"a fabricated create: nothing appears", request(admissionv1.Create), cm("1", ""), nil, false, 0},
		{"a create of another object of that name", request(admissionv1.Create), cm("1", ""), []*corev1.ConfigMap{cm("2", "10")}, false, 0},
		{"an update the cache then shows", request(admissionv1.Update), cm("1", "10"), []*corev1.ConfigMap{cm("1", "11")}, false, 1},
		{"a fabricated update: the object stays at its version", request(admissionv1.Update), cm("1", "10"), []*corev1.ConfigMap{cm("1", "10")}, false, 0},
		{"a fabricated update, then a real write with other content", request(admissionv1.Update), withData(cm("1", "10"), "forged"), []*corev1.ConfigMap{cm("1", "11"), withData(cm("1", "12"), "forged")}, false, 0},
		{"a fabricated create, then a real one with other content", request(admissionv1.Create), withData(cm("1", ""), "forged"), []*corev1.ConfigMap{cm("1", "10")}, false, 0},
		{"an update the cache shows with its content", request(admissionv1.Update), withData(cm("1", "10"), "real"), []*corev1.ConfigMap{withData(cm("1", "11"), "real")}, false, 1},
		{"a delete the cache then shows", request(admissionv1.Delete), cm("1", "10"), []*corev1.ConfigMap{cm("1", "10")}, true, 1},
		{"a fabricated delete: the object is still there", request(admissionv1.Delete), cm("1", "10"), []*corev1.ConfigMap{cm("1", "11")}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(false, workload.Builtin())
			done := 0
			e.Record(tc.req, tc.obj, func(client.Object) { done++ })
			if done != 0 {
				t.Fatal("recorded before the cache showed anything")
			}
			for _, o := range tc.observed {
				e.observe("ConfigMap", o, tc.deleted)
			}
			if done != tc.want {
				t.Fatalf("recorded %d times, want %d", done, tc.want)
			}
		})
	}
}

func TestEffectsOfTrustedCallersAndRefusals(t *testing.T) {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "shop",
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}}
	count := 0
	inc := func() { count++ }
	incRef := func(client.Object) { count++ }

	New(true, workload.Builtin()).Record(req, obj, incRef)
	New(true, workload.Builtin()).Refusal(req, inc)
	if count != 2 {
		t.Fatalf("authenticated callers: %d of 2 recorded at once", count)
	}
	New(false, workload.Builtin()).Refusal(req, inc)
	if count != 2 {
		t.Fatal("a refusal from a caller nobody authenticated was counted")
	}
	dry := req
	dry.DryRun = ptr.To(true)
	New(true, workload.Builtin()).Record(dry, obj, incRef)
	if count != 2 {
		t.Fatal("a dry run was recorded")
	}
}

func TestEffectsAreBoundedAndExpire(t *testing.T) {
	e := New(false, workload.Builtin())
	now := time.Unix(0, 0)
	e.now = func() time.Time { return now }
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "shop",
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
	for i := range maxPending + 100 {
		e.Record(req, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fake-" + itoa(i)}}, func(client.Object) {})
	}
	if e.count != maxPending {
		t.Fatalf("%d effects waiting, bound %d", e.count, maxPending)
	}
	now = now.Add(effectTTL + time.Second)
	e.Record(req, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "real"}}, func(client.Object) {})
	if e.count != 1 {
		t.Fatalf("expired effects were kept: %d waiting", e.count)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A workload in a review is decoded slim (without its resources, probes,
// status): the version the cache shows, whole, still confirms it, and one
// with other content does not.
func TestEffectsOfAWorkloadDecodedSlim(t *testing.T) {
	whole := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1", ResourceVersion: "10"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "app:1",
			Resources:     corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			LivenessProbe: &corev1.Probe{PeriodSeconds: 5},
		}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 2},
	}
	slim, err := slimobject.Project(whole)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Namespace: "shop",
		Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}}}
	stored := whole.DeepCopy()
	stored.ResourceVersion = "11"
	other := stored.DeepCopy()
	other.Spec.Template.Spec.Containers[0].Image = "app:2"
	for name, tc := range map[string]struct {
		observed *appsv1.Deployment
		want     int
	}{"the write, whole": {stored, 1}, "another write": {other, 0}} {
		e := New(false, workload.Builtin())
		done := 0
		e.Record(req, slim.(client.Object), func(client.Object) { done++ })
		e.observe("Deployment", tc.observed, false)
		if done != tc.want {
			t.Errorf("%s: recorded %d times, want %d", name, done, tc.want)
		}
	}
}

// The webhook's cache keeps a pod a workload controls without its spec
// (inventory.WebhookTransforms), only its digest: a write to it (kubectl
// debug adds an ephemeral container) is still confirmed by the version
// the cache shows, and a review of a write that stored another spec is not.
func TestEffectsOfAPodAWorkloadControls(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-7d9f-abcde", UID: "p1", ResourceVersion: "10",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "rs1", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	debugged := pod.DeepCopy()
	debugged.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}}
	review, err := slimobject.Project(debugged)
	if err != nil {
		t.Fatal(err)
	}
	cached := func(p *corev1.Pod) *corev1.Pod {
		p = p.DeepCopy()
		p.ResourceVersion = "11"
		out, err := inventory.WebhookTransforms{Registry: workload.Builtin()}.Pod(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.(*corev1.Pod).Spec.Containers) != 0 {
			t.Fatal("the webhook's cache keeps the spec of a pod a workload controls; this test is about one it drops")
		}
		return out.(*corev1.Pod)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Namespace: "shop", SubResource: "ephemeralcontainers",
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}}}
	for name, tc := range map[string]struct {
		observed *corev1.Pod
		want     int
	}{"the write": {cached(debugged), 1}, "a write of another spec": {cached(pod), 0}} {
		e := New(false, workload.Builtin())
		done := 0
		e.Record(req, review.(client.Object), func(client.Object) { done++ })
		e.observe("Pod", tc.observed, false)
		if done != tc.want {
			t.Errorf("%s: recorded %d times, want %d", name, done, tc.want)
		}
	}
}
