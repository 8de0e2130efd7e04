// JSON positions are not taken from encoding/json: position() finds them by parsing the same
// text as YAML (see yamlPosition).

package valueschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

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

func skipSpace(b []byte, off int) int {
	for off < len(b) && (b[off] == ' ' || b[off] == '\t' || b[off] == '\r' || b[off] == '\n') {
		off++
	}
	return off
}
