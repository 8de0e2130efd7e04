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
	out := map[string]string{}
	b := []byte(packed)
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n+digest.KeyDigestSize {
			return nil, fmt.Errorf("inventory: corrupt packed digests")
		}
		b = b[w:]
		key := string(b[:n])
		out[key] = hex.EncodeToString(b[n : n+digest.KeyDigestSize])
		b = b[n+digest.KeyDigestSize:]
	}
	return out, nil
}
