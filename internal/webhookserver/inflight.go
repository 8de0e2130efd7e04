package webhookserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// inFlight bounds the requests being handled and the body bytes they hold.
type inFlight struct {
	requests, bytes *semaphore.Weighted
	maxBytes        int64 // what a request without a length counts as
	maxRequests     int
	maxInFlight     int64
}

// waitForRoom is how long a request may wait for room before it is shed: a
// burst passes, a flood does not pile up.
const waitForRoom = time.Second

func newInFlight(requests int, bytes, maxRequestBytes int64) *inFlight {
	return &inFlight{requests: semaphore.NewWeighted(int64(requests)), bytes: semaphore.NewWeighted(bytes),
		maxBytes: maxRequestBytes, maxRequests: requests, maxInFlight: bytes}
}

func (b *inFlight) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size := r.ContentLength
		if size < 0 || size > b.maxBytes {
			// Unknown, or too large (harden refuses it after reading one
			// byte more than the cap): it may hold up to the cap.
			size = b.maxBytes
		}
		ctx, cancel := context.WithTimeout(r.Context(), waitForRoom)
		defer cancel()
		if err := b.requests.Acquire(ctx, 1); err != nil {
			b.shed(w, fmt.Sprintf("%d requests in flight", b.maxRequests))
			return
		}
		defer b.requests.Release(1)
		if err := b.bytes.Acquire(ctx, size); err != nil {
			b.shed(w, fmt.Sprintf("%d bytes of requests in flight", b.maxInFlight))
			return
		}
		defer b.bytes.Release(size)
		next.ServeHTTP(w, r)
	})
}

// shed answers 503: the API server applies the webhook's failure policy,
// so an overloaded configward neither runs out of memory nor decides
// without looking.
func (b *inFlight) shed(w http.ResponseWriter, bound string) {
	rejectedRequests.WithLabelValues("overloaded").Inc()
	w.Header().Set("Retry-After", "1")
	http.Error(w, "configward: overloaded ("+bound+"); the request was not checked. Retry; the webhook's failure policy decides meanwhile.", http.StatusServiceUnavailable)
}
