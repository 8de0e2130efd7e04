package valueschema

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

func (d *document) parseTOML() *parseError {
	var m map[string]any
	if err := toml.Unmarshal(d.raw, &m); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			line, col = tomlRuneColumn(d.raw, line, col)
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

// tomlRuneColumn converts go-toml's error column, which counts bytes, to the runes this package
// counts (see lineCol): after "é" a column was one too far, past the line's end for an error at
// it. Found by FuzzSchemaFormats.
func tomlRuneColumn(raw []byte, line, col int) (int, int) {
	if line < 1 || col < 1 {
		return line, col
	}
	start := 0
	for i := 1; i < line; i++ {
		j := bytes.IndexByte(raw[start:], '\n')
		if j < 0 {
			return line, col
		}
		start += j + 1
	}
	off := min(start+col-1, len(raw))
	// A column inside a multi-byte rune is that rune's (a7da6b902bfc4beb).
	for off > start && off < len(raw) && !utf8.RuneStart(raw[off]) {
		off--
	}
	// The \n of a \r\n ends the line where its \r does: an editor shows
	// no column between them (3a2be13bf7fa2ce4).
	if off < len(raw) && raw[off] == '\n' && off > start && raw[off-1] == '\r' {
		off--
	}
	return lineCol(raw, off)
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
