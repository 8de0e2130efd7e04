package inventory

import (
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configward/configward/internal/digest"
)

// FuzzPackedDigests fuzzes both directions of the packed digest encoding,
// and packedKeys beside unpack.
//
// packed is arbitrary: unpack must refuse it or decode it without
// panicking, to digests of digest.KeyDigestSize lowercase hex bytes, and
// re-packing what it decoded gives back packed exactly when packed is
// canonical (keys strictly increasing, lengths as minimal uvarints), and
// always decodes to the same map.
//
// keys is split at 0xff (a byte no UTF-8 string holds) into the keys of a
// map; the packer assumes nothing of a key, so any string goes, the empty
// one and those Kubernetes refuses included. Their digests come from
// digestBytes (arbitrary ones) and from digest.KeyDigests (what transform
// packs). unpack(pack(m)) must be m, and pack must not depend on map order.
func FuzzPackedDigests(f *testing.F) {
	d := strings.Repeat("ab", digest.KeyDigestSize)
	f.Add("", "", []byte{})
	f.Add(pack(map[string]string{"a.yaml": d, "b": d}), "app.yaml\xffflags\xff_x-1.2", []byte("0123456789abcdef"))
	f.Add(pack(map[string]string{"": d}), "\xff", []byte{1})
	f.Add("\x05ab", "k\x00ey\xffé", []byte{0xff})
	f.Add("\xff\xff\x03"+strings.Repeat("x", 20), strings.Repeat("k", 253), []byte("digest"))
	f.Add("\x80\x00"+strings.Repeat("z", digest.KeyDigestSize), "a\xffa\xffb", []byte{})

	f.Fuzz(func(t *testing.T, packed, keys string, digestBytes []byte) {
		// unpack on arbitrary input; packedKeys refuses what unpack
		// refuses and, on what pack writes, lists unpack's keys in order.
		m, err := unpack(packed)
		if keys, kerr := packedKeys(packed); (kerr == nil) != (err == nil) {
			t.Fatalf("packedKeys(%q) = %q, %v; unpack: %v", packed, keys, kerr, err)
		} else if err == nil && canonicalPacked(packed) && !slices.Equal(keys, slices.Sorted(maps.Keys(m))) {
			t.Fatalf("packedKeys(%q) = %q; unpack has %v", packed, keys, m)
		}
		if err == nil {
			for k, v := range m {
				if raw, err := hex.DecodeString(v); err != nil || len(raw) != digest.KeyDigestSize || hex.EncodeToString(raw) != v {
					t.Fatalf("unpack(%q): key %q has digest %q", packed, k, v)
				}
			}
			re := pack(m)
			if canonicalPacked(packed) != (re == packed) {
				t.Fatalf("pack(unpack(%q)) = %q; canonical: %v", packed, re, canonicalPacked(packed))
			}
			if m2, err := unpack(re); err != nil || !maps.Equal(m, m2) {
				t.Fatalf("unpack(pack(unpack(%q))) = %v, %v; want %v", packed, m2, err, m)
			}
		}

		// pack on fuzzed keys.
		names := strings.Split(keys, "\xff")
		arbitrary := make(map[string]string, len(names))
		values := make(map[string]string, len(names))
		for i, k := range names {
			raw := make([]byte, digest.KeyDigestSize)
			for j := range raw {
				if len(digestBytes) > 0 {
					raw[j] = digestBytes[(i*digest.KeyDigestSize+j)%len(digestBytes)] + byte(i)
				}
			}
			arbitrary[k] = hex.EncodeToString(raw)
			values[k] = string(digestBytes) + k
			// A key Kubernetes allows is never the packed key, which is what
			// tells a packed object from a real one (isPacked).
			if len(validation.IsConfigMapKey(k)) == 0 && k == packedKey {
				t.Fatalf("valid key %q is the packed key", k)
			}
		}
		for _, m := range []map[string]string{arbitrary, digest.KeyDigests(values, nil), digest.SecretKeyDigests(map[string][]byte{keys: digestBytes})} {
			p := pack(m)
			if p2 := pack(maps.Clone(m)); p2 != p {
				t.Fatalf("pack not deterministic: %q then %q", p, p2)
			}
			got, err := unpack(p)
			if err != nil || !maps.Equal(got, m) {
				t.Fatalf("unpack(pack(%v)) = %v, %v", m, got, err)
			}
			if !canonicalPacked(p) {
				t.Fatalf("pack(%v) = %q is not canonical", m, p)
			}
			if keys, err := packedKeys(p); err != nil || !slices.Equal(keys, slices.Sorted(maps.Keys(m))) {
				t.Fatalf("packedKeys(pack(%v)) = %q, %v", m, keys, err)
			}
		}
	})
}

// canonicalPacked reports whether s is what pack writes: entries whose keys
// strictly increase, each length a minimal uvarint, each digest whole.
func canonicalPacked(s string) bool {
	b := []byte(s)
	prev, first := "", true
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || w != len(binary.AppendUvarint(nil, n)) {
			return false
		}
		b = b[w:]
		if n > uint64(len(b)) || uint64(len(b))-n < digest.KeyDigestSize {
			return false
		}
		key := string(b[:n])
		if !first && key <= prev {
			return false
		}
		prev, first = key, false
		b = b[n+digest.KeyDigestSize:]
	}
	return true
}
