package webhookserver

import (
	"context"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/scheme"
)

// recorder is a typed handler that judges Deployments (one-pass decodable)
// and records what the adapter handed it.
type recorder struct {
	keepBytes bool
	got       *Review[string]
}

func (h *recorder) Intake() Intake[string] {
	return Intake[string]{
		Operations: []admissionv1.Operation{admissionv1.Create, admissionv1.Update},
		Unjudged:   "no rules for %s",
		KeepBytes:  func() bool { return h.keepBytes },
		Kind: func(gk schema.GroupKind) (Kind[string], bool) {
			if gk != (schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
				return Kind[string]{}, false
			}
			return Kind[string]{Info: "deployments!", Resource: "deployments", New: func() client.Object { return &appsv1.Deployment{} },
				OnePassVersion: "v1", Subresources: []string{"scale"}}, true
		},
	}
}

func (h *recorder) Review(_ context.Context, r *Review[string]) admission.Response {
	h.got = r
	return admission.Allowed("judged")
}

// The adapter is the one preamble of every webhook: what it refuses and
// what it lets through without a look are decided here for all of them.
func TestAdapterPreamble(t *testing.T) {
	const deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","generateName":"w-"}}`
	deploymentKind := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	deployments := metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	request := func(op admissionv1.Operation, object, old string) admissionv1.AdmissionRequest {
		return admissionv1.AdmissionRequest{UID: "u", Operation: op, Kind: deploymentKind, Resource: deployments, Namespace: "shop",
			Object: runtime.RawExtension{Raw: []byte(object)}, OldObject: runtime.RawExtension{Raw: []byte(old)}}
	}
	malformed := "configward: malformed admission request: "
	for _, tc := range []struct {
		name    string
		req     admissionv1.AdmissionRequest
		judged  bool
		allowed bool
		code    int32
		message string
	}{
		{"a create", request(admissionv1.Create, deployment, ""), true, true, 200, "judged"},
		{"an update", request(admissionv1.Update, deployment, deployment), true, true, 200, "judged"},
		{"a kind without rules", func() admissionv1.AdmissionRequest {
			r := request(admissionv1.Create, deployment, "")
			r.Kind.Group = "example.com"
			return r
		}(), false, true, 200, "no rules for example.com/v1, Kind=Deployment"},
		{"the kind does not match the resource", func() admissionv1.AdmissionRequest {
			r := request(admissionv1.Create, deployment, "")
			r.Resource.Resource = "pods"
			return r
		}(), false, false, 403, malformed + "the kind does not match the resource (kind apps/v1, Kind=Deployment, resource apps/v1, Resource=pods)"},
		{"the resource in another group", func() admissionv1.AdmissionRequest {
			r := request(admissionv1.Create, deployment, "")
			r.Resource.Group = "extensions"
			return r
		}(), false, false, 403, malformed + "the kind does not match the resource (kind apps/v1, Kind=Deployment, resource extensions/v1, Resource=deployments)"},
		{"an operation not judged", request(admissionv1.Delete, "", deployment), false, true, 200, ""},
		{"a subresource not judged", func() admissionv1.AdmissionRequest {
			r := request(admissionv1.Update, deployment, deployment)
			r.SubResource = "status"
			return r
		}(), false, true, 200, ""},
		{"a subresource judged", func() admissionv1.AdmissionRequest {
			r := request(admissionv1.Update, deployment, deployment)
			r.SubResource = "scale"
			return r
		}(), true, true, 200, "judged"},
		{"a create without its object", request(admissionv1.Create, "", ""), false, false, 403,
			malformed + "CREATE of a Deployment without the objects it needs (kind apps/v1, Kind=Deployment, resource apps/v1, Resource=deployments)"},
		{"an update without its old object", request(admissionv1.Update, deployment, ""), false, false, 403,
			malformed + "UPDATE of a Deployment without the objects it needs (kind apps/v1, Kind=Deployment, resource apps/v1, Resource=deployments)"},
		{"an update without its object", request(admissionv1.Update, "", deployment), false, false, 403,
			malformed + "UPDATE of a Deployment without the objects it needs (kind apps/v1, Kind=Deployment, resource apps/v1, Resource=deployments)"},
		{"an object that does not decode", request(admissionv1.Create, `{"spec": 42`, ""), false, false, 400,
			"configward: the Deployment in this request cannot be decoded: "},
		{"an object of another kind", request(admissionv1.Create, `{"apiVersion":"v1","kind":"Pod"}`, ""), false, false, 400,
			"configward: the Deployment in this request cannot be decoded: unable to decode /v1, Kind=Pod into *v1.Deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{}
			resp := Adapt(h, Decoder{Scheme: scheme.Scheme()}).Handle(context.Background(), admission.Request{AdmissionRequest: tc.req})
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			if (h.got != nil) != tc.judged || resp.Allowed != tc.allowed || resp.Result.Code != tc.code || !strings.HasPrefix(msg, tc.message) || (tc.message == "" && msg != "") {
				t.Fatalf("judged=%v allowed=%v code=%d message %q; want judged=%v allowed=%v code=%d message %q",
					h.got != nil, resp.Allowed, resp.Result.Code, msg, tc.judged, tc.allowed, tc.code, tc.message)
			}
			if !tc.judged {
				return
			}
			if d, ok := h.got.Object.(*appsv1.Deployment); !ok || d.Name != "web" || h.got.Name() != "web" || h.got.Kind.Info != "deployments!" {
				t.Fatalf("handed %#v named %q with %q", h.got.Object, h.got.Name(), h.got.Kind.Info)
			}
		})
	}
}

// The old object is decoded when a handler first asks, once.
func TestAdapterOldObject(t *testing.T) {
	h := &recorder{}
	req := admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update, Name: "",
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Object:    runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generateName":"w-"}}`)},
		OldObject: runtime.RawExtension{Raw: []byte(`{"spec": 42}`)}}
	Adapt(h, Decoder{Scheme: scheme.Scheme()}).Handle(context.Background(), admission.Request{AdmissionRequest: req})
	if h.got.Name() != "w-*" {
		t.Fatalf("Name = %q, want the generateName with a star", h.got.Name())
	}
	for range 2 {
		if old, err := h.got.OldObject(); old != nil || err == nil || !strings.HasPrefix(err.Error(), "configward: the old Deployment in this request cannot be decoded: ") {
			t.Fatalf("OldObject = %v, %v", old, err)
		}
	}
}

// Kinds with a Go type are decoded with their review in one pass, unless
// the handler keeps the bytes or the version is not the typed one.
func TestAdapterOnePass(t *testing.T) {
	h := &recorder{}
	a := Adapt(h, Decoder{Scheme: scheme.Scheme()}).(*adapter[string])
	deployment := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	target := a.objectFor(deployment)
	if target == nil {
		t.Fatal("a Deployment is not decoded in one pass")
	}
	if _, ok := target.Object().(*appsv1.Deployment); !ok || reflect.TypeOf(target.Into()) == reflect.TypeOf(&appsv1.Deployment{}) {
		t.Fatalf("a Deployment is decoded into %T, not slim", target.Into())
	}
	full := Adapt(h, Decoder{Scheme: scheme.Scheme(), FullObjects: true}).(*adapter[string])
	if into := full.objectFor(deployment).Into(); reflect.TypeOf(into) != reflect.TypeOf(&appsv1.Deployment{}) {
		t.Fatalf("with FullObjects, a Deployment is decoded into %T", into)
	}
	for _, gvk := range []metav1.GroupVersionKind{{Group: "apps", Version: "v1beta2", Kind: "Deployment"}, {Version: "v1", Kind: "Pod"}} {
		if obj := a.objectFor(gvk); obj != nil {
			t.Fatalf("%v decoded in one pass into %T", gvk, obj)
		}
	}
	h.keepBytes = true
	if obj := a.objectFor(metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); obj != nil {
		t.Fatal("decoded in one pass while the handler keeps the bytes")
	}
}
