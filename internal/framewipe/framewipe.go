// Package framewipe clears each watch event's bytes from client-go's frame
// buffer as soon as the event is decoded.
//
// client-go decodes a watch stream through one buffer per watch that it
// reuses for every event and never clears, so the raw bytes of the last
// event on each watch stay in memory until the next one arrives: on the
// Secret watch that is a whole Secret, values, last-applied configuration
// and all, long after the cache transform dropped them from the decoded
// object. The buffer is not reachable from outside client-go, but every
// event is read into it through the response body, so a body that
// remembers where it wrote a frame can clear it when the decoder asks for
// the next one: by then the frame has been decoded into an object of its
// own (the protobuf decoder copies every string and byte slice).
package framewipe

import (
	"encoding/binary"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// Wrap makes every protobuf watch made through cfg clear its frames, and
// turns off response compression: a gzip stream keeps the last 32 KiB it
// inflated as its window for as long as the watch is open, out of reach.
func Wrap(cfg *rest.Config) {
	cfg.DisableCompression = true
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return roundTripper{rt} })
}

type roundTripper struct{ next http.RoundTripper }

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || req.URL.Query().Get("watch") != "true" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/vnd.kubernetes.protobuf") {
		return resp, err
	}
	// JSON watch streams are framed by a json.Decoder with a buffer of its
	// own that this cannot reach; configward watches ConfigMaps, Secrets,
	// Pods and workloads as protobuf, and only its own resources as JSON.
	resp.Body = &body{ReadCloser: resp.Body}
	return resp, nil
}

// body follows the stream's length-delimited framing (a 4-byte big-endian
// length, then that many bytes) to know where each frame was written.
type body struct {
	io.ReadCloser
	header    [4]byte
	headerLen int
	remaining int
	// written are the pieces of the caller's buffer the current or last
	// frame was read into.
	written [][]byte
}

func (b *body) Read(p []byte) (int, error) {
	if b.headerLen == 0 && b.remaining == 0 {
		// Between frames: the decoder only reads again once it has decoded
		// the last one.
		b.wipe()
	}
	n, err := b.ReadCloser.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		if b.headerLen < len(b.header) {
			c := copy(b.header[b.headerLen:], rest)
			b.headerLen += c
			rest = rest[c:]
			if b.headerLen == len(b.header) {
				b.remaining = int(binary.BigEndian.Uint32(b.header[:]))
				if b.remaining == 0 {
					b.headerLen = 0
				}
			}
			continue
		}
		c := min(b.remaining, len(rest))
		b.written = append(b.written, rest[:c])
		b.remaining -= c
		rest = rest[c:]
		if b.remaining == 0 {
			b.headerLen = 0
		}
	}
	return n, err
}

func (b *body) wipe() {
	for _, w := range b.written {
		clear(w)
	}
	clear(b.written)
	b.written = b.written[:0]
}
