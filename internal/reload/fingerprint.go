package reload

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/configward/configward/internal/digest"
)

// Fingerprint names one key's value without revealing it: the HMAC, under
// the report's key, of the key's digest as configward keeps it (data, for
// a ConfigMap's data and a Secret's; binary, for a ConfigMap's binaryData:
// a file does not say which, so both are sent).
type Fingerprint struct {
	Data   string `json:"data"`
	Binary string `json:"binary"`
}

const fingerprintHeader = "configward/reload-fingerprint/v1\x00"

// FingerprintKey is the key a report's fingerprints are made under,
// derived from the token the report is sent with: only the pod and
// configward, who receives the token, can make or check them, and a new
// token (every hour) gives new fingerprints.
func FingerprintKey(token []byte) []byte {
	h := sha256.New()
	h.Write([]byte(fingerprintHeader))
	h.Write(token)
	return h.Sum(nil)
}

// Fingerprints fingerprints values (key to bytes) under key. The values
// are only read here: nothing of them is kept.
func Fingerprints(key []byte, values map[string][]byte) map[string]Fingerprint {
	out := make(map[string]Fingerprint, len(values))
	for k, v := range values {
		data := digest.KeyDigests(map[string]string{k: string(v)}, nil)[k]
		binary := digest.KeyDigests(nil, map[string][]byte{k: v})[k]
		out[k] = Fingerprint{Data: mac(key, data), Binary: mac(key, binary)}
	}
	return out
}

func mac(key []byte, keyDigest string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyDigest))
	return hex.EncodeToString(m.Sum(nil))
}

// Matches reports whether fingerprints (made under key) are those of the
// content whose key digests are keyDigests: every reported key is one the
// content has, with that value, and, with allKeys, the content has no
// other. A pod that projects some keys (items) reports only those.
func Matches(key []byte, fingerprints map[string]Fingerprint, allKeys bool, keyDigests map[string]string) bool {
	if len(fingerprints) == 0 || (allKeys && len(fingerprints) != len(keyDigests)) {
		return false
	}
	for k, fp := range fingerprints {
		d, ok := keyDigests[k]
		if !ok {
			return false
		}
		want := []byte(mac(key, d))
		if !hmac.Equal(want, []byte(fp.Data)) && !hmac.Equal(want, []byte(fp.Binary)) {
			return false
		}
	}
	return true
}
