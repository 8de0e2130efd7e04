// Package revision is config history: the immutable snapshot configward
// keeps of each content of a ConfigMap or Secret a workload revision reads,
// the template annotation that names a revision's snapshots, and the
// rewrite that points a pod's references at them. It is pure: the
// controller writes snapshots, the webhooks stamp and rewrite, and both
// take names and objects from here.
//
// A snapshot's name is the original's (cut to fit) and a short keyed
// digest of its namespace, kind, name and whole content: the same content
// always gives the same snapshot, however many workloads read it, and the
// name reveals nothing of a Secret's value to those who cannot read it.
package revision

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/configward/configward/internal/refs"
)

// digestLen is how many hex digits of the keyed digest a snapshot name
// carries: 40 bits, so that two contents of one object share a name about
// once in a trillion pairs.
const digestLen = 10

// maxName is the longest name the API server takes for a ConfigMap or
// Secret (a DNS subdomain).
const maxName = 253

const snapshotHeader = "configward/snapshot/v1\x00"

// SnapshotName is the name of the snapshot of content (the digest.Content
// of every key of the object) of ConfigMap or Secret name in namespace,
// keyed with the installation's key.
func SnapshotName(key []byte, namespace string, kind refs.Kind, name, content string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(snapshotHeader))
	for _, s := range []string{namespace, string(kind), name, content} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	suffix := "-" + hex.EncodeToString(h.Sum(nil))[:digestLen]
	base := name
	if len(base)+len(suffix) > maxName {
		// A subdomain may not end in '.' or '-' before the suffix either.
		base = strings.TrimRight(base[:maxName-len(suffix)], ".-")
	}
	return base + suffix
}

// Source is one ConfigMap or Secret a workload reads.
type Source struct {
	Kind refs.Kind
	Name string
}

func (s Source) String() string { return string(s.Kind) + "/" + s.Name }

// Snapshots maps each source a revision reads to the name of its snapshot.
type Snapshots map[Source]string

// Encode writes the snapshots as the value of the config-snapshots
// annotation, in a stable order: "ConfigMap/app=app-1f2e3d4c5b,...".
func (s Snapshots) Encode() string {
	parts := make([]string, 0, len(s))
	for src, snap := range s {
		parts = append(parts, src.String()+"="+snap)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// Decode reads the value of the config-snapshots annotation. A value
// configward did not write is an error, never a partial map: a pod must not
// be pointed at some snapshots and not others by accident.
func Decode(v string) (Snapshots, error) {
	out := Snapshots{}
	if v == "" {
		return out, nil
	}
	for _, part := range strings.Split(v, ",") {
		src, snap, ok := strings.Cut(part, "=")
		kind, name, ok2 := strings.Cut(src, "/")
		if !ok || !ok2 || name == "" || snap == "" || (kind != string(refs.ConfigMap) && kind != string(refs.Secret)) {
			return nil, fmt.Errorf("%q is not Kind/name=snapshot", part)
		}
		out[Source{Kind: refs.Kind(kind), Name: name}] = snap
	}
	return out, nil
}

// Sorted lists the sources in a stable order, for messages and loops.
func (s Snapshots) Sorted() []Source {
	out := make([]Source, 0, len(s))
	for src := range s {
		out = append(out, src)
	}
	slices.SortFunc(out, func(a, b Source) int { return strings.Compare(a.String(), b.String()) })
	return out
}
