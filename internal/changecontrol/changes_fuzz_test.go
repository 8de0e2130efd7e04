package changecontrol

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/rules"
)

// The values planted under fuzzCanaryKey in the old and the new object. No
// name Changes returns and no message Decide writes may hold either.
const (
	fuzzCanaryKey = "fuzz-canary"
	fuzzCanaryOld = "CANARYold-3b9f1e"
	fuzzCanaryNew = "CANARYnew-77c0d2"
)

// FuzzChanges fuzzes change control's diff and the decision built on it: an
// old and a new ConfigMap or Secret, each as JSON (one that does not decode
// is absent: a CREATE has no old object). It asserts that Changes does not
// panic, answers the same twice, names each change once and only the kinds
// of names it documents, is empty exactly when an independent comparison
// finds the two equal (data, binaryData, immutable, type, and the governing
// metadata compared field by field), is symmetric, and finds nothing between
// an object and itself; and that Decide, for a user outside the pipeline in
// a governed namespace, refuses exactly the requests that change something
// without a new break-glass reason. Neither holds a value: a canary planted
// in both objects' data appears in no name and no message.
func FuzzChanges(f *testing.F) {
	for _, s := range []struct {
		secret   bool
		old, new string
	}{
		{false, `{"data":{"a":"1"}}`, `{"data":{"a":"2","b":""}}`},
		{false, `{"data":{"a":"1"},"binaryData":{"b":"AQ=="}}`, `{"data":{"a":"1"},"binaryData":{"b":"Ag=="},"immutable":true}`},
		{false, `{"metadata":{"labels":{"configward.dev/x":"1","free":"y"}}}`, `{"metadata":{"labels":{"free":"z"},"annotations":{"configward.dev/reload":"ignore"}}}`},
		{false, `{}`, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"ghost","uid":"u"}],"finalizers":["b","a"]}}`},
		{false, `{"metadata":{"ownerReferences":[{"apiVersion":"a/b","kind":"K","name":"n","uid":"u,v"}]}}`, `{"metadata":{"ownerReferences":[{"apiVersion":"a","kind":"b/K","name":"n","uid":"u"},{"apiVersion":"v","kind":"","name":"","uid":""}]}}`},
		{false, `{"metadata":{"ownerReferences":[{"apiVersion":"a/b","kind":"K","name":"n","uid":"u"}]}}`, `{"metadata":{"ownerReferences":[{"apiVersion":"a","kind":"b/K","name":"n","uid":"u"}]}}`},
		{false, ``, `{"data":{"k":"v"},"metadata":{"annotations":{"configward.dev/break-glass":"INC-1"}}}`},
		{true, `{"type":"Opaque","data":{"p":"b25l"}}`, `{"type":"Opaque","stringData":{"p":"two"}}`},
		{true, `{"type":"kubernetes.io/tls","metadata":{"annotations":{"cert-manager.io/certificate-name":"c"}}}`, `{"type":"Opaque","metadata":{"annotations":{"cert-manager.io/certificate-name":"d","configward.dev/break-glass":" "}}}`},
		{true, `{"data":{"p":"b25l"},"stringData":{"p":"one"}}`, `{"data":{"p":"b25l"}}`},
	} {
		f.Add(s.secret, []byte(s.old), []byte(s.new), "alice")
	}

	pipeline := Identities{Users: []string{"ci"}}
	governed := Settings{Governed: true, Pipeline: pipeline}
	f.Fuzz(func(t *testing.T, secret bool, oldJSON, newJSON []byte, user string) {
		for _, in := range [][]byte{oldJSON, newJSON, []byte(user)} {
			if bytes.Contains(in, []byte("CANARY")) {
				t.Skip("the input holds the canary's text itself: a value found in a name could be the fuzzer's, not a leak")
			}
		}
		old, oldMeta := fuzzContent(secret, oldJSON, fuzzCanaryOld)
		new, newMeta := fuzzContent(secret, newJSON, fuzzCanaryNew)
		if new == nil {
			t.Skip("the new object is not a ConfigMap or Secret in JSON: change control only ever compares decoded objects")
		}

		changes := Changes(old, new)
		if again := Changes(old, new); !reflect.DeepEqual(changes, again) {
			t.Fatalf("not deterministic: %q then %q", changes, again)
		}
		seen := map[string]bool{}
		for _, c := range changes {
			if seen[c] {
				t.Errorf("%q named twice in %q", c, changes)
			}
			seen[c] = true
			if !knownChangeName(c) {
				t.Errorf("unexpected change name %q", c)
			}
			if strings.Contains(c, "CANARY") {
				t.Fatalf("a change name holds a value: %q", c)
			}
		}
		if old != nil {
			if !slices.Contains(changes, `data["`+fuzzCanaryKey+`"]`) {
				t.Fatalf("the planted value changed, and Changes says %q", changes)
			}
			delete(old.Data, fuzzCanaryKey)
			delete(new.Data, fuzzCanaryKey)
			changes = Changes(old, new)
			if same := sameContent(secret, old, new, oldMeta, newMeta); same != (len(changes) == 0) {
				t.Fatalf("equal by field: %v; Changes: %q", same, changes)
			}
			back := Changes(new, old)
			if !reflect.DeepEqual(changes, back) {
				t.Fatalf("not symmetric: %q one way, %q the other", changes, back)
			}
			old.Data[fuzzCanaryKey] = []byte(fuzzCanaryOld)
			new.Data[fuzzCanaryKey] = []byte(fuzzCanaryNew)
		}
		if self := Changes(new, new); len(self) != 0 {
			t.Fatalf("an object differs from itself: %q", self)
		}

		kind, op := "ConfigMap", "CREATE"
		if secret {
			kind = "Secret"
		}
		if old != nil {
			op = "UPDATE"
		}
		r := Request{Operation: op, User: authenticationv1.UserInfo{Username: user}, Kind: kind, Namespace: "ns", Name: "cfg", Old: old, New: new}
		v := Decide(governed, r)
		for _, fd := range v.Findings {
			if strings.Contains(fd.Message, "CANARY") || strings.Contains(fd.Path, "CANARY") {
				t.Fatalf("a finding holds a value: %+v", fd)
			}
		}
		if v.Exempt != "" || pipeline.Includes(r.User) {
			return
		}
		changed := Changes(old, new)
		refused := len(v.Findings) == 1 && v.Findings[0].Rule == rules.OutOfPipelineEdit
		switch {
		case len(changed) == 0 && (refused || v.BreakGlass != ""):
			t.Fatalf("nothing changed, yet %+v", v)
		case len(changed) > 0 && v.BreakGlass == "" && !refused:
			t.Fatalf("%q changed outside the pipeline without break-glass, yet %+v", changed, v)
		case v.BreakGlass != "" && (refused || v.BreakGlass != strings.TrimSpace(new.Annotations[v1alpha1.BreakGlassAnnotation])):
			t.Fatalf("break-glass %q: %+v", new.Annotations[v1alpha1.BreakGlassAnnotation], v)
		}
	})
}

// fuzzContent decodes raw as a ConfigMap or Secret and takes its content,
// with the canary planted; nil when raw does not decode.
func fuzzContent(secret bool, raw []byte, canary string) (*Content, *metav1.ObjectMeta) {
	if secret {
		var s corev1.Secret
		if json.Unmarshal(raw, &s) != nil {
			return nil, nil
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		delete(s.StringData, fuzzCanaryKey)
		s.Data[fuzzCanaryKey] = []byte(canary)
		return FromSecret(&s), &s.ObjectMeta
	}
	var cm corev1.ConfigMap
	if json.Unmarshal(raw, &cm) != nil {
		return nil, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[fuzzCanaryKey] = canary
	return FromConfigMap(&cm, []string{"schema-tier"}), &cm.ObjectMeta
}

// knownChangeName is true for the names Changes documents.
func knownChangeName(c string) bool {
	switch c {
	case "immutable", "type", "metadata.ownerReferences", "metadata.finalizers":
		return true
	}
	for _, prefix := range []string{`data[`, `binaryData[`, `metadata.annotations[`, `metadata.labels[`} {
		if strings.HasPrefix(c, prefix) && strings.HasSuffix(c, `]`) {
			return true
		}
	}
	return false
}

// sameContent compares two contents field by field, without Changes'
// encoding: owner references and finalizers as
// multisets (their order means nothing), and the governing annotations and labels by GoverningMetadata's
// selection applied to each key alone.
func sameContent(secret bool, a, b *Content, am, bm *metav1.ObjectMeta) bool {
	bytesEqual := func(x, y map[string][]byte) bool { return maps.EqualFunc(x, y, bytes.Equal) }
	if !bytesEqual(a.Data, b.Data) || !bytesEqual(a.BinaryData, b.BinaryData) || a.Immutable != b.Immutable || a.Type != b.Type {
		return false
	}
	governing := func(m *metav1.ObjectMeta) (map[string]string, map[string]string) {
		ann, lab := map[string]string{}, map[string]string{}
		for k, v := range m.Annotations {
			if governingKey(k, secret) {
				ann[k] = v
			}
		}
		for k, v := range m.Labels {
			if strings.HasPrefix(k, configwardPrefix) || k == "schema-tier" || (secret && strings.HasPrefix(k, "cert-manager.io/")) {
				lab[k] = v
			}
		}
		return ann, lab
	}
	aa, al := governing(am)
	ba, bl := governing(bm)
	if !maps.Equal(aa, ba) || !maps.Equal(al, bl) {
		return false
	}
	refs := func(m *metav1.ObjectMeta) map[string]int {
		out := map[string]int{}
		for _, r := range m.OwnerReferences {
			r.Controller = ptrTrue(r.Controller)
			r.BlockOwnerDeletion = ptrTrue(r.BlockOwnerDeletion)
			j, _ := json.Marshal(r)
			out[string(j)]++
		}
		return out
	}
	counted := func(s []string) map[string]int {
		out := map[string]int{}
		for _, x := range s {
			out[x]++
		}
		return out
	}
	return maps.Equal(refs(am), refs(bm)) && maps.Equal(counted(am.Finalizers), counted(bm.Finalizers))
}

// ptrTrue normalises a *bool to true or nil: unset and false mean the same.
func ptrTrue(p *bool) *bool {
	if p != nil && *p {
		return p
	}
	return nil
}
