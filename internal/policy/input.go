package policy

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/configward/configward/internal/refs"
)

// The input document is the contract with every rule, built-in or custom;
// policies/README.md documents it field by field. It is built as plain maps
// and converted once, which is much cheaper than a JSON round trip.

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
	// RolloutDisabled is true when the workload opted out of config-hash
	// rollouts (configward.dev/rollout: disabled).
	RolloutDisabled bool
}

// Target is what the inventory knows of a referenced object.
type Target struct {
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

// Value converts the input to the document the rules see.
func (in Input) Value() (ast.Value, error) {
	doc := map[string]any{
		"request": map[string]any{
			"operation":   in.Request.Operation,
			"user":        map[string]any{"username": in.Request.Username, "groups": anySlice(in.Request.Groups)},
			"dryRun":      in.Request.DryRun,
			"kind":        in.Request.Kind,
			"namespace":   in.Request.Namespace,
			"name":        in.Request.Name,
			"subResource": in.Request.SubResource,
		},
		"workload": map[string]any{
			"kind":            in.Workload.Kind,
			"namespace":       in.Workload.Namespace,
			"name":            in.Workload.Name,
			"rolloutDisabled": in.Workload.RolloutDisabled,
		},
	}
	for key, raw := range map[string][]byte{"object": in.Object, "oldObject": in.OldObject} {
		if len(raw) == 0 {
			doc[key] = nil
			continue
		}
		v, err := ast.ValueFromReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s is not valid JSON: %w", key, err)
		}
		doc[key] = v
	}
	references := make([]any, 0, len(in.References))
	for _, r := range in.References {
		var keys any // null means every key
		if r.Keys != nil {
			keys = anySlice(r.Keys)
		}
		references = append(references, map[string]any{
			"kind": string(r.Kind), "name": r.Name, "optional": r.Optional, "keys": keys,
			"via": string(r.Via), "path": r.Path,
			"container": r.Container, "containerType": string(r.ContainerType), "envPrefix": r.EnvPrefix,
			"volume": r.Volume, "mountFieldPath": r.MountFieldPath, "mountPath": r.MountPath,
			"subPath": r.SubPath, "subPathExpr": r.SubPathExpr, "readOnly": r.ReadOnly,
			"maxMode": int(r.MaxMode),
			"target": map[string]any{
				"exists": r.Target.Exists, "keys": anySlice(r.Target.Keys),
				"reload": r.Target.Reload, "immutable": r.Target.Immutable,
			},
		})
	}
	doc["references"] = references
	return ast.InterfaceToValue(doc)
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
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

// SortedKeys lists a digest map's keys, for Target.Keys.
func SortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
