package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
	"go.yaml.in/yaml/v3"
)

// document is a parsed value plus what is needed to find positions in its text.
type document struct {
	format Format
	raw    []byte
	value  any

	// YAML (and JSON, parsed lazily as YAML): the root content node.
	node       *yaml.Node
	nodeParsed bool

	// properties, ini, env: JSON pointer -> position of the key (or section header).
	// TOML: filled lazily from the AST.
	positions map[string]position
}

type position struct{ line, col int }

// parseError is a value that does not parse (or is too hostile to parse).
type parseError struct {
	pointer   string
	line, col int
	expected  string
	found     string
	msg       string
}

func parse(f Format, raw []byte) (*document, *parseError) {
	if !utf8.Valid(raw) {
		off := invalidUTF8Offset(raw)
		line, col := lineCol(raw, off)
		return nil, &parseError{
			line: line, col: col, expected: "valid UTF-8",
			found: fmt.Sprintf("invalid byte 0x%02x at offset %d", raw[off], off),
			msg:   fmt.Sprintf("value is not valid UTF-8 text (invalid byte 0x%02x at offset %d); a %s value must be UTF-8", raw[off], off, formatName(f)),
		}
	}
	d := &document{format: f, raw: raw}
	var perr *parseError
	switch f {
	case JSON:
		perr = d.parseJSON()
	case YAML:
		perr = d.parseYAML()
	case TOML:
		perr = d.parseTOML()
	case Properties:
		perr = d.parseProperties()
	case INI:
		perr = d.parseINI()
	case Env:
		perr = d.parseEnv()
	default:
		d.value = string(raw)
	}
	if perr != nil {
		return nil, perr
	}
	return d, nil
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return 0
}

// lineCol converts a byte offset to a 1-based line and a 1-based column counted in runes.
func lineCol(b []byte, off int) (int, int) {
	if off > len(b) {
		off = len(b)
	}
	line := 1 + bytes.Count(b[:off], []byte{'\n'})
	start := bytes.LastIndexByte(b[:off], '\n') + 1
	return line, 1 + utf8.RuneCount(b[start:off])
}

// ---- JSON

func (d *document) parseJSON() *parseError {
	dec := json.NewDecoder(bytes.NewReader(d.raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		// Exactly one JSON value.
		off := int(dec.InputOffset())
		if _, err2 := dec.Token(); err2 != io.EOF {
			line, col := lineCol(d.raw, skipSpace(d.raw, off))
			return &parseError{line: line, col: col, expected: "valid JSON", found: "data after the JSON value",
				msg: "invalid JSON: unexpected data after the top-level value"}
		}
	}
	if err != nil {
		var se *json.SyntaxError
		line, col := 0, 0
		if strings.Contains(err.Error(), "exceeded max depth") {
			return depthError("JSON", 0, 0)
		}
		if errors.As(err, &se) {
			// Offset counts the offending byte; point at it.
			line, col = lineCol(d.raw, max(0, int(se.Offset)-1))
		} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			line, col = lineCol(d.raw, len(d.raw))
			err = errors.New("unexpected end of JSON input")
		}
		return &parseError{line: line, col: col, expected: "valid JSON", found: truncate(err.Error(), 40),
			msg: "invalid JSON: " + err.Error()}
	}
	if tooDeep(v, 0, nil) != nil {
		return depthError("JSON", 0, 0)
	}
	d.value = v
	return nil
}

func depthError(format string, line, col int) *parseError {
	return &parseError{line: line, col: col, expected: fmt.Sprintf("nesting at most %d levels deep", MaxDepth),
		found: fmt.Sprintf("more than %d levels", MaxDepth),
		msg:   fmt.Sprintf("invalid %s: nested deeper than %d levels", format, MaxDepth)}
}

func skipSpace(b []byte, off int) int {
	for off < len(b) && (b[off] == ' ' || b[off] == '\t' || b[off] == '\r' || b[off] == '\n') {
		off++
	}
	return off
}

// tooDeep returns the path to the first point nested deeper than MaxDepth, or nil.
func tooDeep(v any, depth int, path []string) []string {
	if depth > MaxDepth {
		return append([]string{}, path...)
	}
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if p := tooDeep(c, depth+1, append(path, k)); p != nil {
				return p
			}
		}
	case []any:
		for i, c := range v {
			if p := tooDeep(c, depth+1, append(path, strconv.Itoa(i))); p != nil {
				return p
			}
		}
	}
	return nil
}

// ---- YAML

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
	b := &yamlBuilder{cache: map[*yaml.Node]built{}}
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
	cache       map[*yaml.Node]built
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

// ---- TOML

func (d *document) parseTOML() *parseError {
	var m map[string]any
	if err := toml.Unmarshal(d.raw, &m); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			msg := de.Error()
			if k := de.Key(); len(k) > 0 {
				msg += fmt.Sprintf(" (key %s)", strings.Join(k, "."))
			}
			return &parseError{line: line, col: col, expected: "valid TOML", found: truncate(de.Error(), 40),
				msg: "invalid TOML: " + msg}
		}
		return &parseError{expected: "valid TOML", found: truncate(err.Error(), 40), msg: "invalid TOML: " + err.Error()}
	}
	v := tomlValue(m)
	if tooDeep(v, 0, nil) != nil {
		return depthError("TOML", 0, 0)
	}
	d.value = v
	return nil
}

// tomlValue converts go-toml's values to JSON-like ones: dates and times become their TOML text
// (RFC 3339 for offset date-times), so a schema can check them with "format".
func tomlValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			x[k] = tomlValue(c)
		}
		return x
	case []any:
		for i, c := range x {
			x[i] = tomlValue(c)
		}
		return x
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case toml.LocalDate:
		return x.String()
	case toml.LocalTime:
		return x.String()
	case toml.LocalDateTime:
		return x.String()
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	}
	return v
}

// ---- properties, ini, env: simple line formats

type lineReader struct {
	lines []string
	offs  []int // byte offset of each line
}

func newLineReader(raw []byte) *lineReader {
	s := string(raw)
	lr := &lineReader{}
	off := 0
	for {
		i := strings.IndexByte(s, '\n')
		line := s
		if i >= 0 {
			line = s[:i]
		}
		lr.lines = append(lr.lines, strings.TrimSuffix(line, "\r"))
		lr.offs = append(lr.offs, off)
		if i < 0 {
			break
		}
		s = s[i+1:]
		off += i + 1
	}
	return lr
}

// col converts a byte index in line i to a 1-based rune column.
func (lr *lineReader) col(i, byteIdx int) int {
	return 1 + utf8.RuneCountInString(lr.lines[i][:byteIdx])
}

func leadingSpace(s string, set string) int {
	i := 0
	for i < len(s) && strings.IndexByte(set, s[i]) >= 0 {
		i++
	}
	return i
}

func (d *document) lineError(f Format, line, col int, found, msg string) *parseError {
	return &parseError{line: line, col: col, expected: "valid " + formatName(f), found: found, msg: "invalid " + formatName(f) + ": " + msg}
}

// parseProperties reads Java .properties: key=value, key:value or key value; # and ! comments;
// a line ending in an odd number of backslashes continues on the next; \t \n \r \f \uXXXX
// escapes. Later duplicates win.
func (d *document) parseProperties() *parseError {
	lr := newLineReader(d.raw)
	m := map[string]any{}
	d.positions = map[string]position{}
	const ws = " \t\f"
	for i := 0; i < len(lr.lines); i++ {
		line := lr.lines[i]
		start := leadingSpace(line, ws)
		rest := line[start:]
		if rest == "" || rest[0] == '#' || rest[0] == '!' {
			continue
		}
		lineNo, col := i+1, lr.col(i, start)
		logical := rest
		for endsWithContinuation(logical) && i+1 < len(lr.lines) {
			i++
			next := lr.lines[i]
			logical = logical[:len(logical)-1] + next[leadingSpace(next, ws):]
		}
		if endsWithContinuation(logical) {
			logical = logical[:len(logical)-1]
		}
		// Key: up to the first unescaped separator.
		k := 0
		for k < len(logical) {
			c := logical[k]
			if c == '\\' {
				k += 2
				continue
			}
			if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
				break
			}
			k++
		}
		if k > len(logical) {
			k = len(logical)
		}
		rawKey, val := logical[:k], logical[k:]
		val = val[leadingSpace(val, ws):]
		if val != "" && (val[0] == '=' || val[0] == ':') {
			val = val[1:]
			val = val[leadingSpace(val, ws):]
		}
		key, err := unescapeProperties(rawKey)
		if err != nil {
			return d.lineError(Properties, lineNo, col, truncate(rawKey, 40), err.Error())
		}
		value, err := unescapeProperties(val)
		if err != nil {
			return d.lineError(Properties, lineNo, col, truncate(val, 40), err.Error())
		}
		m[key] = value
		d.positions[pointer([]string{key})] = position{lineNo, col}
	}
	d.value = m
	return nil
}

func endsWithContinuation(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func unescapeProperties(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uxxxx escape in %q`, truncate(s, 40))
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uxxxx escape in %q`, truncate(s, 40))
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// parseINI reads INI: [section] headers, key = value or key: value, ; and # comment lines.
// Keys before any section are top-level members; each section is an object of strings.
// Values are trimmed and kept verbatim (no inline comments, no quote removal). Repeated sections
// merge; later keys win.
func (d *document) parseINI() *parseError {
	lr := newLineReader(d.raw)
	m := map[string]any{}
	d.positions = map[string]position{}
	var section map[string]any
	var sectionName string
	for i, line := range lr.lines {
		start := leadingSpace(line, " \t")
		rest := strings.TrimRight(line[start:], " \t")
		if rest == "" || rest[0] == ';' || rest[0] == '#' {
			continue
		}
		lineNo, col := i+1, lr.col(i, start)
		if rest[0] == '[' {
			if !strings.HasSuffix(rest, "]") {
				return d.lineError(INI, lineNo, col, truncate(rest, 40), "section header must end with ]")
			}
			name := strings.TrimSpace(rest[1 : len(rest)-1])
			if name == "" {
				return d.lineError(INI, lineNo, col, truncate(rest, 40), "empty section name")
			}
			switch existing := m[name].(type) {
			case map[string]any:
				section = existing
			case nil:
				section = map[string]any{}
				m[name] = section
				d.positions[pointer([]string{name})] = position{lineNo, col}
			default:
				return d.lineError(INI, lineNo, col, truncate(rest, 40), fmt.Sprintf("section [%s] has the name of a top-level key", name))
			}
			sectionName = name
			continue
		}
		sep := strings.IndexAny(rest, "=:")
		if sep < 0 {
			return d.lineError(INI, lineNo, col, truncate(rest, 40), fmt.Sprintf("line %d: expected key = value or [section]", lineNo))
		}
		key := strings.TrimSpace(rest[:sep])
		value := strings.TrimSpace(rest[sep+1:])
		if key == "" {
			return d.lineError(INI, lineNo, col, truncate(rest, 40), fmt.Sprintf("line %d: empty key", lineNo))
		}
		if section == nil {
			m[key] = value
			d.positions[pointer([]string{key})] = position{lineNo, col}
		} else {
			section[key] = value
			d.positions[pointer([]string{sectionName, key})] = position{lineNo, col}
		}
	}
	d.value = m
	return nil
}

// parseEnv reads dotenv: KEY=VALUE lines, an optional `export ` prefix, # comment lines,
// "double-quoted" values with \n \r \t \" \\ escapes, 'single-quoted' literal values (both may
// span lines), and unquoted values whose ` #` starts a comment. Later duplicates win.
func (d *document) parseEnv() *parseError {
	lr := newLineReader(d.raw)
	m := map[string]any{}
	d.positions = map[string]position{}
	for i := 0; i < len(lr.lines); i++ {
		line := lr.lines[i]
		start := leadingSpace(line, " \t")
		rest := line[start:]
		if rest == "" || rest[0] == '#' {
			continue
		}
		if after, ok := strings.CutPrefix(rest, "export"); ok && after != "" && (after[0] == ' ' || after[0] == '\t') {
			n := leadingSpace(after, " \t")
			start += len("export") + n
			rest = after[n:]
		}
		lineNo, col := i+1, lr.col(i, start)
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return d.lineError(Env, lineNo, col, truncate(rest, 40), fmt.Sprintf("line %d: expected KEY=VALUE", lineNo))
		}
		key := strings.TrimRight(rest[:eq], " \t")
		if !validEnvKey(key) {
			return d.lineError(Env, lineNo, col, truncate(key, 40), fmt.Sprintf("line %d: %q is not a valid variable name (letters, digits, _ and ., not starting with a digit)", lineNo, key))
		}
		val := rest[eq+1:]
		val = val[leadingSpace(val, " \t"):]
		var value string
		if val != "" && (val[0] == '"' || val[0] == '\'') {
			q := val[0]
			var b strings.Builder
			body := val[1:]
			closed := false
			for !closed {
				j := 0
				for ; j < len(body); j++ {
					c := body[j]
					if c == q {
						closed = true
						break
					}
					if q == '"' && c == '\\' && j+1 < len(body) {
						j++
						switch body[j] {
						case 'n':
							b.WriteByte('\n')
						case 'r':
							b.WriteByte('\r')
						case 't':
							b.WriteByte('\t')
						default:
							b.WriteByte(body[j])
						}
						continue
					}
					b.WriteByte(c)
				}
				if closed {
					tail := strings.TrimSpace(body[j+1:])
					if tail != "" && tail[0] != '#' {
						return d.lineError(Env, i+1, 0, truncate(tail, 40), fmt.Sprintf("line %d: unexpected text after the closing quote", i+1))
					}
					break
				}
				if i+1 >= len(lr.lines) {
					return d.lineError(Env, lineNo, col, truncate(val, 40), fmt.Sprintf("line %d: unterminated quoted value", lineNo))
				}
				b.WriteByte('\n')
				i++
				body = lr.lines[i]
			}
			value = b.String()
		} else {
			if j := strings.Index(val, " #"); j >= 0 {
				val = val[:j]
			} else if j := strings.Index(val, "\t#"); j >= 0 {
				val = val[:j]
			}
			value = strings.TrimSpace(val)
		}
		m[key] = value
		d.positions[pointer([]string{key})] = position{lineNo, col}
	}
	d.value = m
	return nil
}

func validEnvKey(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ---- positions

// position returns the line and column for path: the value's position, or its key's when atKey.
// When path itself is not in the text, the nearest enclosing value's position is returned.
func (d *document) position(path []string, atKey bool) (int, int) {
	switch d.format {
	case YAML, JSON:
		val, key, _ := yamlPosition(d.yamlNode(), path)
		if atKey {
			return key.line, key.col
		}
		return val.line, val.col
	case TOML:
		if d.positions == nil {
			d.positions = tomlPositions(d.raw)
		}
	case Text:
		if len(path) == 0 && len(d.raw) > 0 {
			return 1, 1
		}
		return 0, 0
	}
	for n := len(path); n >= 0; n-- {
		if p, ok := d.positions[pointer(path[:n])]; ok {
			return p.line, p.col
		}
	}
	return 0, 0
}

// tomlPositions maps the JSON pointer of every key, table and array element of a TOML document
// to the position of its key (or of the element) in the text.
func tomlPositions(raw []byte) map[string]position {
	pos := map[string]position{}
	var p unstable.Parser
	p.Reset(raw)
	at := func(r unstable.Range) position {
		if r.Length == 0 && r.Offset == 0 {
			return position{}
		}
		l, c := lineCol(raw, int(r.Offset))
		return position{l, c}
	}
	arrayIndex := map[string]int{} // pointer of an array table -> its last index
	// resolve turns key parts into a pointer path, stepping into the last element of any array
	// table along the way.
	resolve := func(parts []string) []string {
		var out []string
		for _, k := range parts {
			out = append(out, k)
			if idx, ok := arrayIndex[pointer(out)]; ok {
				out = append(out, strconv.Itoa(idx))
			}
		}
		return out
	}
	var table []string
	var walkValue func(v *unstable.Node, path []string, depth int)
	var walkKV func(kv *unstable.Node, base []string, depth int)
	walkValue = func(v *unstable.Node, path []string, depth int) {
		if depth > MaxDepth {
			return
		}
		switch v.Kind {
		case unstable.Array:
			i := 0
			it := v.Children()
			for it.Next() {
				c := it.Node()
				if c.Kind == unstable.Comment {
					continue
				}
				ep := append(append([]string{}, path...), strconv.Itoa(i))
				if r := c.Raw; r.Length > 0 {
					pos[pointer(ep)] = at(r)
				}
				walkValue(c, ep, depth+1)
				i++
			}
		case unstable.InlineTable:
			it := v.Children()
			for it.Next() {
				if c := it.Node(); c.Kind == unstable.KeyValue {
					walkKV(c, path, depth+1)
				}
			}
		}
	}
	walkKV = func(kv *unstable.Node, base []string, depth int) {
		path := append([]string{}, base...)
		var first position
		it := kv.Key()
		for it.Next() {
			k := it.Node()
			if len(path) == len(base) {
				first = at(k.Raw)
			}
			path = append(path, string(k.Data))
			if _, ok := pos[pointer(path)]; !ok {
				pos[pointer(path)] = first
			}
		}
		pos[pointer(path)] = first
		walkValue(kv.Value(), path, depth)
	}
	keyParts := func(n *unstable.Node) ([]string, position) {
		var parts []string
		var first position
		it := n.Key()
		for it.Next() {
			k := it.Node()
			if parts == nil {
				first = at(k.Raw)
			}
			parts = append(parts, string(k.Data))
		}
		return parts, first
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			parts, first := keyParts(e)
			table = resolve(parts)
			if _, ok := pos[pointer(table)]; !ok {
				pos[pointer(table)] = first
			}
		case unstable.ArrayTable:
			parts, first := keyParts(e)
			arr := append(resolve(parts[:len(parts)-1]), parts[len(parts)-1])
			ap := pointer(arr)
			idx := 0
			if last, ok := arrayIndex[ap]; ok {
				idx = last + 1
			}
			arrayIndex[ap] = idx
			if _, ok := pos[ap]; !ok {
				pos[ap] = first
			}
			table = append(arr, strconv.Itoa(idx))
			pos[pointer(table)] = first
		case unstable.KeyValue:
			walkKV(e, table, 0)
		}
	}
	return pos
}

// pointer renders a JSON pointer (RFC 6901).
func pointer(path []string) string {
	if len(path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range path {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
		}
		b.WriteString(t)
	}
	return b.String()
}
