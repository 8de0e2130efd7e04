package changecontrol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Content is the part of a ConfigMap or Secret that change control guards:
// what pods consume, and the metadata that governs what configward or
// Kubernetes does with the object. It lives only for one request and is
// compared, never printed.
type Content struct {
	Data        map[string][]byte
	BinaryData  map[string][]byte // ConfigMaps only
	Immutable   bool
	Type        corev1.SecretType // Secrets only
	Annotations map[string]string
	Labels      map[string]string
	// Spec is a ConfigSchema's spec, each top-level field as canonical
	// JSON: a schema loosened is config let through that it kept out.
	Spec map[string]string
	// Governing is the governing metadata (see GoverningMetadata), by the
	// field name users read in a denial.
	Governing map[string]string
}

// FromConfigMap takes the content of a ConfigMap. schemaLabels are the
// label keys the ConfigSchemas of its namespace select on: changing one of
// them can take the ConfigMap out of its schema's reach.
func FromConfigMap(cm *corev1.ConfigMap, schemaLabels []string) *Content {
	c := &Content{Data: make(map[string][]byte, len(cm.Data)), BinaryData: cm.BinaryData,
		Immutable: cm.Immutable != nil && *cm.Immutable, Annotations: cm.Annotations, Labels: cm.Labels,
		Governing: GoverningMetadata(&cm.ObjectMeta, schemaLabels, false)}
	for k, v := range cm.Data {
		c.Data[k] = []byte(v)
	}
	return c
}

// FromSecret takes the content of a Secret. The API server has already
// merged stringData into data when a webhook sees the object; stringData is
// merged here too so that a request built by hand is judged the same way.
func FromSecret(s *corev1.Secret) *Content {
	c := &Content{Data: s.Data, Immutable: s.Immutable != nil && *s.Immutable, Type: s.Type, Annotations: s.Annotations,
		Labels: s.Labels, Governing: GoverningMetadata(&s.ObjectMeta, nil, true)}
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

// FromConfigSchema takes the content of a ConfigSchema: its spec and its
// governing metadata.
func FromConfigSchema(cs *v1alpha1.ConfigSchema) (*Content, error) {
	return fromSpec(&cs.ObjectMeta, cs.Spec)
}

// FromConfigSet takes the content of a ConfigSet: its spec (the members
// and the version that moves them) and its governing metadata. Writing a
// set's version moves its members as surely as writing them.
func FromConfigSet(set *v1alpha1.ConfigSet) (*Content, error) {
	return fromSpec(&set.ObjectMeta, set.Spec)
}

// fromSpec is the content of one of configward's own kinds: each
// top-level field of its spec as canonical JSON, and its governing
// metadata.
func fromSpec(meta *metav1.ObjectMeta, spec any) (*Content, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	c := &Content{Spec: make(map[string]string, len(fields)), Annotations: meta.Annotations, Labels: meta.Labels,
		Governing: GoverningMetadata(meta, nil, false)}
	for k, v := range fields {
		c.Spec[k] = string(v)
	}
	return c, nil
}

// Changes lists what differs between old and new, by name: `data["key"]`
// for a key added, removed or changed, `binaryData[...]`, `immutable`,
// `type`, `spec.<field>` of a ConfigSchema, and governing metadata
// (`metadata.annotations["configward.dev/reload"]`,
// `metadata.ownerReferences`, ...). A nil old is a creation: everything new
// has is a change.
func Changes(old, new *Content) []string {
	if new == nil {
		return nil
	}
	if old == nil {
		old = &Content{Type: new.Type}
	}
	dataKey := func(field string) func(string) string {
		return func(k string) string { return fmt.Sprintf("%s[%q]", field, k) }
	}
	out := changedKeys(old.Data, new.Data, bytes.Equal, dataKey("data"))
	out = append(out, changedKeys(old.BinaryData, new.BinaryData, bytes.Equal, dataKey("binaryData"))...)
	if old.Immutable != new.Immutable {
		out = append(out, "immutable")
	}
	if old.Type != new.Type {
		out = append(out, "type")
	}
	out = append(out, changedKeys(old.Spec, new.Spec, func(a, b string) bool { return a == b }, func(k string) string { return "spec." + k })...)
	// Governing metadata is keyed by the field's own name already.
	return append(out, changedKeys(old.Governing, new.Governing, func(a, b string) bool { return a == b }, func(k string) string { return k })...)
}

// changedKeys names, sorted, the keys added, removed or changed between two
// maps.
func changedKeys[V any](old, new map[string]V, equal func(a, b V) bool, name func(string) string) []string {
	var out []string
	for k, v := range new {
		if ov, ok := old[k]; !ok || !equal(ov, v) {
			out = append(out, name(k))
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			out = append(out, name(k))
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

// ManagedByCertManager is true for a Secret cert-manager writes: one it
// issued, which carries the name of its Certificate, or the private key it
// keeps for the next issuance, which carries its label (a generated name
// nothing consumes).
func (c *Content) ManagedByCertManager() bool {
	if c == nil {
		return false
	}
	return c.annotation(cmapi.CertificateNameKey) != "" || c.Labels[cmapi.IsNextPrivateKeySecretLabelKey] == "true"
}

// GoverningMetadata is the metadata of a ConfigMap or Secret that changes
// what configward or Kubernetes does with it, so that changing it is a
// change like its data: configward's own annotations and labels (reload
// mode, schema, exemptions: adding configward.dev/exempt.<rule> first would
// make the next content edit an audit, configward.dev/reload: ignore would
// stop the pipeline's next change from rolling anything), the labels that
// select a ConfigSchema (removing one lets invalid content in), owner
// references (the garbage collector deletes what a missing owner owned),
// finalizers (one blocks the pipeline's delete), and on Secrets
// cert-manager's annotations and labels (they make a Secret cert-manager's
// to overwrite). The break-glass annotations are the emergency path itself and
// are judged as such. Values are metadata, never Secret data.
func GoverningMetadata(m *metav1.ObjectMeta, schemaLabels []string, secret bool) map[string]string {
	out := map[string]string{}
	for k, v := range m.Annotations {
		if governingKey(k, secret) {
			out[fmt.Sprintf("metadata.annotations[%q]", k)] = v
		}
	}
	for k, v := range m.Labels {
		if strings.HasPrefix(k, configwardPrefix) || slices.Contains(schemaLabels, k) || (secret && strings.HasPrefix(k, "cert-manager.io/")) {
			out[fmt.Sprintf("metadata.labels[%q]", k)] = v
		}
	}
	if len(m.OwnerReferences) > 0 {
		// Each reference quoted field by field: joined with a separator, a
		// change from apiVersion "a/b", kind "K" to apiVersion "a", kind
		// "b/K" read as no change (found by FuzzChanges).
		refs := make([]string, len(m.OwnerReferences))
		for i, r := range m.OwnerReferences {
			refs[i] = fmt.Sprintf("%q", []string{r.APIVersion, r.Kind, r.Name, string(r.UID),
				strconv.FormatBool(r.Controller != nil && *r.Controller), strconv.FormatBool(r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion)})
		}
		slices.Sort(refs)
		out["metadata.ownerReferences"] = strings.Join(refs, ",")
	}
	if len(m.Finalizers) > 0 {
		out["metadata.finalizers"] = fmt.Sprintf("%q", slices.Sorted(slices.Values(m.Finalizers)))
	}
	return out
}

const configwardPrefix = "configward.dev/"

func governingKey(annotation string, secret bool) bool {
	switch {
	case annotation == v1alpha1.BreakGlassAnnotation || annotation == v1alpha1.BreakGlassDeleteAnnotation:
		return false
	case annotation == v1alpha1.BreakGlassSealAnnotation:
		// configward writes it on the break-glass write itself, which
		// would otherwise list it as the person's change; a seal nobody
		// can compute without the installation's key needs no guard, and
		// one removed only keeps a reason from skipping approvals.
		return false
	case strings.HasPrefix(annotation, configwardPrefix):
		return true
	case secret && strings.HasPrefix(annotation, "cert-manager.io/"):
		return true
	}
	return false
}
