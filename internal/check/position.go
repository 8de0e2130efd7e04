package check

import (
	"strconv"
	"strings"

	yamlnode "go.yaml.in/yaml/v3"
)

// parseNode parses one document of a file for positions and returns its
// root, with lines counted from the file's start (the document's text
// starts after lineOffset lines). nil when the text is not YAML go-yaml v3
// reads; check then reports the document's start for its findings.
func parseNode(text []byte, lineOffset int) *yamlnode.Node {
	var doc yamlnode.Node
	if yamlnode.Unmarshal(text, &doc) != nil || doc.Kind != yamlnode.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	// Content holds every node once (an alias is a node of its own that
	// points at its anchor), so each is shifted once.
	for stack := []*yamlnode.Node{doc.Content[0]}; len(stack) > 0; {
		n := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], n.Content...)
		n.Line += lineOffset
	}
	return doc.Content[0]
}

// position is where a finding's field is written: the line and column of
// the node at its path (for "spec.containers[0].env[1].valueFrom" the key
// valueFrom, for "spec.containers[0]" the first item), or of its nearest
// ancestor that the manifest writes (a rule may name a field left to its
// default), or the object's start.
func (o Object) position(path string) (line, column int) {
	if o.node == nil {
		return o.Line, o.Column
	}
	mark, value := o.node, o.node
	for _, s := range pathSteps(path) {
		k, v := step(value, s)
		if v == nil {
			break
		}
		mark, value = k, v
	}
	return mark.Line, mark.Column
}

// pathStep is one step of a field path: a key, or an index into a list.
type pathStep struct {
	key   string // "containers", or the text inside [] ("0", "app.yaml")
	index int    // the index for [N], else -1
}

// pathSteps splits a path such as "spec.containers[0].env" or
// "data[app.yaml]": dots separate keys; brackets hold an index or a key
// (which may contain dots). A malformed tail is dropped, so the path's
// known part still points somewhere.
func pathSteps(path string) []pathStep {
	var steps []pathStep
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return steps
			}
			s := pathStep{key: path[1:end], index: -1}
			if i, err := strconv.Atoi(s.key); err == nil && i >= 0 {
				s.index = i
			}
			steps = append(steps, s)
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			steps = append(steps, pathStep{key: path[:end], index: -1})
			path = path[end:]
		}
	}
	return steps
}

// step goes one step down from n: mark is the node to point at (a mapping's
// key, a list's item), value the node to go on from. Both nil when there is
// no such field.
func step(n *yamlnode.Node, s pathStep) (mark, value *yamlnode.Node) {
	n = resolve(n)
	switch {
	case n == nil:
	case n.Kind == yamlnode.SequenceNode && s.index >= 0 && s.index < len(n.Content):
		return n.Content[s.index], resolve(n.Content[s.index])
	case n.Kind == yamlnode.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value == s.key && k.Tag != "!!merge" {
				return k, resolve(n.Content[i+1])
			}
		}
		// A key not written here may come from a merge (<<: *defaults);
		// point at it where the anchor writes it.
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Tag != "!!merge" {
				continue
			}
			merged := resolve(n.Content[i+1])
			sources := []*yamlnode.Node{merged}
			if merged != nil && merged.Kind == yamlnode.SequenceNode {
				sources = merged.Content
			}
			for _, src := range sources {
				if k, v := step(src, s); v != nil {
					return k, v
				}
			}
		}
	}
	return nil, nil
}

// child is the value of key in a mapping node, or nil.
func child(n *yamlnode.Node, key string) *yamlnode.Node {
	_, v := step(n, pathStep{key: key, index: -1})
	return v
}

// sequence is the items of a list node, or nil.
func sequence(n *yamlnode.Node) []*yamlnode.Node {
	if n = resolve(n); n == nil || n.Kind != yamlnode.SequenceNode {
		return nil
	}
	return n.Content
}

// resolve follows an alias (*name) to the node its anchor names.
func resolve(n *yamlnode.Node) *yamlnode.Node {
	for n != nil && n.Kind == yamlnode.AliasNode {
		n = n.Alias
	}
	return n
}
