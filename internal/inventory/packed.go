package inventory

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/configward/configward/internal/digest"
)

// packedKey is the one data key of a cached ConfigMap or Secret. It is empty,
// which no real object can use, so a packed object cannot be mistaken for a
// real one with the same keys.
const packedKey = ""

// pack stores an object's key digests as one string: for each key in
// order, uvarint(len(key)) || key || the 16 raw digest bytes. One string per
// object instead of a map of hex strings is what keeps the cache at a few
// hundred bytes per object however many keys it has (see the inventory heap
// benchmark in docs/evaluate/performance-and-reliability.md).
func pack(keyDigests map[string]string) string {
	keys := make([]string, 0, len(keyDigests))
	size := 0
	for k := range keyDigests {
		keys = append(keys, k)
		size += binary.MaxVarintLen64 + len(k) + digest.KeyDigestSize
	}
	slices.Sort(keys)
	buf := make([]byte, 0, size)
	for _, k := range keys {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		raw, err := hex.DecodeString(keyDigests[k])
		if err != nil || len(raw) != digest.KeyDigestSize {
			panic(fmt.Sprintf("inventory: key digest of %q is not %d hex bytes", k, digest.KeyDigestSize)) // digest.KeyDigests always is
		}
		buf = append(buf, raw...)
	}
	return string(buf)
}

// unpack is the inverse of pack.
func unpack(packed string) (map[string]string, error) {
	// Every review reads it, for each object it references: two passes,
	// the first checking the layout and counting, so that the second builds
	// the map and every hex digest with a few allocations. Keys are
	// substrings of packed (which the cache keeps), not copies.
	count := 0
	for off := 0; off < len(packed); count++ {
		n, w := uvarintAt(packed, off)
		rest := uint64(len(packed) - off - w)
		if w <= 0 || n > rest || rest-n < digest.KeyDigestSize {
			return nil, fmt.Errorf("inventory: corrupt packed digests")
		}
		off += w + int(n) + digest.KeyDigestSize
	}
	const hexSize = 2 * digest.KeyDigestSize
	hexed := make([]byte, count*hexSize)
	keys := make([]string, count)
	var raw [digest.KeyDigestSize]byte
	for i, off := 0, 0; i < count; i++ {
		n, w := uvarintAt(packed, off)
		off += w
		keys[i] = packed[off : off+int(n)]
		off += int(n)
		copy(raw[:], packed[off:off+digest.KeyDigestSize])
		hex.Encode(hexed[i*hexSize:], raw[:])
		off += digest.KeyDigestSize
	}
	digests := string(hexed)
	out := make(map[string]string, count)
	for i, k := range keys {
		out[k] = digests[i*hexSize : (i+1)*hexSize]
	}
	return out, nil
}

// packedKeys are the key names of packed, sorted (pack wrote them so), as
// substrings of it; none for no keys.
func packedKeys(packed string) ([]string, error) {
	var keys []string
	for off := 0; off < len(packed); {
		n, w := uvarintAt(packed, off)
		rest := uint64(len(packed) - off - w)
		if w <= 0 || n > rest || rest-n < digest.KeyDigestSize {
			return nil, fmt.Errorf("inventory: corrupt packed digests")
		}
		keys = append(keys, packed[off+w:off+w+int(n)])
		off += w + int(n) + digest.KeyDigestSize
	}
	return keys, nil
}

// uvarintAt decodes the uvarint at s[off:] as binary.Uvarint does.
func uvarintAt(s string, off int) (uint64, int) {
	var buf [binary.MaxVarintLen64]byte
	return binary.Uvarint(buf[:copy(buf[:], s[off:])])
}
