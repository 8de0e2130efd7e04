package valueschema

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

func (d *document) parseYAML() *parseError {
	dec := yaml.NewDecoder(bytes.NewReader(d.raw))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if err == io.EOF {
		d.value = nil // an empty document is null
		d.nodeParsed = true
		return nil
	}
	if err != nil {
		return yamlError(err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); err != io.EOF {
		if err != nil {
			return yamlError(err)
		}
		return &parseError{line: second.Line, col: second.Column, expected: "a single YAML document",
			found: "more than one document", msg: "invalid YAML: the value holds more than one YAML document (---); use one"}
	}
	d.nodeParsed = true
	if len(doc.Content) == 0 {
		return nil
	}
	d.node = doc.Content[0]
	b := &yamlBuilder{cache: map[*yaml.Node]built{}, building: map[*yaml.Node]bool{}}
	v, _, perr := b.build(d.node, 0, nil)
	if perr != nil {
		return perr
	}
	d.value = v
	return nil
}

// yamlError turns a go-yaml error into a parse error, keeping its line when it has one.
func yamlError(err error) *parseError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.Contains(msg, "exceeded max depth") {
		return depthError("YAML", 0, 0)
	}
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &parseError{line: line, expected: "valid YAML", found: truncate(msg, 40), msg: "invalid YAML: " + msg}
}

type built struct {
	v    any
	size int
}

// yamlBuilder turns a yaml.Node tree into a JSON-like value. Aliases reuse the value built for
// their anchor, and the number of nodes they stand for is counted against MaxAliasNodes, so an
// alias bomb costs neither time nor memory.
type yamlBuilder struct {
	cache map[*yaml.Node]built
	// building holds the anchored collections being built. An alias to one
	// is a cycle: "a: &a {<<: *a}" recursed without end (merges do not add
	// depth), overflowing the stack, which kills the process. Found by
	// FuzzSchemaFormats.
	building    map[*yaml.Node]bool
	aliasBudget int
}

func (b *yamlBuilder) build(n *yaml.Node, depth int, path []string) (any, int, *parseError) {
	if depth > MaxDepth {
		return nil, 0, depthError("YAML", n.Line, n.Column)
	}
	switch n.Kind {
	case yaml.AliasNode:
		target := n.Alias
		if target == nil {
			return nil, 0, &parseError{line: n.Line, col: n.Column, expected: "valid YAML", found: "unknown alias", msg: "invalid YAML: unknown alias"}
		}
		if b.building[target] {
			return nil, 0, &parseError{pointer: pointer(path), line: n.Line, col: n.Column,
				expected: "an alias to a value that does not contain it", found: "*" + truncate(n.Value, 30),
				msg: fmt.Sprintf("invalid YAML: alias *%s refers to a value that contains it", truncate(n.Value, 40))}
		}
		bt, ok := b.cache[target]
		if !ok {
			v, size, perr := b.build(target, depth, path)
			if perr != nil {
				return nil, 0, perr
			}
			bt = built{v, size}
		}
		b.aliasBudget += bt.size
		if b.aliasBudget > MaxAliasNodes {
			return nil, 0, &parseError{pointer: pointer(path), line: n.Line, col: n.Column,
				expected: fmt.Sprintf("aliases expanding to at most %d nodes", MaxAliasNodes), found: "excessive aliasing",
				msg: fmt.Sprintf("invalid YAML: aliases expand to more than %d nodes; use fewer aliases", MaxAliasNodes)}
		}
		// The depth of the expanded value counts too.
		if tooDeep(bt.v, depth, path) != nil {
			return nil, 0, depthError("YAML", n.Line, n.Column)
		}
		return bt.v, bt.size, nil
	case yaml.ScalarNode:
		v, perr := yamlScalar(n, path)
		if perr != nil {
			return nil, 0, perr
		}
		size := 1 + len(n.Value)/64 // long strings weigh more: validating them costs more
		b.remember(n, v, size)
		return v, size, nil
	case yaml.SequenceNode:
		if n.Anchor != "" {
			b.building[n] = true
			defer delete(b.building, n)
		}
		arr := make([]any, 0, len(n.Content))
		size := 1
		for i, c := range n.Content {
			v, s, perr := b.build(c, depth+1, append(path, strconv.Itoa(i)))
			if perr != nil {
				return nil, 0, perr
			}
			arr = append(arr, v)
			size += s
		}
		b.remember(n, arr, size)
		return arr, size, nil
	case yaml.MappingNode:
		if n.Anchor != "" {
			b.building[n] = true
			defer delete(b.building, n)
		}
		m := make(map[string]any, len(n.Content)/2)
		size := 1
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if isMerge(k) {
				merges = append(merges, val)
				continue
			}
			if k.Kind != yaml.ScalarNode {
				return nil, 0, &parseError{pointer: pointer(path), line: k.Line, col: k.Column, expected: "a scalar mapping key",
					found: "a " + kindName(k.Kind) + " as key", msg: "invalid YAML: mapping keys must be scalars to be checked against a JSON Schema"}
			}
			v, s, perr := b.build(val, depth+1, append(path, k.Value))
			if perr != nil {
				return nil, 0, perr
			}
			m[k.Value] = v
			size += s
		}
		// Merge keys (<<): explicit keys win; earlier merged maps win over later ones.
		for _, mv := range merges {
			srcs := []*yaml.Node{mv}
			if mv.Kind == yaml.SequenceNode {
				srcs = mv.Content
			}
			for _, src := range srcs {
				v, s, perr := b.build(src, depth, path)
				if perr != nil {
					return nil, 0, perr
				}
				sm, ok := v.(map[string]any)
				if !ok {
					return nil, 0, &parseError{pointer: pointer(path), line: src.Line, col: src.Column, expected: "a mapping to merge",
						found: describe(v), msg: "invalid YAML: the merge key << needs a mapping or a list of mappings"}
				}
				for k, x := range sm {
					if _, exists := m[k]; !exists {
						m[k] = x
					}
				}
				size += s
			}
		}
		b.remember(n, m, size)
		return m, size, nil
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, 1, nil
		}
		return b.build(n.Content[0], depth, path)
	}
	return nil, 0, &parseError{line: n.Line, col: n.Column, expected: "valid YAML", found: "unknown node", msg: "invalid YAML: unknown node kind"}
}

func (b *yamlBuilder) remember(n *yaml.Node, v any, size int) {
	if n.Anchor != "" {
		b.cache[n] = built{v, size}
	}
}

func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "!!merge" || k.Tag == "tag:yaml.org,2002:merge" || k.ShortTag() == "!!merge")
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	default:
		return "scalar"
	}
}

func yamlScalar(n *yaml.Node, path []string) (any, *parseError) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		switch strings.ToLower(n.Value) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return i, nil
		}
	case "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	default:
		if !strings.HasPrefix(n.ShortTag(), "!!") {
			return n.Value, nil // application-specific tag: keep the text
		}
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, &parseError{pointer: pointer(path), line: n.Line, col: n.Column, expected: "valid YAML",
			found: truncate(n.Value, 40), msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, &parseError{pointer: pointer(path), line: n.Line, col: n.Column, expected: "a finite number",
				found: truncate(n.Value, 40), msg: fmt.Sprintf("invalid YAML for JSON Schema: %s is not a finite number; quote it if it is a string", n.Value)}
		}
	case time.Time:
		return n.Value, nil
	case []byte:
		return string(x), nil
	}
	return v, nil
}

// yamlNode returns the root node of the value's text parsed as YAML, or nil.
func (d *document) yamlNode() *yaml.Node {
	if !d.nodeParsed {
		d.nodeParsed = true
		var doc yaml.Node
		if err := yaml.Unmarshal(d.raw, &doc); err == nil && len(doc.Content) > 0 {
			d.node = doc.Content[0]
		}
	}
	return d.node
}

// yamlPosition finds the node at path. It returns the position of the value, of its key
// (for a mapping member; else the value's), and whether the whole path was found.
func yamlPosition(root *yaml.Node, path []string) (val, key position, found bool) {
	n := root
	if n == nil {
		return position{}, position{}, false
	}
	val = position{n.Line, n.Column}
	key = val
	for _, tok := range path {
		for hops := 0; n.Kind == yaml.AliasNode && n.Alias != nil && hops < 100; hops++ {
			n = n.Alias
		}
		var next, keyNode *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			keyNode, next = mappingLookup(n, tok, 0)
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return val, key, false
		}
		n = next
		val = position{n.Line, n.Column}
		key = val
		if keyNode != nil {
			key = position{keyNode.Line, keyNode.Column}
		}
	}
	return val, key, true
}

func mappingLookup(n *yaml.Node, tok string, hops int) (keyNode, val *yaml.Node) {
	if hops > 100 {
		return nil, nil
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil && hops < 100 {
		n = n.Alias
		hops++
	}
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if isMerge(k) {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if k.Kind == yaml.ScalarNode && k.Value == tok {
			return k, n.Content[i+1]
		}
	}
	for _, m := range merges {
		for m.Kind == yaml.AliasNode && m.Alias != nil && hops < 100 {
			m = m.Alias
			hops++
		}
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = m.Content
		}
		for _, s := range srcs {
			if k, v := mappingLookup(s, tok, hops+1); v != nil {
				return k, v
			}
		}
	}
	return nil, nil
}
