// Package digest computes the content digests of ConfigMaps and Secrets and
// the pod-template hash built from them.
//
// The encodings below are a compatibility contract: the hash is stamped on
// pod templates and compared across versions of configward, so changing any
// byte of them changes every hash and restarts every stamped workload.
// Only data takes part; metadata (labels, annotations, resourceVersion, ...)
// is never an input, so re-applying unchanged content changes nothing.
//
// Notation: u64(n) is n as 8 bytes big-endian; lp(s) is u64(len(s)) || s;
// hex is lowercase hexadecimal; "\x00" is a zero byte.
//
// Key digest (KeyDigests, SecretKeyDigests), one per key:
//
//	hex(sha256("data\x00" || value)[:16])     ConfigMap data, Secret data
//	hex(sha256("binary\x00" || value)[:16])   ConfigMap binaryData
//
// Key digests are truncated to 128 bits: they only detect change, and the
// inventory keeps one per key of every cached object, so their size is most
// of its memory.
//
// The tag keeps the same bytes in data and binaryData apart: the two fields
// do not behave the same for consumers (only data can feed env vars).
//
// Content digest (Content) of one object restricted to a key set, where the
// key set is every key present when keys is nil, and otherwise the requested
// keys, sorted and deduplicated:
//
//	hex(sha256("configward/content/v1\x00" || for each key k in order:
//	    lp(k) || "\x01" || lp(keyDigest)   if k is present
//	    lp(k) || "\x00"                    if k is absent))
//
// Pod-template hash (PodTemplateHash), keyed with the installation's key
// (internal/hashkey) and bound to the namespace, with entries sorted by
// Kind, then Name (then Missing, then Content, only so duplicates still
// order the same):
//
//	"hmac-sha256:" || hex(HMAC-SHA256(key, "configward/pod-template/v2\x00" || lp(namespace) ||
//	    for each entry:
//	    lp(Kind) || lp(Name) || "\x01" || lp(Content)   if present
//	    lp(Kind) || lp(Name) || "\x00"                  if Missing))
//
// A SecretProviderClass mounted through the Secrets Store CSI driver enters
// as an entry of Kind "SecretProviderClass" once it has rotated, with the
// digest of the versions it rotated to as Content (internal/secretversions):
// a workload that never saw a rotation keeps the hash it had before.
//
// The hash is written on pod templates and Pods that anyone who may read a
// Deployment sees. Keyed, it is no oracle: without the key nobody can test
// guesses of a Secret's value against it, and bound to the namespace and the
// object names and keys, equal values in two namespaces or two objects never
// give equal hashes. (v1, "sha256:" without a key, was such an oracle; a
// workload still carrying one is re-stamped once.) The key digests and
// content digests above never leave the process.
package digest

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
)

const (
	dataTag   = "data\x00"
	binaryTag = "binary\x00"

	contentHeader     = "configward/content/v1\x00"
	podTemplateHeader = "configward/pod-template/v2\x00"

	// HashScheme prefixes every pod-template hash: which scheme made it.
	HashScheme = "hmac-sha256:"

	absent  = 0x00
	present = 0x01
)

// KeyDigests returns the digest of every key of a ConfigMap's data and
// binaryData. The API server rejects a key in both maps; should one arrive
// anyway, binaryData's digest wins so the result stays deterministic.
func KeyDigests(data map[string]string, binaryData map[string][]byte) map[string]string {
	out := make(map[string]string, len(data)+len(binaryData))
	for k, v := range data {
		out[k] = tagged(dataTag, []byte(v))
	}
	for k, v := range binaryData {
		out[k] = tagged(binaryTag, v)
	}
	return out
}

// SecretKeyDigests returns the digest of every key of a Secret's data.
// stringData is not an input: the API server folds it into data on write,
// so it never reaches storage or the cache.
func SecretKeyDigests(data map[string][]byte) map[string]string {
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = tagged(dataTag, v)
	}
	return out
}

func tagged(tag string, value []byte) string {
	h := sha256.New()
	h.Write([]byte(tag))
	h.Write(value)
	return hex.EncodeToString(h.Sum(nil)[:KeyDigestSize])
}

// KeyDigestSize is the length in bytes of a key digest before hex encoding.
const KeyDigestSize = 16

// Content returns the digest of an object's content restricted to keys, or
// of all its keys when keys is nil; a non-nil empty keys is the empty set.
// A requested key that is absent is encoded as absent, so its later arrival
// changes the digest, while keys outside the set never do.
func Content(keyDigests map[string]string, keys []string) string {
	if keys == nil {
		keys = make([]string, 0, len(keyDigests))
		for k := range keyDigests {
			keys = append(keys, k)
		}
	} else {
		keys = slices.Clone(keys)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)

	// The message is built, then hashed once: writing each piece to the
	// hash made every piece escape to the heap (a review hashes dozens).
	msg := make([]byte, 0, len(contentHeader)+len(keys)*(2*8+1+64+32))
	msg = append(msg, contentHeader...)
	for _, k := range keys {
		msg = appendLP(msg, k)
		if d, ok := keyDigests[k]; ok {
			msg = append(msg, present)
			msg = appendLP(msg, d)
		} else {
			msg = append(msg, absent)
		}
	}
	sum := sha256.Sum256(msg)
	return hex.EncodeToString(sum[:])
}

// Entry is one consumed object as it enters the pod-template hash.
type Entry struct {
	Kind string
	Name string
	// Missing marks an object that does not exist; Content is then ignored.
	// Whether a missing optional object is passed as Missing or left out is
	// the caller's choice: either way its creation changes the hash.
	Missing bool
	// Content is the object's Content digest over the keys the pod consumes.
	Content string
}

// PodTemplateHash returns "hmac-sha256:<hex>" over the namespace and the
// entries in canonical order, so the order callers find references in does
// not matter, keyed with key. No entries still give a hash (of the header
// and namespace alone); callers that do not want to stamp those must check
// for an empty list themselves.
func PodTemplateHash(key []byte, namespace string, entries []Entry) string {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int {
		return cmp.Or(
			cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Name, b.Name),
			compareBool(a.Missing, b.Missing),
			cmp.Compare(a.Content, b.Content),
		)
	})

	msg := make([]byte, 0, len(podTemplateHeader)+8+len(namespace)+len(sorted)*(3*8+1+64+64))
	msg = append(msg, podTemplateHeader...)
	msg = appendLP(msg, namespace)
	for _, e := range sorted {
		msg = appendLP(msg, e.Kind)
		msg = appendLP(msg, e.Name)
		if e.Missing {
			msg = append(msg, absent)
		} else {
			msg = append(msg, present)
			msg = appendLP(msg, e.Content)
		}
	}
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return HashScheme + hex.EncodeToString(h.Sum(nil))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// appendLP appends s to b, length-prefixed (8 bytes, big-endian).
func appendLP(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...)
}
