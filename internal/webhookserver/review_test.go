package webhookserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/slimobject"
)

type handlerFunc func(context.Context, admission.Request) admission.Response

func (f handlerFunc) Handle(ctx context.Context, r admission.Request) admission.Response {
	return f(ctx, r)
}

const completeRequest = `"request":{"uid":"u-1","kind":{"group":"apps","version":"v1","kind":"Deployment"},` +
	`"resource":{"group":"apps","version":"v1","resource":"deployments"},"operation":"CREATE","object":{"kind":"Deployment","apiVersion":"apps/v1"}}`

func serveReview(t *testing.T, h admission.Handler, contentType, body string) admissionv1.AdmissionReview {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	Webhook("test", h).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d, want 200", rec.Code)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("not an AdmissionReview answer: %v: %s", err, rec.Body.String())
	}
	return out
}

// The review handler replaced controller-runtime's: it must answer every
// body with a review that names the request, in the request's version, and
// never let a handler's panic or an undecodable body go unanswered.
func TestReviewHandler(t *testing.T) {
	allow := handlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
	boom := handlerFunc(func(context.Context, admission.Request) admission.Response { panic("boom") })
	for _, tc := range []struct {
		name, contentType, body string
		h                       admission.Handler
		apiVersion              string
		allowed                 bool
		code                    int32
		message                 string
	}{
		{"a v1 review", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",` + completeRequest + `}`,
			allow, "admission.k8s.io/v1", true, 200, ""},
		{"a v1beta1 review is answered in v1beta1", "application/json", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview",` + completeRequest + `}`,
			allow, "admission.k8s.io/v1beta1", true, 200, ""},
		{"a panic is a refusal that names the request", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",` + completeRequest + `}`,
			boom, "admission.k8s.io/v1", false, 500, "panic: boom [recovered]"},
		{"another kind of body", "application/json", `{"apiVersion":"v1","kind":"Status",` + completeRequest + `}`,
			allow, "admission.k8s.io/v1", false, 400, `the body is a "Status" of apiVersion "v1", not an AdmissionReview`},
		{"field names are case-sensitive", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","Request":{"uid":"u-1"}}`,
			allow, "admission.k8s.io/v1", false, 403, "the request has no uid"},
		{"a field of the wrong type keeps the uid", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","operation":7}}`,
			allow, "admission.k8s.io/v1", false, 400, "cannot be decoded"},
		{"not JSON", "text/plain", `{"request":{"uid":"u-1"}}`,
			allow, "admission.k8s.io/v1", false, 400, "expected application/json"},
		{"an empty body", "application/json", ``,
			allow, "admission.k8s.io/v1", false, 400, "request body is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := serveReview(t, tc.h, tc.contentType, tc.body)
			r := out.Response
			code, msg := int32(200), ""
			if r.Result != nil {
				code, msg = r.Result.Code, r.Result.Message
			}
			wantUID := "u-1"
			if tc.body == "" || strings.Contains(tc.body, `"Request"`) {
				wantUID = "" // there is none to name
			}
			if out.APIVersion != tc.apiVersion || out.Kind != "AdmissionReview" || r.Allowed != tc.allowed || code != tc.code ||
				!strings.Contains(msg, tc.message) || string(r.UID) != wantUID {
				t.Fatalf("got %s/%s uid=%q allowed=%v code=%d message=%q; want %s allowed=%v code=%d message containing %q",
					out.APIVersion, out.Kind, r.UID, r.Allowed, code, msg, tc.apiVersion, tc.allowed, tc.code, tc.message)
			}
		})
	}
}

// typedHandler records what it was handed; it has a Go type for
// Deployments, as the workload webhooks do.
type typedHandler struct{ got admission.Request }

func (h *typedHandler) objectFor(k metav1.GroupVersionKind) slimobject.Target {
	if k != (metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) {
		return nil
	}
	t, _ := slimobject.For(&appsv1.Deployment{})
	return t
}
func (h *typedHandler) Handle(_ context.Context, r admission.Request) admission.Response {
	h.got = r
	return admission.Allowed("")
}

// A review as the API server writes it is decoded with its objects in one
// pass; anything else the general way, with the objects' bytes. Either way
// the handler decodes the same Deployment.
func TestReviewHandlerDecodesWorkloadsInOnePass(t *testing.T) {
	const deployment = `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","annotations":{"a":"b"}},` +
		`"spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}}`
	request := func(kind, object string) string {
		return `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1",` +
			`"kind":{"group":"apps","version":"v1","kind":"` + kind + `"},"resource":{"group":"apps","version":"v1","resource":"deployments"},` +
			`"operation":"UPDATE","object":` + object + `,"oldObject":null}}`
	}
	for _, tc := range []struct {
		name, body string
		onePass    bool
	}{
		{"as the API server writes it", request("Deployment", deployment), true},
		{"the object of another kind than the request", request("Deployment", strings.Replace(deployment, `"Deployment"`, `"StatefulSet"`, 1)), false},
		{"fields in another order", strings.Replace(request("Deployment", deployment), `"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"`, `"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"`, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &typedHandler{}
			serveReview(t, h, "application/json", tc.body)
			if got := h.got.Object.Object != nil; got != tc.onePass {
				t.Fatalf("decoded in one pass: %v, want %v", got, tc.onePass)
			}
			if present(h.got.OldObject) {
				t.Fatal("a null oldObject is present")
			}
			var d appsv1.Deployment
			err := Decoder{Scheme: scheme.Scheme()}.DecodeRaw(h.got.Object, &d)
			if tc.name == "the object of another kind than the request" {
				if err == nil {
					t.Fatal("a StatefulSet decoded as a Deployment")
				}
				return
			}
			if err != nil || d.Name != "web" || d.Annotations["a"] != "b" || len(d.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("decoded %+v, %v", d.ObjectMeta, err)
			}
		})
	}
}
