package valueschema

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

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

	lines int // see lineCount; 0 until counted
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

// inText keeps a 1-based position inside raw, whose lines are counted as lineCol counts them.
// go-yaml places the empty value that ends a text ("?" as its last line, no newline after it) on
// the line after the last, which no editor shows: such a position becomes the end of the last
// line. An unknown position (0) stays unknown. Found by FuzzSchemaFormats.
func inText(raw []byte, line, col int) (int, int) {
	if line <= 0 {
		return line, col
	}
	if n := 1 + bytes.Count(raw, []byte{'\n'}); line > n {
		last := raw[bytes.LastIndexByte(raw, '\n')+1:]
		line, col = n, 1+utf8.RuneCount(bytes.TrimSuffix(last, []byte{'\r'}))
	}
	return line, col
}

// position returns the line and column for path: the value's position, or its key's when atKey.
// When path itself is not in the text, the nearest enclosing value's position is returned.
func (d *document) position(path []string, atKey bool) (int, int) {
	line, col := d.rawPosition(path, atKey)
	if line > d.lineCount() {
		return inText(d.raw, line, col)
	}
	return line, col
}

// lineCount is 1 + the number of \n in the text, counted once per document.
func (d *document) lineCount() int {
	if d.lines == 0 {
		d.lines = 1 + bytes.Count(d.raw, []byte{'\n'})
	}
	return d.lines
}

func (d *document) rawPosition(path []string, atKey bool) (int, int) {
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

func depthError(format string, line, col int) *parseError {
	return &parseError{line: line, col: col, expected: fmt.Sprintf("nesting at most %d levels deep", MaxDepth),
		found: fmt.Sprintf("more than %d levels", MaxDepth),
		msg:   fmt.Sprintf("invalid %s: nested deeper than %d levels", format, MaxDepth)}
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

// lineReader is shared by the simple line formats: properties, ini and env.
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
