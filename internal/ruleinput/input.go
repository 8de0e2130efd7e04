// Package ruleinput builds the input document of the Rego rules from a
// workload, its references and what is known of each target: the contract
// with every rule, built-in or custom, which policies/README.md documents
// field by field. It is built as Rego values directly, much cheaper than a
// JSON round trip.
package ruleinput

import (
	"bytes"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/configward/configward/internal/refs"
)

// Request describes the admission request.
type Request struct {
	Operation   string
	Username    string
	Groups      []string
	DryRun      bool
	Kind        string
	Namespace   string
	Name        string
	SubResource string
}

// Workload names the object whose pod spec the references come from.
type Workload struct {
	Kind, Namespace, Name string
	// RolloutDisabled is true when config-hash rollouts are off for the
	// workload: it opted out (configward.dev/rollout: disabled), or, at
	// admission, a ConfigPolicy turned them off in its namespace.
	RolloutDisabled bool
}

// Target is what the inventory knows of a referenced object.
type Target struct {
	// Known is false when nothing is known of the object: `configward
	// check` on a set of manifests that does not claim to be complete.
	// Admission always knows (the cache holds every object).
	Known     bool
	Exists    bool
	Keys      []string // key names only, never values
	Reload    string
	Immutable bool
}

// Reference is one use of a ConfigMap/Secret with its target's facts. Its
// paths are rooted at the workload (see RootPath).
type Reference struct {
	refs.Ref
	Target Target
}

// Input is everything a rule may look at.
type Input struct {
	Request    Request
	Object     []byte // JSON as received; nil when absent
	OldObject  []byte
	Workload   Workload
	References []Reference
}

// Value converts the input to the document the rules of version v see. It
// builds Rego values directly: going through map[string]any and
// ast.InterfaceToValue costs more than evaluating the rules.
func (in Input) Value(wantsObjects bool) (ast.Value, error) {
	req := in.Request
	doc := obj(
		item("request", obj(
			item("operation", strTerm(req.Operation)),
			item("user", obj(item("username", strTerm(req.Username)), item("groups", strs(req.Groups)))),
			item("dryRun", ast.InternedTerm(req.DryRun)),
			item("kind", strTerm(req.Kind)),
			item("namespace", strTerm(req.Namespace)),
			item("name", strTerm(req.Name)),
			item("subResource", strTerm(req.SubResource)),
		)),
		item("workload", obj(
			item("display", strTerm(in.Workload.Display())),
			item("kind", strTerm(in.Workload.Kind)),
			item("namespace", strTerm(in.Workload.Namespace)),
			item("name", strTerm(in.Workload.Name)),
			item("rolloutDisabled", ast.InternedTerm(in.Workload.RolloutDisabled)),
		)),
	)
	for key, raw := range map[string][]byte{"object": in.Object, "oldObject": in.OldObject} {
		if len(raw) == 0 || !wantsObjects {
			doc.Insert(keyTerm(key), ast.NullTerm())
			continue
		}
		val, err := ast.ValueFromReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s is not valid JSON: %w", key, err)
		}
		doc.Insert(keyTerm(key), ast.NewTerm(val))
	}
	references := make([]*ast.Term, 0, len(in.References))
	// The same reference terms again, by how they reach the container:
	// most rules look at one way only, and iterating a shorter list in Go's
	// order is cheaper than filtering every reference in every rule.
	var envRefs, volumeRefs []*ast.Term
	first := FirstOfSource(in.References)
	for i, r := range in.References {
		keys := ast.NullTerm() // every key
		if r.Keys != nil {
			keys = strs(r.Keys)
		}
		t := ast.NewTerm(obj(
			item("kind", strTerm(string(r.Kind))), item("name", strTerm(r.Name)),
			item("optional", ast.InternedTerm(r.Optional)), item("keys", keys),
			item("via", strTerm(string(r.Via))), item("path", strTerm(r.Path)),
			item("container", strTerm(r.Container)), item("containerType", strTerm(string(r.ContainerType))),
			item("envPrefix", strTerm(r.EnvPrefix)), item("volume", strTerm(r.Volume)),
			item("mountFieldPath", strTerm(r.MountFieldPath)), item("mountPath", strTerm(r.MountPath)),
			item("subPath", strTerm(r.SubPath)), item("subPathExpr", strTerm(r.SubPathExpr)),
			item("readOnly", ast.InternedTerm(r.ReadOnly)), item("maxMode", ast.InternedTerm(int(r.MaxMode))),
			item("display", strTerm(r.Display())),
			item("containerDisplay", strTerm(r.ContainerDisplay())),
			item("firstOfSource", ast.InternedTerm(first[i])),
			item("target", obj(
				item("known", ast.InternedTerm(r.Target.Known)),
				item("exists", ast.InternedTerm(r.Target.Exists)), item("keys", strs(r.Target.Keys)),
				item("reload", strTerm(r.Reload())), item("immutable", ast.InternedTerm(r.Target.Immutable)),
				item("missingKeys", strs(r.MissingKeys())),
			)),
		))
		references = append(references, t)
		switch r.Via {
		case refs.Env, refs.EnvFrom:
			envRefs = append(envRefs, t)
		case refs.Volume, refs.Projected, refs.CSI:
			volumeRefs = append(volumeRefs, t)
		}
	}
	doc.Insert(keyTerm("references"), ast.ArrayTerm(references...))
	doc.Insert(keyTerm("envReferences"), ast.ArrayTerm(envRefs...))
	doc.Insert(keyTerm("volumeReferences"), ast.ArrayTerm(volumeRefs...))
	return doc, nil
}

func obj(items ...[2]*ast.Term) ast.Object { return ast.NewObject(items...) }

// keyTerms holds one term per field name of the input document, created
// once: the same names repeat in every reference of every request. It is
// read-only after init.
var keyTerms = interned(
	"request", "operation", "user", "username", "groups", "dryRun", "kind", "namespace", "name",
	"subResource", "workload", "display", "rolloutDisabled", "object", "oldObject", "references",
	"envReferences", "volumeReferences",
	"optional", "keys", "via", "path", "container", "containerType", "envPrefix", "volume",
	"mountFieldPath", "mountPath", "subPath", "subPathExpr", "readOnly", "maxMode",
	"containerDisplay", "firstOfSource", "target", "known", "exists", "reload", "immutable", "missingKeys",
)

// valueTerms holds one term per string value that most references share
// (kinds, ways, container types, reload modes, the empty string), like
// keyTerms.
var valueTerms = interned("", "ConfigMap", "Secret", "SecretProviderClass", "Volume", "Projected", "CSI", "Env", "EnvFrom",
	"Regular", "Init", "Ephemeral", "rollout", "hot", "ignore")

func interned(values ...string) map[string]*ast.Term {
	m := make(map[string]*ast.Term, len(values))
	for _, s := range values {
		m[s] = ast.StringTerm(s)
	}
	return m
}

func keyTerm(k string) *ast.Term {
	if t, ok := keyTerms[k]; ok {
		return t
	}
	return ast.StringTerm(k)
}

func item(k string, v any) [2]*ast.Term {
	switch t := v.(type) {
	case *ast.Term:
		return ast.Item(keyTerm(k), t)
	case ast.Object:
		return ast.Item(keyTerm(k), ast.NewTerm(t))
	}
	panic(fmt.Sprintf("policy input: unexpected %T", v))
}

func strTerm(s string) *ast.Term {
	if t, ok := valueTerms[s]; ok {
		return t
	}
	return ast.StringTerm(s)
}

func strs(s []string) *ast.Term {
	ts := make([]*ast.Term, len(s))
	for i, v := range s {
		ts[i] = ast.StringTerm(v)
	}
	return ast.ArrayTerm(ts...)
}

// RootPath turns a Pod-rooted field path ("spec.volumes[0]") into one rooted
// at the workload ("spec.template.spec.volumes[0]"), given the dotted path
// of the workload's pod spec.
func RootPath(path, podSpecPath string) string {
	if path == "" || podSpecPath == "spec" {
		return path
	}
	if len(path) >= 4 && path[:4] == "spec" {
		return podSpecPath + path[4:]
	}
	return path
}
