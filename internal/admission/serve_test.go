package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
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
