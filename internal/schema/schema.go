// Package schema implements the ConfigSchema check (rule `config-schema`): it parses the
// values of a ConfigMap's keys in their declared format (json, yaml, toml, properties, ini,
// env, text), validates them against a JSON Schema (draft 2020-12) and reports every violation
// with the key, the JSON pointer inside the value, the line and column in the original text,
// what was expected and what was found.
//
// Libraries:
//
//   - JSON Schema: github.com/santhosh-tekuri/jsonschema/v6, a maintained, spec-complete
//     draft 2020-12 implementation whose errors are typed (package kind), which lets us say
//     "expected integer, found string" rather than re-parse English. Schemas cannot load
//     anything from files or the network: every external $ref is refused at compile time.
//     The `format` keyword is asserted (not only annotated), which is what a config author means
//     by {"format": "ipv4"}.
//   - YAML (and positions for JSON): go.yaml.in/yaml/v3, already in the module graph. We parse to
//     yaml.Node and build the value ourselves, so alias expansion and nesting depth are bounded
//     by this package, not by the decoder.
//   - JSON: encoding/json decides validity and the value (numbers as json.Number); positions are
//     taken from the same text parsed as YAML.
//   - TOML: github.com/pelletier/go-toml/v2. It is maintained, TOML 1.0 compliant, fast, and its
//     `unstable` package exposes the parser's AST with byte ranges for every key, from which we
//     find the line and column of each key. toml.Unmarshal supplies the value and reports syntax
//     and semantic errors (e.g. redefined tables) with their position. BurntSushi/toml also
//     reports key positions (MetaData) but only lines and only for top-level expressions, and
//     naoina/toml is unmaintained.
//   - properties, ini and env are small enough to parse here, keeping each key's line.
//
// Key rules: a rule names a key (Name) or matches keys with an RE2 Pattern that is anchored by
// this package: the whole key must match (the pattern is compiled as ^(?:pattern)$). A key is
// governed by the rule with its exact Name if there is one, otherwise by the first Pattern rule
// (in spec order) that matches it.
//
// Hostile input is bounded: YAML nesting deeper than MaxDepth, YAML alias expansion beyond
// MaxAliasNodes materialised nodes, more than one YAML document and invalid UTF-8 are reported
// as violations, and at most MaxViolationsPerKey schema violations are listed per key followed by
// one "and N more" violation.
package schema

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Format is the declared format of a ConfigMap key's value.
type Format string

// The supported formats.
const (
	JSON       Format = "json"
	YAML       Format = "yaml"
	TOML       Format = "toml"
	Properties Format = "properties"
	INI        Format = "ini"
	Env        Format = "env"
	Text       Format = "text"
)

var formats = []Format{JSON, YAML, TOML, Properties, INI, Env, Text}

// Limits applied while parsing and reporting.
const (
	// MaxDepth is the deepest nesting of objects/arrays accepted in a parsed value.
	MaxDepth = 100
	// MaxAliasNodes bounds the number of nodes that YAML aliases may expand to in one value
	// (a scalar counts one node per 64 bytes, so aliasing a long string is bounded too).
	MaxAliasNodes = 100_000
	// MaxViolationsPerKey is how many schema violations are listed for one key before a final
	// "and N more" violation.
	MaxViolationsPerKey = 20
)

// KeyRule governs one key (Name) or every key matching Pattern.
//
// Pattern is RE2 syntax and is anchored by Compile: the whole key must match.
type KeyRule struct {
	Name     string
	Pattern  string
	Format   Format
	Required bool   // only meaningful with Name
	Schema   []byte // JSON Schema (draft 2020-12) as JSON for the parsed value; nil/empty = any value that parses.
}

// Spec is the set of key rules of a ConfigSchema.
type Spec struct {
	Keys                []KeyRule
	AllowUndeclaredKeys bool
}

// Compiled is a checked and compiled Spec. It is immutable and safe for concurrent use.
type Compiled struct {
	byName              map[string]*rule
	patterns            []*rule
	required            []string // sorted
	allowUndeclaredKeys bool
}

type rule struct {
	index  int
	name   string
	re     *regexp.Regexp
	format Format
	schema *jsonschema.Schema // nil: any value that parses
}

// refuseLoader keeps schemas from loading anything from files or the network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external references are not allowed (%s); put definitions in $defs", url)
}

// Compile checks and compiles a spec. Every problem is reported, each naming its rule
// ("keys[2]: ...").
func Compile(spec Spec) (*Compiled, error) {
	c := &Compiled{byName: map[string]*rule{}, allowUndeclaredKeys: spec.AllowUndeclaredKeys}
	var errs []error
	fail := func(i int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("keys[%d]: %s", i, fmt.Sprintf(format, args...)))
	}
	for i, kr := range spec.Keys {
		r := &rule{index: i, name: kr.Name, format: kr.Format}
		ok := true
		switch {
		case kr.Name != "" && kr.Pattern != "":
			fail(i, "set either name or pattern, not both (name %q, pattern %q)", kr.Name, kr.Pattern)
			ok = false
		case kr.Name == "" && kr.Pattern == "":
			fail(i, "set a name or a pattern")
			ok = false
		case kr.Pattern != "":
			if kr.Required {
				fail(i, "required applies only to a named key, not to pattern %q", kr.Pattern)
				ok = false
			}
			re, err := regexp.Compile("^(?:" + kr.Pattern + ")$")
			if err != nil {
				fail(i, "invalid pattern %q: %v", kr.Pattern, err)
				ok = false
			}
			r.re = re
		default:
			if prev, dup := c.byName[kr.Name]; dup {
				fail(i, "key %q is already declared by keys[%d]", kr.Name, prev.index)
				ok = false
			}
		}
		if !validFormat(kr.Format) {
			fail(i, "unknown format %q (want one of %s)", string(kr.Format), formatList())
			ok = false
		}
		if len(bytes.TrimSpace(kr.Schema)) > 0 {
			sch, err := compileSchema(i, kr.Schema)
			if err != nil {
				fail(i, "%v", err)
				ok = false
			}
			r.schema = sch
		}
		if !ok {
			continue
		}
		if r.re != nil {
			c.patterns = append(c.patterns, r)
		} else {
			c.byName[r.name] = r
			if kr.Required {
				c.required = append(c.required, r.name)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Strings(c.required)
	return c, nil
}

func validFormat(f Format) bool {
	for _, g := range formats {
		if f == g {
			return true
		}
	}
	return false
}

func formatList() string {
	s := make([]string, len(formats))
	for i, f := range formats {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

func compileSchema(i int, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %v", err)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(refuseLoader{})
	comp.AssertFormat()
	url := "configward:///keys/" + strconv.Itoa(i) + ".json"
	if err := comp.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema does not compile: %v", err)
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", strings.ReplaceAll(err.Error(), url, "schema"))
	}
	return sch, nil
}

// ruleFor returns the rule governing key, or nil.
func (c *Compiled) ruleFor(key string) *rule {
	if r, ok := c.byName[key]; ok {
		return r
	}
	for _, r := range c.patterns {
		if r.re.MatchString(key) {
			return r
		}
	}
	return nil
}

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

func formatName(f Format) string {
	switch f {
	case JSON, YAML, TOML, INI:
		return strings.ToUpper(string(f))
	case Env:
		return "dotenv"
	case Properties:
		return "properties"
	default:
		return "text"
	}
}

// truncate shortens s to at most n runes, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n-3 {
			return s[:pos] + "..."
		}
		i++
	}
	return s
}
