package webhookserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime/debug"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// harden puts a body cap and panic recovery in front of a webhook handler.
//
// Both failure paths still answer with a well-formed AdmissionReview carrying
// the request's UID. The API server discards a response whose UID does not
// match, and reports a generic "failed calling webhook" error instead of our
// explanation; with the UID it shows the user why the request was refused.
func harden(next http.Handler, maxBytes int64, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "configward webhooks accept only POST of an AdmissionReview", http.StatusMethodNotAllowed)
			return
		}
		body, err := readBody(r, maxBytes+1)
		if err != nil {
			rejectedRequests.WithLabelValues("malformed").Inc()
			http.Error(w, fmt.Sprintf("reading request body: %v", err), http.StatusBadRequest)
			return
		}
		if int64(len(body)) > maxBytes {
			rejectedRequests.WithLabelValues("too_large").Inc()
			uid := uidFromPrefix(body)
			log.Info("refused oversized admission request", "uid", uid, "limitBytes", maxBytes)
			writeDenial(w, uid, http.StatusRequestEntityTooLarge, fmt.Sprintf(
				"configward: the admission request is larger than the webhook accepts (%d bytes, --max-request-bytes); "+
					"the object was not checked, so it is refused. Reduce the object's size or raise the limit.", maxBytes))
			return
		}
		r.Body = &heldBody{Reader: bytes.NewReader(body), body: body}
		r.ContentLength = int64(len(body))

		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				rejectedRequests.WithLabelValues("panic").Inc()
				uid := uidFromPrefix(body)
				log.Error(fmt.Errorf("%v", p), "recovered from panic in admission handler", "uid", uid, "stack", string(debug.Stack()))
				writeDenial(w, uid, http.StatusInternalServerError,
					"configward: internal error while checking this request; it was refused to stay safe. "+
						"Retry; if it persists, report it with request uid "+string(uid)+" from the configward webhook logs.")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// readBody reads at most limit bytes of r's body, into a buffer of the
// length the request announces (io.ReadAll grows one from 512 bytes: a
// dozen copies of a review).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if h, ok := r.Body.(*heldBody); ok && int64(len(h.body)) <= limit {
		return h.body, nil // read by harden already
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength < limit {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit))
	return buf.Bytes(), err
}

// heldBody is a body harden has read: the review codec takes its bytes
// instead of reading a copy.
type heldBody struct {
	*bytes.Reader
	body []byte
}

func (*heldBody) Close() error { return nil }

// uidPattern finds the request UID without decoding the whole body, which
// matters for a body that is too large to decode or that made the decoder
// panic. The API server writes request.uid before the objects.
var uidPattern = regexp.MustCompile(`"uid"\s*:\s*"([0-9A-Za-z-]{1,64})"`)

// requestUID is the request.uid a JSON reader finds in a review body that
// does not decode as a whole (a field of the wrong type, say); "" when the
// body is not JSON. An answer must carry it: the API server discards an
// answer whose UID does not match its request and shows a generic error
// instead of configward's.
func requestUID(body []byte) types.UID {
	uid, _ := uidFromJSON(body)
	return uid
}

func uidFromPrefix(body []byte) types.UID {
	if len(body) < 1<<20 {
		if uid, ok := uidFromJSON(body); ok {
			return uid
		}
	}
	head := body
	if len(head) > 4096 {
		head = head[:4096]
	}
	if m := uidPattern.FindSubmatch(head); m != nil {
		return types.UID(m[1])
	}
	return ""
}

// uidFromJSON reads request.uid from a body that is JSON, whatever else it
// holds, with field names matched case-sensitively as the API machinery
// decodes a review: "Request" is not "request".
func uidFromJSON(body []byte) (types.UID, bool) {
	var probe struct {
		Request *struct {
			UID types.UID `json:"uid"`
		} `json:"request"`
	}
	if utiljson.Unmarshal(body, &probe) != nil || probe.Request == nil {
		return "", false
	}
	return probe.Request.UID, true
}

func writeDenial(w http.ResponseWriter, uid types.UID, code int32, msg string) {
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{
			UID:     uid,
			Allowed: false,
			Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Message: msg},
		},
	}
	w.Header().Set("Content-Type", "application/json")
	// The API server only reads the body of a 200 response.
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(review)
}
