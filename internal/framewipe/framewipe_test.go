package framewipe

import (
	"bytes"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// recorder is the network: it remembers every buffer client-go asked it to
// fill, which is client-go's frame buffer.
type recorder struct {
	r      io.Reader
	filled [][]byte
	onRead func()
}

func (r *recorder) Read(p []byte) (int, error) {
	if r.onRead != nil {
		r.onRead()
	}
	n, err := r.r.Read(p)
	r.filled = append(r.filled, p[:n])
	return n, err
}
func (r *recorder) Close() error { return nil }

// stream is a protobuf watch stream of one event per Secret.
func stream(t *testing.T, secrets ...*corev1.Secret) []byte {
	t.Helper()
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var out bytes.Buffer
	enc := streaming.NewEncoder(framer.NewLengthDelimitedFrameWriter(&out), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	for _, s := range secrets {
		var obj bytes.Buffer
		if err := pb.Encode(s, &obj); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: obj.Bytes()}}); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func secret(name, value string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: map[string]string{"copy": value}},
		Data:       map[string][]byte{"password": []byte(value)},
	}
}

// TestFramesAreWipedOnceDecoded runs client-go's own watch decoding over
// the wrapped body: every event decodes whole, and every byte client-go
// was given is zero by the time it waits for the next event.
func TestFramesAreWipedOnceDecoded(t *testing.T) {
	// The second Secret is larger than client-go's first 1 KiB buffer, so
	// the decoder grows it mid-frame.
	big := string(bytes.Repeat([]byte("x"), 3000))
	want := []*corev1.Secret{secret("a", "CANARY-one"), secret("b", "CANARY-two"+big), secret("c", "CANARY-3")}
	net := &recorder{r: bytes.NewReader(stream(t, want...))}
	b := &body{ReadCloser: net}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewLengthDelimitedFrameReader(b), info.StreamSerializer.Serializer),
		scheme.Codecs.UniversalDeserializer())

	var got []*corev1.Secret
	for range want {
		// What the network filled before this event is garbage or wiped
		// once client-go asks for more.
		before := len(net.filled)
		net.onRead = func() {
			for _, f := range net.filled[:before] {
				if bytes.Contains(f, []byte("CANARY")) {
					t.Errorf("a decoded frame is still in client-go's buffer: %.80q", f)
				}
			}
			net.onRead = nil
		}
		_, obj, err := dec.Decode()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, obj.(*corev1.Secret))
	}
	if _, _, err := dec.Decode(); err != io.EOF {
		t.Fatalf("after the last event: %v, want EOF", err)
	}
	for i, s := range got {
		if string(s.Data["password"]) != string(want[i].Data["password"]) || s.Annotations["copy"] != want[i].Annotations["copy"] || s.Name != want[i].Name {
			t.Errorf("event %d decoded as %s with a %d-byte password: wiping reached the decoded object", i, s.Name, len(s.Data["password"]))
		}
	}
	for _, f := range net.filled {
		if bytes.Contains(f, []byte("CANARY")) {
			t.Errorf("client-go's buffer still holds %.80q after the stream ended", f)
		}
	}
}
