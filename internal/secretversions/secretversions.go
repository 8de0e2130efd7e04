// Package secretversions decides, for one workload, whether the secrets it
// mounts through the Secrets Store CSI driver were rotated. The driver
// writes, per pod and SecretProviderClass, a SecretProviderClassPodStatus
// listing the id and version of every object it mounted; configward reads
// only those versions, never a file or a value.
//
// The decision is per workload, not per pod: the versions every pod of the
// workload reports are gathered (Observe) and compared with the record kept
// on the workload (v1alpha1.SecretVersionsAnnotation) by Next:
//
//   - a class with no record yet takes what its pods report as its
//     baseline, and nothing rolls: neither a new workload nor the upgrade
//     to a configward that reads versions restarts anything;
//   - a pod without a status, or whose status lists no object, is unknown
//     and counts for nothing;
//   - a version no pod of the workload reported at the last look is a
//     rotation: the class's rolled digest changes, which changes the
//     workload's config hash, and the workload rolls once however many of
//     its pods report it (the driver rotates each pod on its own poll, so
//     they report the new version over a minute or two);
//   - while pods disagree (some still report the old version, some the
//     new), the versions seen are all of them; once the rollout has
//     replaced the old pods, only the new remains. A version that comes
//     back after every pod stopped reporting it is a rotation again.
//
// Versions are recorded as keyed digests (HMAC-SHA256 with the
// installation's key, as the config hash is): some providers' versions are
// digests of the content, and the record is readable by anyone who may
// read the workload.
package secretversions

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// The Secrets Store CSI driver's kinds, served at v1 since driver v1.0.
var (
	ClassKind     = schema.GroupVersionKind{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Kind: "SecretProviderClass"}
	PodStatusKind = schema.GroupVersionKind{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Kind: "SecretProviderClassPodStatus"}
)

// Object is one secret the driver mounted: its id in the class and the
// version it fetched.
type Object struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// PodStatus is what a SecretProviderClassPodStatus says of one pod.
type PodStatus struct {
	Pod     string
	Class   string
	Objects []Object
}

// PodStatusOf reads a SecretProviderClassPodStatus's status as the driver
// writes it (status.podName, status.secretProviderClassName,
// status.objects[].id/.version) from its unstructured content.
func PodStatusOf(content map[string]any) PodStatus {
	status, _ := content["status"].(map[string]any)
	s := PodStatus{}
	s.Pod, _ = status["podName"].(string)
	s.Class, _ = status["secretProviderClassName"].(string)
	objects, _ := status["objects"].([]any)
	for _, o := range objects {
		m, _ := o.(map[string]any)
		id, _ := m["id"].(string)
		version, _ := m["version"].(string)
		s.Objects = append(s.Objects, Object{ID: id, Version: version})
	}
	return s
}

// digestHeader starts every digest; changing it changes every record.
const digestHeader = "configward/secret-versions/v1\x00"

// digestBytes is a digest's length before hex encoding: digests only tell
// versions apart, and the record holds a few per class.
const digestBytes = 12

// Digest is the keyed digest of the versions one pod reports for a class in
// namespace, in id order; "" for none.
func Digest(key []byte, namespace, class string, objects []Object) string {
	if len(objects) == 0 {
		return ""
	}
	sorted := slices.Clone(objects)
	slices.SortFunc(sorted, func(a, b Object) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version)) })
	h := hmac.New(sha256.New, key)
	h.Write([]byte(digestHeader))
	for _, s := range append([]string{namespace, class}, flatten(sorted)...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil)[:digestBytes])
}

func flatten(objects []Object) []string {
	out := make([]string, 0, 2*len(objects))
	for _, o := range objects {
		out = append(out, o.ID, o.Version)
	}
	return out
}

// Observed is, per class, the distinct digests the workload's pods report,
// sorted.
type Observed map[string][]string

// Observe gathers the statuses of the workload's pods (pods) for the
// classes it mounts.
func Observe(key []byte, namespace string, classes []string, pods map[string]bool, statuses []PodStatus) Observed {
	out := Observed{}
	for _, s := range statuses {
		if !pods[s.Pod] || !slices.Contains(classes, s.Class) {
			continue
		}
		if d := Digest(key, namespace, s.Class, s.Objects); d != "" {
			out[s.Class] = append(out[s.Class], d)
		}
	}
	for c, ds := range out {
		slices.Sort(ds)
		out[c] = slices.Compact(ds)
	}
	return out
}

// Class is the record of one SecretProviderClass.
type Class struct {
	// Seen are the digests the workload's pods reported at the last look.
	Seen []string `json:"seen"`
	// Rolled is the digest of the versions the last rotation rolled to; ""
	// until the first rotation. It is the class's part of the config hash.
	Rolled string `json:"rolled,omitempty"`
}

// Record is what the annotation holds: the key the digests were made with
// (its ID, which reveals nothing of it) and each class's record.
type Record struct {
	Key     string           `json:"key"`
	Classes map[string]Class `json:"classes"`
}

// Decode reads the annotation; an empty value is an empty record. A value
// that cannot be read is an error: the caller starts a new baseline
// rather than rolling on it.
func Decode(s string) (Record, error) {
	if s == "" {
		return Record{}, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Record{}, fmt.Errorf("%s is not a record of secret versions: %w", quote(s), err)
	}
	return r, nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// Encode writes the annotation's value: the same record always gives the
// same bytes (maps are written in key order). No class gives "".
func (r Record) Encode() string {
	if len(r.Classes) == 0 {
		return ""
	}
	b, _ := json.Marshal(r) // strings and slices only: cannot fail
	return string(b)
}

// Rolled maps each class that was rotated at least once to its rolled
// digest, for the config hash.
func (r Record) Rolled() map[string]string {
	out := map[string]string{}
	for name, c := range r.Classes {
		if c.Rolled != "" {
			out[name] = c.Rolled
		}
	}
	return out
}

// Next returns the record after a look at observed, for a workload that
// mounts classes now, with digests made with the key keyID, and the
// classes rotated since the record (sorted). Classes it no longer mounts
// leave the record. A record of another key is a baseline again (digests
// of two keys cannot be compared), keeping what it rolled to.
func Next(r Record, keyID string, classes []string, observed Observed) (Record, []string) {
	next := Record{Key: keyID, Classes: map[string]Class{}}
	var rotated []string
	for _, name := range classes {
		c, had := r.Classes[name]
		now := observed[name]
		switch {
		case len(now) == 0:
			// Nothing reported (no pod yet, or none with a status): what
			// was known stays.
			if had {
				next.Classes[name] = c
			}
			continue
		case !had || r.Key != keyID:
			next.Classes[name] = Class{Seen: now, Rolled: c.Rolled}
			continue
		}
		var fresh []string
		for _, d := range now {
			if !slices.Contains(c.Seen, d) {
				fresh = append(fresh, d)
			}
		}
		if len(fresh) > 0 {
			// Pods that disagree on a new version (two rotations close
			// together) still make one decision: all of it.
			c.Rolled = strings.Join(fresh, "+")
			rotated = append(rotated, name)
		}
		c.Seen = now
		next.Classes[name] = c
	}
	if len(next.Classes) == 0 {
		next = Record{}
	}
	slices.Sort(rotated)
	return next, rotated
}

// RolledOf reads the rolled digests of the record in a workload's
// annotations. An unreadable record counts as none: the controller starts
// a new baseline over it.
func RolledOf(annotations map[string]string) map[string]string {
	return RolledIn(annotations[v1alpha1.SecretVersionsAnnotation])
}

// RolledIn reads the rolled digests of an encoded record, as RolledOf.
func RolledIn(record string) map[string]string {
	r, _ := Decode(record)
	return r.Rolled()
}
