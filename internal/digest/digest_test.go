package digest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pinned literals were computed outside Go (sha256sum and Python's
// hashlib) from the encoding in the package comment. If one of these tests
// fails, the encoding changed and every stamped workload would restart:
// change the literal only on purpose.
const (
	pinDataHello     = "a082b065ada0763a8085add0cf80fb78"                                             // sha256("data\x00hello"), first 16 bytes
	pinBinaryHello   = "2275ce18764a7ff29d0dcff2e6e3135e"                                             // sha256("binary\x00hello"), first 16 bytes
	pinContentAll    = "714a1fe90b5371ca541688985627fc2eab6e23e72ed1628d03a93f5c8c3e6895"             // {a: data "hello"}, all keys
	pinContentAbsent = "c9fd864ef42f3273879c933a0db18c811293fcc48c1c5c801352237ec7085472"             // same, keys [a, b]
	pinPodTemplate   = "hmac-sha256:ccf8ee426665c39ad80228542a9f3f3e7251a766a6521a95569c8db224c6d5b1" // key testKey, namespace "shop"
	pinEmpty         = "hmac-sha256:3d8db223825d2acdf0c2448d37b4ce9e1f577bf1ae1ba5daf2d28367c42a32ea"
)

// testKey is the installation key of the golden vectors.
var testKey = []byte("configward-test-key-0123456789ab")

// preimage builds the documented encodings by hand, independently of the
// streaming code under test.
type preimage []byte

func (p preimage) raw(s string) preimage { return append(p, s...) }
func (p preimage) b(v byte) preimage     { return append(p, v) }
func (p preimage) lp(s string) preimage {
	return append(binary.BigEndian.AppendUint64(p, uint64(len(s))), s...)
}
func (p preimage) sum() string { s := sha256.Sum256(p); return hex.EncodeToString(s[:]) }
func (p preimage) hmac(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(p)
	return hex.EncodeToString(m.Sum(nil))
}

func TestGoldenVectors(t *testing.T) {
	kd := KeyDigests(map[string]string{"a": "hello"}, nil)
	content := Content(kd, nil)
	tests := []struct {
		name, got, byHand, pinned string
	}{
		{
			name:   "data key",
			got:    kd["a"],
			byHand: preimage{}.raw("data\x00hello").sum()[:32],
			pinned: pinDataHello,
		},
		{
			name:   "binaryData key",
			got:    KeyDigests(nil, map[string][]byte{"a": []byte("hello")})["a"],
			byHand: preimage{}.raw("binary\x00hello").sum()[:32],
			pinned: pinBinaryHello,
		},
		{
			name:   "secret data key uses the data tag",
			got:    SecretKeyDigests(map[string][]byte{"a": []byte("hello")})["a"],
			byHand: preimage{}.raw("data\x00hello").sum()[:32],
			pinned: pinDataHello,
		},
		{
			name:   "content, all keys",
			got:    content,
			byHand: preimage{}.raw("configward/content/v1\x00").lp("a").b(1).lp(pinDataHello).sum(),
			pinned: pinContentAll,
		},
		{
			name:   "content, requested key absent",
			got:    Content(kd, []string{"b", "a", "b"}),
			byHand: preimage{}.raw("configward/content/v1\x00").lp("a").b(1).lp(pinDataHello).lp("b").b(0).sum(),
			pinned: pinContentAbsent,
		},
		{
			name: "pod template, one present one missing",
			got: PodTemplateHash(testKey, "shop", []Entry{
				{Kind: "Secret", Name: "db", Missing: true, Content: "ignored"},
				{Kind: "ConfigMap", Name: "app", Content: content},
			}),
			byHand: "hmac-sha256:" + preimage{}.raw("configward/pod-template/v2\x00").lp("shop").
				lp("ConfigMap").lp("app").b(1).lp(pinContentAll).
				lp("Secret").lp("db").b(0).hmac(testKey),
			pinned: pinPodTemplate,
		},
		{
			name:   "pod template, no entries",
			got:    PodTemplateHash(testKey, "shop", nil),
			byHand: "hmac-sha256:" + preimage{}.raw("configward/pod-template/v2\x00").lp("shop").hmac(testKey),
			pinned: pinEmpty,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.byHand {
				t.Errorf("got %s, hand-built preimage gives %s", tt.got, tt.byHand)
			}
			if tt.got != tt.pinned {
				t.Errorf("got %s, pinned %s: the encoding changed", tt.got, tt.pinned)
			}
		})
	}
}

func TestMetadataIsNotAnInput(t *testing.T) {
	a := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "a", ResourceVersion: "1", Labels: map[string]string{"x": "1"}},
		Data:       map[string]string{"k": "v"},
	}
	b := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "b", ResourceVersion: "99", Annotations: map[string]string{"configward.dev/reload": "rollout"}},
		Data:       map[string]string{"k": "v"},
	}
	if ca, cb := Content(KeyDigests(a.Data, a.BinaryData), nil), Content(KeyDigests(b.Data, b.BinaryData), nil); ca != cb {
		t.Errorf("same data, different metadata: %s != %s", ca, cb)
	}
}

func TestOrderDoesNotMatter(t *testing.T) {
	// Many keys make it very likely that map iteration order differs
	// between the two builds.
	data1, data2 := map[string]string{}, map[string]string{}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	for _, k := range keys {
		data1[k] = "v" + k
	}
	for i := len(keys) - 1; i >= 0; i-- {
		data2[keys[i]] = "v" + keys[i]
	}
	first := Content(KeyDigests(data1, nil), nil)
	for range 20 {
		if got := Content(KeyDigests(data2, nil), nil); got != first {
			t.Fatalf("content digest depends on map order: %s != %s", got, first)
		}
	}
	if Content(KeyDigests(data1, nil), []string{"c", "a"}) != Content(KeyDigests(data1, nil), []string{"a", "c", "a"}) {
		t.Error("content digest depends on requested key order or duplicates")
	}

	e1 := []Entry{{Kind: "Secret", Name: "s", Content: "1"}, {Kind: "ConfigMap", Name: "b", Content: "2"}, {Kind: "ConfigMap", Name: "a", Missing: true}}
	e2 := []Entry{e1[2], e1[0], e1[1]}
	if PodTemplateHash(testKey, "shop", e1) != PodTemplateHash(testKey, "shop", e2) {
		t.Error("pod-template hash depends on entry order")
	}
	if e1[0].Kind != "Secret" {
		t.Error("PodTemplateHash reordered its input")
	}
}

func TestDigestsDistinguish(t *testing.T) {
	base := KeyDigests(map[string]string{"a": "1", "b": "2"}, nil)
	tests := []struct {
		name string
		x, y string
		same bool
	}{
		{
			name: "data vs binaryData, same bytes",
			x:    Content(KeyDigests(map[string]string{"a": "1"}, nil), nil),
			y:    Content(KeyDigests(nil, map[string][]byte{"a": []byte("1")}), nil),
		},
		{
			name: "restricted keys ignore edits to other keys",
			x:    Content(base, []string{"a"}),
			y:    Content(KeyDigests(map[string]string{"a": "1", "b": "changed", "c": "new"}, nil), []string{"a"}),
			same: true,
		},
		{
			name: "restricted keys see edits to their keys",
			x:    Content(base, []string{"a"}),
			y:    Content(KeyDigests(map[string]string{"a": "changed", "b": "2"}, nil), []string{"a"}),
		},
		{
			name: "all keys see a new key",
			x:    Content(base, nil),
			y:    Content(KeyDigests(map[string]string{"a": "1", "b": "2", "c": "3"}, nil), nil),
		},
		{
			name: "absent requested key vs present empty value",
			x:    Content(KeyDigests(nil, nil), []string{"a"}),
			y:    Content(KeyDigests(map[string]string{"a": ""}, nil), []string{"a"}),
		},
		{
			name: "absent requested key vs no requested key",
			x:    Content(KeyDigests(nil, nil), []string{"a"}),
			y:    Content(KeyDigests(nil, nil), []string{}),
		},
		{
			name: "requested key arriving later",
			x:    Content(KeyDigests(map[string]string{"b": "2"}, nil), []string{"a", "b"}),
			y:    Content(base, []string{"a", "b"}),
		},
		{
			name: "all keys equals every present key requested",
			x:    Content(base, nil),
			y:    Content(base, []string{"a", "b"}),
			same: true,
		},
		{
			name: "key/value boundary",
			x:    Content(KeyDigests(map[string]string{"ab": "c"}, nil), nil),
			y:    Content(KeyDigests(map[string]string{"a": "bc"}, nil), nil),
		},
		{
			name: "missing vs empty content",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a", Missing: true}}),
			y:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a"}}),
		},
		{
			name: "missing vs empty-set content",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a", Missing: true}}),
			y:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a", Content: Content(nil, nil)}}),
		},
		{
			name: "missing vs no entry",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a", Missing: true}}),
			y:    PodTemplateHash(testKey, "shop", nil),
		},
		{
			name: "same name, other kind",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a", Content: "c"}}),
			y:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "Secret", Name: "a", Content: "c"}}),
		},
		{
			name: "kind/name boundary",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "ab", Content: "c"}}),
			y:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMapa", Name: "b", Content: "c"}}),
		},
		{
			name: "the same value in another namespace",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "Secret", Name: "db", Content: Content(base, nil)}}),
			y:    PodTemplateHash(testKey, "attacker", []Entry{{Kind: "Secret", Name: "db", Content: Content(base, nil)}}),
		},
		{
			name: "namespace/entry boundary",
			x:    PodTemplateHash(testKey, "shopSecret", []Entry{{Kind: "", Name: "db", Content: "c"}}),
			y:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "Secret", Name: "db", Content: "c"}}),
		},
		{
			name: "another installation's key",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "Secret", Name: "db", Content: Content(base, nil)}}),
			y:    PodTemplateHash([]byte("another-installation-key-0000000"), "shop", []Entry{{Kind: "Secret", Name: "db", Content: Content(base, nil)}}),
		},
		{
			name: "content change",
			x:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a", Content: Content(base, nil)}}),
			y:    PodTemplateHash(testKey, "shop", []Entry{{Kind: "ConfigMap", Name: "a", Content: Content(base, []string{"a"})}}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.x == tt.y) != tt.same {
				t.Errorf("same=%v, want same=%v (%s vs %s)", tt.x == tt.y, tt.same, tt.x, tt.y)
			}
		})
	}
}

func TestKeyDigestsCoverEveryKey(t *testing.T) {
	got := KeyDigests(map[string]string{"a": "1", "both": "x"}, map[string][]byte{"b": {0xff}, "both": []byte("x")})
	if len(got) != 3 {
		t.Fatalf("got %d keys, want 3: %v", len(got), got)
	}
	if got["both"] != KeyDigests(nil, map[string][]byte{"both": []byte("x")})["both"] {
		t.Error("a key in both maps must take binaryData's digest")
	}
	if len(SecretKeyDigests(nil)) != 0 || len(KeyDigests(nil, nil)) != 0 {
		t.Error("no data must give no digests")
	}
}
