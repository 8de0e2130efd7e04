// Package valueschema implements the ConfigSchema check (rule `config-schema`): it parses the
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
package valueschema

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// Compile checks and compiles a spec whose keys sit at the given field path.
// Every problem is reported, each with the exact field ("spec.keys[2].pattern").
func Compile(spec Spec, keys *field.Path) (*Compiled, field.ErrorList) {
	c := &Compiled{byName: map[string]*rule{}, allowUndeclaredKeys: spec.AllowUndeclaredKeys}
	var errs field.ErrorList
	fail := func(p *field.Path, format string, args ...any) {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, fmt.Sprintf(format, args...)))
	}
	for i, kr := range spec.Keys {
		at := keys.Index(i)
		r := &rule{index: i, name: kr.Name, format: kr.Format}
		ok := true
		switch {
		case kr.Name != "" && kr.Pattern != "":
			fail(at, "set either name or pattern, not both (name %q, pattern %q)", kr.Name, kr.Pattern)
			ok = false
		case kr.Name == "" && kr.Pattern == "":
			errs = append(errs, field.Required(at.Child("name"), "set a name or a pattern"))
			ok = false
		case kr.Pattern != "":
			if kr.Required {
				fail(at.Child("required"), "required applies only to a named key, not to pattern %q", kr.Pattern)
				ok = false
			}
			re, err := regexp.Compile("^(?:" + kr.Pattern + ")$")
			if err != nil {
				fail(at.Child("pattern"), "invalid pattern %q: %v", kr.Pattern, err)
				ok = false
			}
			r.re = re
		default:
			if prev, dup := c.byName[kr.Name]; dup {
				fail(at.Child("name"), "key %q is already declared by %s", kr.Name, keys.Index(prev.index))
				ok = false
			}
		}
		if !validFormat(kr.Format) {
			errs = append(errs, field.NotSupported(at.Child("format"), string(kr.Format), formatValues()))
			ok = false
		}
		if len(bytes.TrimSpace(kr.Schema)) > 0 {
			sch, err := compileSchema(i, kr.Schema)
			if err != nil {
				fail(at.Child("schema"), "%v", err)
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
		return nil, errs
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

func formatValues() []string {
	s := make([]string, len(formats))
	for i, f := range formats {
		s[i] = string(f)
	}
	return s
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
