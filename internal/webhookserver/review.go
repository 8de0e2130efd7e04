package webhookserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/slimobject"
)

// Webhook serves h as an admission webhook named name: it decodes the
// AdmissionReview, recovers a panic into a denial that carries the request
// UID, and logs every refusal and warning with who asked about what, never
// with the object itself.
//
// It is controller-runtime's admission.Webhook without two costs that
// dominated a review's CPU under load: the universal deserializer parsed
// the body twice (once to find its kind, once to decode it), and a logger
// with six values was built for every request whether or not anything was
// logged. Here the body is parsed once, case-sensitively as the API
// machinery parses it, and the logger is built only to log.
func Webhook(name string, h admission.Handler) http.Handler {
	return &reviewHandler{name: name, next: h, answered: reviewsAnswered.WithLabelValues(name)}
}

type reviewHandler struct {
	name     string
	next     admission.Handler
	answered prometheus.Counter
}

var (
	reviewV1      = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
	reviewV1beta1 = schema.GroupVersionKind{Group: "admission.k8s.io", Version: "v1beta1", Kind: "AdmissionReview"}
)

func (h *reviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	var targets *decoded
	body, err := readBody(r, math.MaxInt64)
	switch {
	case err != nil:
	case r.Header.Get("Content-Type") != "application/json":
		err = fmt.Errorf("contentType=%s, expected application/json", r.Header.Get("Content-Type"))
	default:
		targets, err = h.decode(body, &review)
	}
	var resp admission.Response
	if err != nil {
		resp = admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the AdmissionReview cannot be decoded: %w", err))
		resp.UID = requestUID(body)
	} else {
		req := admission.Request{}
		if review.Request != nil {
			req.AdmissionRequest = *review.Request
		}
		ctx := r.Context()
		if targets != nil {
			ctx = context.WithValue(ctx, decodedKey{}, targets)
		}
		resp = h.handle(ctx, req)
	}
	// The answer has the version of the question; an undecodable question
	// gets a v1 answer, the only version configward's webhooks declare.
	gvk := review.GroupVersionKind()
	if gvk != reviewV1beta1 {
		gvk = reviewV1
	}
	out := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	out.SetGroupVersionKind(gvk)
	w.Header().Set("Content-Type", "application/json")
	h.answered.Inc()
	if err := json.NewEncoder(w).Encode(out); err != nil {
		// The connection broke; nothing more can be written to it.
		ctrl.Log.WithName("admission").Info("could not write the answer", "webhook", h.name, "uid", resp.UID, "error", err.Error())
	}
}

// typedObjects is implemented by handlers whose objects are decoded into a
// Go type chosen from the request's kind. For them the review and its
// objects are decoded in one pass (decodeTyped): decoding is most of a
// review's CPU, and decoding the object again from the review's raw bytes
// scanned each byte of it twice more.
type typedObjects interface {
	// objectFor returns where to decode an object of a request of this
	// kind (slim, see slimobject), or nil to have the review decoded with
	// raw objects.
	objectFor(kind metav1.GroupVersionKind) slimobject.Target
}

// decoded are the targets a review's objects were decoded into in one
// pass, handed to the adapter in the request's context: what they passed
// over is read from them (see Review.PassedOver).
type decoded struct{ object, old slimobject.Target }

type decodedKey struct{}

// decode decodes the review: in one pass into typed objects where the
// handler has a type for the request's kind (and returns their targets),
// else with raw objects.
func (h *reviewHandler) decode(body []byte, review *admissionv1.AdmissionReview) (*decoded, error) {
	if t, ok := h.next.(typedObjects); ok {
		if kind, found := sniffKind(body); found {
			if obj, old := t.objectFor(kind), t.objectFor(kind); obj != nil && old != nil && decodeTyped(body, kind, obj, old, review) {
				return &decoded{obj, old}, nil
			}
		}
	}
	return nil, decodeReview(body, review)
}

// kindPattern finds request.kind near the start of a review, where the API
// server writes it (after the uid, before the objects).
var kindPattern = regexp.MustCompile(`^\{"kind":"AdmissionReview","apiVersion":"admission\.k8s\.io/v1","request":\{"uid":"[0-9A-Za-z-]{1,64}","kind":\{"group":"([a-z0-9.-]*)","version":"([a-z0-9]{1,20})","kind":"([A-Za-z0-9]{1,63})"\}`)

// sniffKind reads request.kind from the prefix the API server writes. It
// only chooses a Go type: decodeTyped checks the decoded kind against it.
func sniffKind(body []byte) (metav1.GroupVersionKind, bool) {
	m := kindPattern.FindSubmatch(body[:min(len(body), 512)])
	if m == nil {
		return metav1.GroupVersionKind{}, false
	}
	return metav1.GroupVersionKind{Group: string(m[1]), Version: string(m[2]), Kind: string(m[3])}, true
}

// decodeTyped decodes the review with its object and old object straight
// into obj and old, in one pass. It reports false, and the review must be
// decoded again the general way, when the body is not what the API server
// sends for this kind: another kind than sniffed, objects that are not of
// obj's kind. The objects are handed on in RawExtension.Object, without
// their bytes.
func decodeTyped(body []byte, kind metav1.GroupVersionKind, obj, old slimobject.Target, review *admissionv1.AdmissionReview) bool {
	type typedRequest struct {
		admissionv1.AdmissionRequest `json:",inline"`
		// These shadow AdmissionRequest's raw objects (the shallower
		// field wins); decoding into an interface holding a pointer
		// decodes into what it points to.
		Object    any `json:"object"`
		OldObject any `json:"oldObject"`
	}
	var typed struct {
		metav1.TypeMeta `json:",inline"`
		Request         *typedRequest `json:"request"`
	}
	typed.Request = &typedRequest{Object: obj.Into(), OldObject: old.Into()}
	if len(body) == 0 || utiljson.Unmarshal(body, &typed) != nil || typed.GroupVersionKind() != reviewV1 ||
		typed.Request == nil || typed.Request.Kind != kind {
		return false
	}
	review.TypeMeta, review.Request = typed.TypeMeta, &typed.Request.AdmissionRequest
	for _, o := range []struct {
		decoded any
		target  slimobject.Target
		into    *runtime.RawExtension
	}{{typed.Request.Object, obj, &review.Request.Object}, {typed.Request.OldObject, old, &review.Request.OldObject}} {
		if o.decoded == nil { // null
			continue
		}
		ro := o.target.Object()
		if gvk := ro.GetObjectKind().GroupVersionKind(); gvk.Group != kind.Group || gvk.Version != kind.Version || gvk.Kind != kind.Kind {
			return false
		}
		*o.into = runtime.RawExtension{Object: ro}
	}
	return true
}

// decodeReview decodes an AdmissionReview of version v1 (or v1beta1, which
// has the same fields), with field names matched case-sensitively.
func decodeReview(body []byte, review *admissionv1.AdmissionReview) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("request body is empty")
	}
	if err := utiljson.Unmarshal(body, review); err != nil {
		return err
	}
	if gvk := review.GroupVersionKind(); gvk != reviewV1 && gvk != reviewV1beta1 {
		return fmt.Errorf("the body is a %q of apiVersion %q, not an AdmissionReview of admission.k8s.io/v1", review.Kind, review.APIVersion)
	}
	return nil
}

// handle runs the handler, turning a panic into a refusal that names the
// request, and completes the answer (its UID, the JSON patch).
func (h *reviewHandler) handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			ctrl.Log.WithName("admission").Error(fmt.Errorf("%v", p), "recovered from panic in admission handler",
				"webhook", h.name, "uid", req.UID, "stack", string(debug.Stack()))
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p))
			resp.UID = req.UID
		}
	}()
	if problem := incomplete(req); problem != "" {
		resp = malformed(req, problem)
	} else {
		resp = h.next.Handle(ctx, req)
	}
	if err := resp.Complete(req); err != nil {
		resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: the answer cannot be encoded: %w", err))
		resp.UID = req.UID
	}
	h.log(req, resp, time.Since(start))
	return resp
}

// log records a refusal or a warning at level 0 and every other decision at
// level 1, building the logger only when the line is written.
func (h *reviewHandler) log(req admission.Request, resp admission.Response, took time.Duration) {
	refusedOrWarned := !resp.Allowed || len(resp.Warnings) > 0
	log := ctrl.Log.WithName("admission")
	if !refusedOrWarned && !log.V(1).Enabled() {
		return
	}
	log = log.WithValues(
		"webhook", h.name, "uid", req.UID, "operation", req.Operation,
		"kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name,
		"user", req.UserInfo.Username, "dryRun", ptr.Deref(req.DryRun, false),
		"allowed", resp.Allowed, "patched", len(resp.Patches) > 0, "warnings", len(resp.Warnings),
		"duration", took)
	if refusedOrWarned {
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		log.Info("admission decision", "message", msg)
		return
	}
	log.V(1).Info("admission decision")
}

// incomplete says what a review lacks that every review the API server
// sends has. Such a review is refused by every webhook alike: a handler
// must never allow it because it found nothing it has rules for.
func incomplete(req admission.Request) string {
	switch {
	case req.UID == "":
		return "the request has no uid"
	case req.Kind.Kind == "" || req.Kind.Version == "":
		return "the kind is not set"
	case req.Resource.Resource == "" || req.Resource.Version == "":
		return "the resource is not set"
	case req.Operation == "":
		return "the operation is not set"
	}
	return ""
}

// malformed refuses a request that no API server sends: it is never
// allowed by accident. kind and resource are printed the way kubectl
// prints them ("apps/v1, Kind=Deployment", "apps/v1, Resource=pods").
func malformed(req admission.Request, problem string) admission.Response {
	return admission.Denied(fmt.Sprintf("configward: malformed admission request: %s (kind %s, resource %s)", problem,
		schema.GroupVersionKind(req.Kind), schema.GroupVersionResource(req.Resource)))
}
