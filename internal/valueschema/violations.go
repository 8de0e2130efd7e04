package valueschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// leaf is one reportable schema failure.
type leaf struct {
	path     []string // instance location
	posPath  []string // where to point in the text when not path (e.g. the object lacking a property)
	atKey    bool     // point at the member's key rather than its value
	expected string
	found    string
	msg      string
}

// report turns a validation error tree into violations for key.
func report(key string, verr *jsonschema.ValidationError, d *document) []Violation {
	var leaves []leaf
	collect(verr, d.value, &leaves)
	vs := make([]Violation, 0, len(leaves))
	seen := map[string]bool{}
	for _, l := range leaves {
		ptr := pointer(l.path)
		if l.msg == "" {
			l.msg = "expected " + l.expected + ", found " + l.found
		}
		id := ptr + "\x00" + l.msg
		if seen[id] {
			continue
		}
		seen[id] = true
		pp := l.path
		if l.posPath != nil {
			pp = l.posPath
		}
		line, col := d.position(pp, l.atKey)
		vs = append(vs, Violation{
			Key: key, Pointer: ptr, Line: line, Column: col,
			Expected: l.expected, Found: l.found, Message: l.msg,
		})
	}
	return vs
}

// collect walks e to its leaves. anyOf/oneOf failures are summarised rather than listing every
// branch's complaints.
func collect(e *jsonschema.ValidationError, root any, out *[]leaf) {
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
		alternatives(e, root, "any", out)
		return
	case *kind.OneOf:
		if k.Subschemas == nil {
			alternatives(e, root, "exactly one", out)
			return
		}
	case *kind.Contains, *kind.PropertyNames, *kind.Not:
		*out = append(*out, toLeaf(e, root))
		return
	}
	if len(e.Causes) == 0 {
		*out = append(*out, leavesOf(e, root)...)
		return
	}
	for _, c := range e.Causes {
		collect(c, root, out)
	}
}

// alternatives reports a failed anyOf/oneOf. When every branch failed only on type at this
// location, it says "expected string or integer"; otherwise it reports the branch that came
// closest (fewest complaints among those whose type matched).
func alternatives(e *jsonschema.ValidationError, root any, which string, out *[]leaf) {
	var types []string
	var best []leaf
	allType := true
	for _, c := range e.Causes {
		var ls []leaf
		collect(c, root, &ls)
		typeOnly := len(ls) > 0 && isTypeLeaf(c)
		for _, l := range ls {
			if pointer(l.path) != pointer(e.InstanceLocation) {
				typeOnly = false
			}
		}
		if typeOnly {
			for _, l := range ls {
				types = appendUnique(types, l.expected)
			}
			continue
		}
		allType = false
		if best == nil || len(ls) < len(best) {
			best = ls
		}
	}
	v := valueAt(root, e.InstanceLocation)
	if allType && len(types) > 0 {
		exp := strings.Join(types, " or ")
		*out = append(*out, leaf{path: e.InstanceLocation, expected: exp, found: describe(v)})
		return
	}
	if len(best) > 0 {
		*out = append(*out, best...)
		return
	}
	*out = append(*out, leaf{path: e.InstanceLocation, expected: "a value matching " + which + " of the alternatives", found: describe(v),
		msg: fmt.Sprintf("value matches none of the alternatives (%s)", e.ErrorKind.LocalizedString(printer))})
}

// isTypeLeaf reports whether e (a branch of anyOf/oneOf) failed only because of the type.
func isTypeLeaf(e *jsonschema.ValidationError) bool {
	if _, ok := e.ErrorKind.(*kind.Type); ok && len(e.Causes) == 0 {
		return true
	}
	if _, ok := e.ErrorKind.(*kind.Enum); ok && len(e.Causes) == 0 {
		return true
	}
	if _, ok := e.ErrorKind.(*kind.Const); ok && len(e.Causes) == 0 {
		return true
	}
	if len(e.Causes) == 0 {
		return false
	}
	for _, c := range e.Causes {
		if !isTypeLeaf(c) {
			return false
		}
	}
	return true
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// leavesOf expands kinds that name several properties into one leaf each.
func leavesOf(e *jsonschema.ValidationError, root any) []leaf {
	loc := e.InstanceLocation
	child := func(p string) []string {
		return append(append([]string{}, loc...), p)
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		ls := make([]leaf, 0, len(k.Missing))
		for _, p := range k.Missing {
			ls = append(ls, leaf{path: child(p), posPath: loc, atKey: true, expected: fmt.Sprintf("property %q", p), found: "missing",
				msg: fmt.Sprintf("missing required property %q", p)})
		}
		// The pointer names the missing member; the position is the enclosing object's key.
		return ls
	case *kind.DependentRequired:
		return dependent(loc, k.Prop, k.Missing)
	case *kind.Dependency:
		return dependent(loc, k.Prop, k.Missing)
	case *kind.AdditionalProperties:
		ls := make([]leaf, 0, len(k.Properties))
		for _, p := range k.Properties {
			// The name comes from the value and may be long: truncated as for
			// propertyNames (the pointer keeps it whole). Found by FuzzSchemaFormats.
			ls = append(ls, leaf{path: child(p), atKey: true, expected: "no property " + strconv.Quote(truncate(p, 30)), found: "property " + strconv.Quote(truncate(p, 30)),
				msg: fmt.Sprintf("property %q is not allowed here", truncate(p, 40))})
		}
		return ls
	}
	return []leaf{toLeaf(e, root)}
}

func dependent(loc []string, prop string, missing []string) []leaf {
	ls := make([]leaf, 0, len(missing))
	for _, p := range missing {
		path := append(append([]string{}, loc...), p)
		ls = append(ls, leaf{path: path, posPath: loc, atKey: true, expected: fmt.Sprintf("property %q (required when %q is set)", p, prop), found: "missing",
			msg: fmt.Sprintf("missing property %q, required when %q is set", p, prop)})
	}
	return ls
}

// toLeaf describes one error kind as expected/found.
func toLeaf(e *jsonschema.ValidationError, root any) leaf {
	loc := e.InstanceLocation
	v := valueAt(root, loc)
	l := leaf{path: loc, found: describe(v)}
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		l.expected = strings.Join(k.Want, " or ")
	case *kind.Enum:
		l.expected = "one of " + listValues(k.Want)
	case *kind.Const:
		l.expected = "the constant " + display(k.Want)
	case *kind.Format:
		l.expected = "a valid " + k.Want
		if k.Err != nil {
			l.msg = fmt.Sprintf("expected a valid %s, found %s (%v)", k.Want, l.found, k.Err)
		}
	case *kind.MinLength:
		l.expected = fmt.Sprintf("at least %d characters", k.Want)
		l.found = fmt.Sprintf("%d characters", k.Got)
	case *kind.MaxLength:
		l.expected = fmt.Sprintf("at most %d characters", k.Want)
		l.found = fmt.Sprintf("%d characters", k.Got)
	case *kind.Pattern:
		l.expected = "a string matching " + truncate(k.Want, 60)
	case *kind.Minimum:
		l.expected = "at least " + ratString(k.Want)
	case *kind.Maximum:
		l.expected = "at most " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		l.expected = "greater than " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		l.expected = "less than " + ratString(k.Want)
	case *kind.MultipleOf:
		l.expected = "a multiple of " + ratString(k.Want)
	case *kind.MinItems:
		l.expected = fmt.Sprintf("at least %d items", k.Want)
		l.found = fmt.Sprintf("%d items", k.Got)
	case *kind.MaxItems:
		l.expected = fmt.Sprintf("at most %d items", k.Want)
		l.found = fmt.Sprintf("%d items", k.Got)
	case *kind.MinProperties:
		l.expected = fmt.Sprintf("at least %d properties", k.Want)
		l.found = fmt.Sprintf("%d properties", k.Got)
	case *kind.MaxProperties:
		l.expected = fmt.Sprintf("at most %d properties", k.Want)
		l.found = fmt.Sprintf("%d properties", k.Got)
	case *kind.UniqueItems:
		l.expected = "unique items"
		l.found = fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.AdditionalItems:
		l.expected = "no additional items"
		l.found = fmt.Sprintf("%d additional items", k.Count)
	case *kind.Contains:
		l.expected = "an item matching \"contains\""
		l.found = "none"
	case *kind.MinContains:
		l.expected = fmt.Sprintf("at least %d items matching \"contains\"", k.Want)
		l.found = fmt.Sprintf("%d", len(k.Got))
	case *kind.MaxContains:
		l.expected = fmt.Sprintf("at most %d items matching \"contains\"", k.Want)
		l.found = fmt.Sprintf("%d", len(k.Got))
	case *kind.FalseSchema:
		l.expected = "nothing (not allowed here)"
		if len(loc) > 0 {
			l.atKey = true
		}
	case *kind.Not:
		l.expected = "a value not matching the \"not\" schema"
	case *kind.OneOf:
		l.expected = "exactly one alternative to match"
		l.found = fmt.Sprintf("alternatives %v match", k.Subschemas)
	case *kind.PropertyNames:
		l.path = append(append([]string{}, loc...), k.Property)
		l.atKey = true
		l.expected = "a valid property name"
		l.found = "property " + strconv.Quote(truncate(k.Property, 30))
		detail := ""
		if len(e.Causes) > 0 {
			detail = ": " + e.Causes[0].ErrorKind.LocalizedString(printer)
		}
		l.msg = fmt.Sprintf("property name %q is not allowed%s", truncate(k.Property, 40), detail)
	default:
		l.expected = e.ErrorKind.LocalizedString(printer)
		l.msg = e.ErrorKind.LocalizedString(printer)
	}
	return l
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// listValues renders enum members: strings bare, others as JSON: [debug info warn].
func listValues(vs []any) string {
	parts := make([]string, 0, len(vs))
	total := 0
	for i, v := range vs {
		var s string
		if str, ok := v.(string); ok {
			s = str
		} else {
			s = display(v)
		}
		if total+len(s) > 80 {
			parts = append(parts, fmt.Sprintf("... %d more", len(vs)-i))
			break
		}
		total += len(s) + 1
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// display renders v as short JSON.
func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return truncate(string(b), 40)
}

// valueAt walks v along path.
func valueAt(v any, path []string) any {
	for _, tok := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// describe says what a value is, short: `string "80a"`, `number 70000`, `object with 3 properties`.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case string:
		return "string " + strconv.Quote(truncate(x, 30))
	case json.Number:
		return "number " + truncate(x.String(), 30)
	case int64:
		return "number " + strconv.FormatInt(x, 10)
	case uint64:
		return "number " + strconv.FormatUint(x, 10)
	case int:
		return "number " + strconv.Itoa(x)
	case float64:
		return "number " + strconv.FormatFloat(x, 'g', -1, 64)
	case map[string]any:
		return fmt.Sprintf("object with %d properties", len(x))
	case []any:
		return fmt.Sprintf("array of %d items", len(x))
	}
	return truncate(fmt.Sprint(v), 40)
}
