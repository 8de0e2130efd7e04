package valueschema

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Violation is one way a ConfigMap breaks its ConfigSchema.
type Violation struct {
	Key      string // ConfigMap key
	Pointer  string // JSON pointer inside the parsed value ("" for the whole value / key-level problems)
	Line     int    // 1-based line in the original text, 0 when unknown
	Column   int    // 1-based, 0 when unknown
	Expected string // what the schema wanted, short
	Found    string // what was there, short
	Message  string // one line a user can act on
}

// String renders one violation on one line, e.g.
//
//	key "app.yaml" line 3 column 9 at /server/port: expected integer, found string "80a"
func (v Violation) String() string {
	var b strings.Builder
	b.WriteString("key ")
	b.WriteString(strconv.Quote(v.Key))
	if v.Line > 0 {
		b.WriteString(" line ")
		b.WriteString(strconv.Itoa(v.Line))
		if v.Column > 0 {
			b.WriteString(" column ")
			b.WriteString(strconv.Itoa(v.Column))
		}
	}
	if v.Pointer != "" {
		b.WriteString(" at ")
		b.WriteString(v.Pointer)
	}
	b.WriteString(": ")
	switch {
	case v.Message != "":
		b.WriteString(v.Message)
	case v.Expected != "" || v.Found != "":
		b.WriteString("expected " + v.Expected + ", found " + v.Found)
	}
	return b.String()
}

// ranks of violations, most useful first.
const (
	rankKey    = iota // parse errors and missing required keys
	rankSchema        // schema violations
	rankMore          // "and N more" for a key (sorted after that key's schema violations)
	rankUndeclared
)

type entry struct {
	rank int
	v    Violation
}

// Validate checks a ConfigMap's data and binaryData. It returns every violation, sorted most
// useful first: parse errors and missing required keys first, then schema violations in key
// order then line order, then undeclared keys. It returns nil when there is none.
func (c *Compiled) Validate(data map[string]string, binaryData map[string][]byte) []Violation {
	var out []entry
	for _, name := range c.required {
		_, inData := data[name]
		_, inBinary := binaryData[name]
		if !inData && !inBinary {
			out = append(out, entry{rankKey, Violation{
				Key: name, Expected: "key present", Found: "missing",
				Message: "required key is missing",
			}})
		}
	}
	check := func(key string, value []byte, binary bool) {
		r := c.ruleFor(key)
		if r == nil {
			if !c.allowUndeclaredKeys {
				where := "data"
				if binary {
					where = "binaryData"
				}
				out = append(out, entry{rankUndeclared, Violation{
					Key: key, Expected: "a declared key", Found: "undeclared key",
					Message: fmt.Sprintf("%s key is not declared by the schema and undeclared keys are not allowed", where),
				}})
			}
			return
		}
		out = append(out, validateValue(key, value, r)...)
	}
	for k, v := range data {
		check(k, []byte(v), false)
	}
	for k, v := range binaryData {
		check(k, v, true)
	}
	if len(out) == 0 {
		return nil
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.rank == rankMore {
			a.rank = rankSchema
		}
		if b.rank == rankMore {
			b.rank = rankSchema
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.v.Key != b.v.Key {
			return a.v.Key < b.v.Key
		}
		if (out[i].rank == rankMore) != (out[j].rank == rankMore) {
			return out[j].rank == rankMore
		}
		if a.v.Line != b.v.Line {
			return a.v.Line < b.v.Line
		}
		if a.v.Column != b.v.Column {
			return a.v.Column < b.v.Column
		}
		return a.v.Pointer < b.v.Pointer
	})
	vs := make([]Violation, len(out))
	for i, e := range out {
		vs[i] = e.v
	}
	return vs
}

// validateValue parses one value in its rule's format and validates it.
func validateValue(key string, raw []byte, r *rule) []entry {
	doc, perr := parse(r.format, raw)
	if perr != nil {
		// Parsers' positions come from their own line counting: keep them
		// inside the text, as report does for schema violations.
		perr.line, perr.col = inText(raw, perr.line, perr.col)
		v := Violation{
			Key: key, Pointer: perr.pointer, Line: perr.line, Column: perr.col,
			Expected: perr.expected, Found: perr.found, Message: perr.msg,
		}
		if v.Expected == "" {
			v.Expected = "valid " + formatName(r.format)
		}
		if v.Found == "" {
			v.Found = truncate(perr.msg, 40)
		}
		return []entry{{rankKey, v}}
	}
	if r.schema == nil {
		return nil
	}
	err := r.schema.Validate(doc.value)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []entry{{rankKey, Violation{
			Key: key, Expected: "a value the schema can check", Found: truncate(err.Error(), 40),
			Message: "cannot validate value: " + err.Error(),
		}}}
	}
	vs := report(key, verr, doc)
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].Line != vs[j].Line {
			return vs[i].Line < vs[j].Line
		}
		if vs[i].Column != vs[j].Column {
			return vs[i].Column < vs[j].Column
		}
		return vs[i].Pointer < vs[j].Pointer
	})
	var out []entry
	for i, v := range vs {
		if i == MaxViolationsPerKey {
			n := len(vs) - MaxViolationsPerKey
			out = append(out, entry{rankMore, Violation{
				Key: key, Expected: "a value that matches the schema",
				Found:   fmt.Sprintf("%d more violations", n),
				Message: fmt.Sprintf("and %d more violations not listed", n),
			}})
			break
		}
		out = append(out, entry{rankSchema, v})
	}
	return out
}
