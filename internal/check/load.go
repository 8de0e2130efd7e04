// Package check runs configward's admission rules offline, on manifests, so a
// CI pipeline gets the same answers before anything reaches the cluster.
package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	yamlnode "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/workload"
)

// Object is one manifest and where it was found.
type Object struct {
	File string
	// Line and Column are where the object starts: its document's first
	// line, or its entry in a List's items.
	Line, Column int
	Obj          client.Object
	// node is the object's YAML, kept so a finding can point at its field;
	// nil where only sigs.k8s.io/yaml could read the text (findings then
	// point at the object's start).
	node *yamlnode.Node
}

// InputError is unusable input: exit code 2.
type InputError struct{ Err error }

func (e InputError) Error() string { return e.Err.Error() }
func (e InputError) Unwrap() error { return e.Err }

// Load reads every manifest in paths: files, directories (*.yaml, *.yml,
// *.json, recursively) and "-" for stdin. Kinds configward does not know are
// skipped; a document that is not a Kubernetes object is an InputError.
func Load(paths []string, stdin io.Reader) ([]Object, error) {
	return LoadKinds(workload.Builtin(), paths, stdin)
}

// LoadKinds is Load that also reads the custom workload kinds declared in
// kinds, as unstructured objects (nil: the built-in kinds only).
func LoadKinds(kinds *workload.Registry, paths []string, stdin io.Reader) ([]Object, error) {
	decoder := declaredKinds{serializer.NewCodecFactory(scheme.Scheme()).UniversalDeserializer(), kinds}
	var out []Object
	for _, p := range paths {
		if p == "-" {
			raw, err := io.ReadAll(stdin)
			if err != nil {
				return nil, InputError{fmt.Errorf("reading stdin: %w", err)}
			}
			objs, err := decodeFile("<stdin>", raw, decoder)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
			continue
		}
		files, err := manifestFiles(p)
		if err != nil {
			return nil, InputError{err}
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, InputError{err}
			}
			objs, err := decodeFile(f, raw, decoder)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

func manifestFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// decodeFile splits a multi-document YAML (or JSON) file, keeping the line
// each document starts on.
func decodeFile(name string, raw []byte, decoder runtime.Decoder) ([]Object, error) {
	var out []Object
	for _, doc := range splitDocuments(raw) {
		if len(bytes.TrimSpace(stripComments(doc.text))) == 0 {
			continue
		}
		// sigs.k8s.io/yaml reads the document as kubectl does; the YAML
		// node tree is only for positions.
		js, err := yaml.YAMLToJSON(doc.text)
		if err != nil {
			return nil, InputError{fmt.Errorf("%s:%d: not valid YAML or JSON: %s", name, doc.line, yamlProblem(err))}
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		at := Object{File: name, Line: doc.line, Column: 1, node: parseNode(doc.text, doc.first-1)}
		if at.node != nil {
			at.Line, at.Column = at.node.Line, at.node.Column
		}
		objs, err := decodeManifest(js, at, decoder)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// yamlProblem is a YAML parser's error without the values some of its
// messages repeat: in a Secret they are secret, and check's errors go to CI
// logs. go-yaml quotes a whole map or list used as a key ("invalid map key:
// map[...]{"hunter2": ...}") and a value it cannot read as its tag says
// ("cannot decode !!str `hunter2` as a !!int"); sigs.k8s.io/yaml prints the
// value of a null key. Found by FuzzLoadManifests. Anchor names stay: they
// are syntax.
func yamlProblem(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "invalid map key"); i >= 0 {
		return msg[:i] + "a map or a list used as a key"
	}
	if strings.HasPrefix(msg, "unsupported map key") {
		return "yaml: a map key JSON cannot hold (such as null, ~)"
	}
	return yamlQuotedValue.ReplaceAllString(msg, "(value not shown)")
}

var yamlQuotedValue = regexp.MustCompile("`[^`]*`")

// listHeader is what tells a List from an object.
type listHeader struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Items      json.RawMessage `json:"items"` // "null" for items: null, nil when absent
}

// decodeManifest decodes one manifest, whose File, Line, Column and node are
// in at. A List (a kind ending in List with items, such as v1/List or
// ConfigMapList) is replaced by its items, as kubectl apply does, recursively;
// each item keeps its own position.
func decodeManifest(js []byte, at Object, decoder runtime.Decoder) ([]Object, error) {
	var list listHeader
	if json.Unmarshal(js, &list) == nil && strings.HasSuffix(list.Kind, "List") && list.Items != nil {
		var items []json.RawMessage
		if err := json.Unmarshal(list.Items, &items); err != nil {
			return nil, InputError{fmt.Errorf("%s:%d: %s: items is not a list", at.File, at.Line, list.Kind)}
		}
		itemNodes := sequence(child(at.node, "items"))
		// Positions only where both parsers saw the same items; otherwise
		// each item is reported at the List's start.
		if len(itemNodes) != len(items) {
			itemNodes = nil
		}
		var out []Object
		for i, item := range items {
			itemAt := Object{File: at.File, Line: at.Line, Column: at.Column}
			if itemNodes != nil {
				itemAt.node = itemNodes[i]
				itemAt.Line, itemAt.Column = itemAt.node.Line, itemAt.node.Column
			}
			itemJS, ok := withListKind(item, list)
			if !ok {
				return nil, InputError{fmt.Errorf("%s:%d: items[%d] of %s is not an object", at.File, itemAt.Line, i, list.Kind)}
			}
			objs, err := decodeManifest(itemJS, itemAt, decoder)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	}
	obj, gvk, err := decoder.Decode(js, nil, nil)
	if err != nil {
		switch {
		case runtime.IsNotRegisteredError(err):
			return nil, nil // a kind configward has no rules for
		case runtime.IsMissingKind(err), runtime.IsMissingVersion(err):
			// The decoder's message quotes the whole document, which may
			// be a Secret: say what is missing instead.
			return nil, InputError{fmt.Errorf("%s:%d: not a Kubernetes object: it has no kind or no apiVersion", at.File, at.Line)}
		}
		return nil, InputError{fmt.Errorf("%s:%d: not a Kubernetes object configward can read: %w", at.File, at.Line, err)}
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, InputError{fmt.Errorf("%s:%d: %s is not an object", at.File, at.Line, gvk)}
	}
	at.Obj = co
	return []Object{at}, nil
}

// declaredKinds decodes what the scheme knows as typed objects, and the
// declared custom kinds, which no scheme knows, as unstructured ones; other
// kinds stay not registered (and are skipped).
type declaredKinds struct {
	runtime.Decoder
	kinds *workload.Registry
}

func (d declaredKinds) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := d.Decoder.Decode(data, defaults, into)
	if err == nil || !runtime.IsNotRegisteredError(err) {
		return obj, gvk, err
	}
	u := &unstructured.Unstructured{}
	if json.Unmarshal(data, &u.Object) != nil {
		return obj, gvk, err
	}
	// SecretProviderClasses too: a CSI volume naming one the manifests
	// hold is not unknown.
	if t, ok := d.kinds.Type(u.GroupVersionKind().GroupKind()); (!ok || !t.Custom()) && u.GroupVersionKind().GroupKind() != secretversions.ClassKind.GroupKind() {
		return obj, gvk, err
	}
	declared := u.GroupVersionKind()
	return u, &declared, nil
}

// withListKind returns a List's item, with the List's apiVersion and its kind
// without "List" when the item names neither: the API server leaves them out
// of a typed list's items (a ConfigMapList's), and kubectl fills them in the
// same way. ok is false when the item is not an object.
func withListKind(item json.RawMessage, list listHeader) (js []byte, ok bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(item, &fields) != nil || fields == nil {
		return nil, false
	}
	unset := func(f string) bool { v := string(fields[f]); return v == "" || v == `""` || v == "null" }
	if !unset("kind") || !unset("apiVersion") {
		return item, true
	}
	fields["kind"], _ = json.Marshal(strings.TrimSuffix(list.Kind, "List"))
	fields["apiVersion"], _ = json.Marshal(list.APIVersion)
	js, err := json.Marshal(fields)
	return js, err == nil
}

type document struct {
	text  []byte
	first int // line of text's first line in the file
	line  int // line of its first line that is neither blank nor a comment
}

func splitDocuments(raw []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, n := 1, 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("---")) && len(bytes.TrimSpace(line[3:])) == 0 {
			docs = append(docs, document{append([]byte(nil), cur.Bytes()...), start, start})
			cur.Reset()
			start = n + 1
			continue
		}
		cur.Write(line)
		cur.WriteByte('\n')
	}
	docs = append(docs, document{cur.Bytes(), start, start})
	// Report the line of the first non-blank, non-comment line.
	for i := range docs {
		for _, l := range strings.Split(string(docs[i].text), "\n") {
			t := strings.TrimSpace(l)
			if t != "" && !strings.HasPrefix(t, "#") {
				break
			}
			docs[i].line++
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out.Write(l)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}
