package changecontrol

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
)

// Content is the part of a ConfigMap or Secret that pods consume, plus the
// annotations change control reads. It lives only for one request and is
// compared, never printed.
type Content struct {
	Data        map[string][]byte
	BinaryData  map[string][]byte // ConfigMaps only
	Immutable   bool
	Type        corev1.SecretType // Secrets only
	Annotations map[string]string
}

// FromConfigMap takes the content of a ConfigMap.
func FromConfigMap(cm *corev1.ConfigMap) *Content {
	c := &Content{Data: make(map[string][]byte, len(cm.Data)), BinaryData: cm.BinaryData,
		Immutable: cm.Immutable != nil && *cm.Immutable, Annotations: cm.Annotations}
	for k, v := range cm.Data {
		c.Data[k] = []byte(v)
	}
	return c
}

// FromSecret takes the content of a Secret. The API server has already
// merged stringData into data when a webhook sees the object; stringData is
// merged here too so that a request built by hand is judged the same way.
func FromSecret(s *corev1.Secret) *Content {
	c := &Content{Data: s.Data, Immutable: s.Immutable != nil && *s.Immutable, Type: s.Type, Annotations: s.Annotations}
	if len(s.StringData) > 0 {
		c.Data = maps.Clone(s.Data)
		if c.Data == nil {
			c.Data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			c.Data[k] = []byte(v)
		}
	}
	return c
}

// Changes lists the content fields that differ between old and new, by
// name: `data["key"]` for a key added, removed or changed, `binaryData[...]`,
// `immutable` and `type`.
func Changes(old, new *Content) []string {
	if old == nil || new == nil {
		return nil
	}
	out := changedKeys("data", old.Data, new.Data)
	out = append(out, changedKeys("binaryData", old.BinaryData, new.BinaryData)...)
	if old.Immutable != new.Immutable {
		out = append(out, "immutable")
	}
	if old.Type != new.Type {
		out = append(out, "type")
	}
	return out
}

func changedKeys(field string, old, new map[string][]byte) []string {
	var out []string
	for k, v := range new {
		if ov, ok := old[k]; !ok || !bytes.Equal(ov, v) {
			out = append(out, fmt.Sprintf("%s[%q]", field, k))
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			out = append(out, fmt.Sprintf("%s[%q]", field, k))
		}
	}
	slices.Sort(out)
	return out
}

func (c *Content) annotation(key string) string {
	if c == nil {
		return ""
	}
	return c.Annotations[key]
}

// ManagedByCertManager is true for a Secret cert-manager issued: it carries
// the name of its Certificate, the annotation cert-manager sets on every
// Secret it writes.
func (c *Content) ManagedByCertManager() bool {
	return c.annotation(cmapi.CertificateNameKey) != ""
}
