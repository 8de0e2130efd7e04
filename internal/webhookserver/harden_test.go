package webhookserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
)

func review(uid string, padding int) []byte {
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"` + uid +
		`","object":{"data":"` + strings.Repeat("x", padding) + `"}}}`)
}

func serve(t *testing.T, h http.Handler, method string, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, "/validate", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v\n%s", err, rec.Body.String())
	}
	return rec, &out
}

func TestHardenPassesRequestsWithinTheCap(t *testing.T) {
	var got []byte
	h := harden(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := new(bytes.Buffer)
		_, _ = buf.ReadFrom(r.Body)
		got = buf.Bytes()
		w.WriteHeader(http.StatusTeapot)
	}), 1024, logr.Discard())
	body := review("a-1", 100)
	rec, _ := serve(t, h, http.MethodPost, body)
	if rec.Code != http.StatusTeapot || !bytes.Equal(got, body) {
		t.Fatalf("handler did not get the request unchanged: code %d", rec.Code)
	}
}

func TestHardenRefusesOversizedRequestsWithTheirUID(t *testing.T) {
	called := false
	h := harden(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }), 1024, logr.Discard())
	_, out := serve(t, h, http.MethodPost, review("big-1", 5000))
	if called {
		t.Fatal("an oversized request reached the handler")
	}
	r := out.Response
	if r == nil || r.UID != "big-1" || r.Allowed || r.Result.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("want a denial with uid big-1 and code 413, got %+v", r)
	}
	if !strings.Contains(r.Result.Message, "--max-request-bytes") {
		t.Fatalf("message does not say which limit: %q", r.Result.Message)
	}
}

func TestHardenRecoversFromPanicsWithTheUID(t *testing.T) {
	h := harden(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), 1<<20, logr.Discard())
	_, out := serve(t, h, http.MethodPost, review("p-1", 10))
	r := out.Response
	if r == nil || r.UID != "p-1" || r.Allowed || r.Result.Code != http.StatusInternalServerError {
		t.Fatalf("want a denial with uid p-1 and code 500, got %+v", r)
	}
	if !strings.Contains(r.Result.Message, "p-1") {
		t.Fatalf("message should name the request uid for the logs: %q", r.Result.Message)
	}
}

func TestHardenRejectsNonPost(t *testing.T) {
	h := harden(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Fatal("handler called") }), 1024, logr.Discard())
	rec, _ := serve(t, h, http.MethodGet, nil)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET got %d, want 405", rec.Code)
	}
}

func TestUIDFromPrefix(t *testing.T) {
	for name, tc := range map[string]struct {
		body []byte
		want string
	}{
		"decodable":            {review("u-1", 10), "u-1"},
		"truncated":            {review("u-2", 10)[:90], "u-2"},
		"not json":             {[]byte("garbage"), ""},
		"uid only in the tail": {append(bytes.Repeat([]byte(" "), 5000), []byte(`{"request":{"uid":"late"`)...), ""},
		"hostile uid":          {[]byte(`{"request":{"uid":"a\"b"`), ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := string(uidFromPrefix(tc.body)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
