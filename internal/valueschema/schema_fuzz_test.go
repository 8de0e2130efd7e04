package valueschema

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fuzzSchema is small but reaches most of report.go: types, bounds, enum,
// pattern, format, required and dependentRequired (reported at the
// enclosing object's key), additionalProperties (at the member's key),
// propertyNames, anyOf/oneOf summaries, uniqueItems, nested objects and
// arrays. The root may be a string so that text, and any format whose
// value is a bare scalar, reach the string keywords too.
const fuzzSchema = `{
  "type": ["object", "string"],
  "maxLength": 12,
  "pattern": "^[a-z ]*$",
  "maxProperties": 6,
  "propertyNames": {"maxLength": 16},
  "required": ["name"],
  "dependentRequired": {"port": ["name", "level"]},
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]"},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
    "level": {"enum": ["debug", "info", 3, null]},
    "host": {"type": "string", "format": "hostname"},
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 3},
    "mode": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^x"}]},
    "one": {"oneOf": [{"type": "string"}, {"maxLength": 3}]},
    "server": {
      "type": "object",
      "additionalProperties": false,
      "required": ["port"],
      "properties": {"port": {"$ref": "#/properties/port"}, "tls": {"type": "boolean"}, "sub": {"$ref": "#/properties/server"}}
    },
    "list": {"type": "array", "items": {"$ref": "#/properties/server"}, "contains": {"required": ["tls"]}}
  },
  "additionalProperties": {"type": ["string", "integer", "boolean", "object"]}
}`

// fuzzInputLimit keeps one input's cost bounded; the fuzzer rarely goes
// past it anyway, and the package's own hostile-input test covers MiBs.
const fuzzInputLimit = 64 << 10

// fuzzDeadline is the per-input budget. It is generous (a busy machine and
// the fuzzer's instrumentation slow each call down); what it catches is an
// input that escapes the depth and alias caps and runs away.
const fuzzDeadline = 5 * time.Second

// FuzzSchemaFormats parses and validates fuzzed bytes in every ConfigSchema
// format against fuzzSchema. It asserts that Validate does not panic, returns
// within fuzzDeadline, is deterministic, and that every violation is well
// formed: on key "v", a one-line message, a short expected/found, at most
// MaxViolationsPerKey of them plus one "and N more", and a position that is
// either unknown (0, the documented value) or inside the input: a line
// within its line count and a column within that line.
func FuzzSchemaFormats(f *testing.F) {
	compiled := map[Format]*Compiled{}
	for _, fm := range formats {
		c, errs := Compile(Spec{Keys: []KeyRule{{Name: "v", Format: fm, Schema: []byte(fuzzSchema)}}}, field.NewPath("keys"))
		if len(errs) > 0 {
			f.Fatalf("compile %s: %v", fm, errs.ToAggregate())
		}
		compiled[fm] = c
	}
	seed := func(fm Format, s string) {
		for i, g := range formats {
			if g == fm {
				f.Add(uint8(i), []byte(s))
			}
		}
	}
	seed(JSON, `{"name": "Web", "port": 70000, "level": "trace", "tags": ["a", "a"], "mode": [1], "server": {"port": "x", "extra": 1}}`)
	seed(JSON, "{\n  \"a\": 1,\n}")
	seed(JSON, `{"list": [{"port": 1}, {"port": 2, "tls": "no"}], "name": "ok"}`)
	seed(JSON, strings.Repeat("[", 150)+strings.Repeat("]", 150))
	seed(YAML, "name: Web\nport: 0\nlevel: 3\nhost: -bad-\nserver:\n  sub:\n    sub: {}\n")
	seed(YAML, "a: &a\n  port: x\nserver:\n  <<: *a\n  tls: 1\n")
	seed(YAML, "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n")
	seed(YAML, "x: 1\na: b: c\n")
	seed(YAML, "a: 1\n---\nb: 2\n")
	seed(YAML, "server:\n  port: 1\n  "+strings.Repeat("k", 150)+": 1\n")
	seed(YAML, "name: ключ\nserver: {port: \"é\", tls: ü}\n")
	seed(YAML, "a: .inf\n? [k]\n: v\n")
	seed(TOML, "name = \"Web\"\n\n[server]\n  port = \"80a\"\n[[list]]\nport = 1\n[[list]]\ntls = true\n")
	seed(TOML, "a.b = { c = 1 }\nd = 2024-01-02\n")
	seed(TOML, "a = \n")
	seed(TOML, "name = \"ééé\"\n[server]\nport = 80\ntls = [\"ключ\"]\n")
	seed(Properties, "# c\n! c\nname = x y\nport: 80a\nk = one \\\n    two\nx\\ y:\\u00e9\n")
	seed(Properties, "a=\\u12\n")
	seed(INI, "name = web\n; c\n[server]\nport = 80\n[db\n")
	seed(INI, "top = 1\n[server]\nhost = h\n")
	seed(Env, "# c\nexport name=\"x y\"\nport=\"l1\nl2\"\nC='$lit'\nD=v # comment\n")
	seed(Env, "A=\"x\" tail\n")
	seed(Text, "Hello, world")
	seed(Text, "")

	f.Fuzz(func(t *testing.T, format uint8, data []byte) {
		if len(data) > fuzzInputLimit {
			t.Skip("larger than fuzzInputLimit: large inputs are TestHostileInput's, here they only slow the fuzzer")
		}
		fm := formats[int(format)%len(formats)]
		c := compiled[fm]

		// A hang shows as a crash of the fuzzing worker, which keeps the
		// input; a slow return fails the check below.
		watchdog := time.AfterFunc(10*fuzzDeadline, func() {
			panic("FuzzSchemaFormats: Validate still running after " + (10 * fuzzDeadline).String())
		})
		start := time.Now()
		got := c.Validate(map[string]string{"v": string(data)}, nil)
		elapsed := time.Since(start)
		again := c.Validate(nil, map[string][]byte{"v": data})
		watchdog.Stop()
		if elapsed > fuzzDeadline {
			t.Fatalf("%s: Validate took %v on %d bytes", fm, elapsed, len(data))
		}
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("%s: not deterministic:\n%s\nthen\n%s", fm, render(got), render(again))
		}

		if len(got) > MaxViolationsPerKey+1 {
			t.Fatalf("%s: %d violations, want at most %d", fm, len(got), MaxViolationsPerKey+1)
		}
		lines := inputLines(data)
		for i, v := range got {
			if v.Key != "v" {
				t.Errorf("%s: violation %d on key %q", fm, i, v.Key)
			}
			if v.Message == "" || strings.ContainsAny(v.Message, "\n\r") {
				t.Errorf("%s: violation %d: message must be one non-empty line: %q", fm, i, v.Message)
			}
			if v.Expected == "" {
				t.Errorf("%s: violation %d: empty Expected: %#v", fm, i, v)
			}
			// "short" by the field docs: values truncated to a few dozen
			// runes, each at most 10 bytes once quoted (\U0010ffff).
			if len(v.Expected) > 512 || len(v.Found) > 512 {
				t.Errorf("%s: violation %d: Expected/Found not short (%d/%d bytes): %s", fm, i, len(v.Expected), len(v.Found), truncate(v.String(), 300))
			}
			if strings.HasPrefix(v.Message, "and ") && strings.HasSuffix(v.Message, "more violations not listed") && i != len(got)-1 {
				t.Errorf("%s: \"and N more\" is violation %d of %d", fm, i, len(got))
			}
			checkPosition(t, fm, data, lines, i, v)
		}
	})
}

// inputLines splits data into lines for position checks, and says whether
// its lines can be counted exactly. go-yaml counts \r, NEL, LS and PS as line
// breaks as well as \n (so JSON positions, taken from YAML, may too); an
// input with any of them is only checked against an upper bound.
type fuzzLines struct {
	byNewline []string // split on \n, each without a trailing \r
	exact     bool     // no line break but \n (and \r\n)
	maxBreaks int      // an upper bound on the line count under any of those rules
}

func inputLines(data []byte) fuzzLines {
	l := fuzzLines{exact: true, maxBreaks: 1}
	for _, line := range strings.Split(string(data), "\n") {
		l.byNewline = append(l.byNewline, strings.TrimSuffix(line, "\r"))
	}
	for i, r := range string(data) {
		switch r {
		case '\n':
			l.maxBreaks++
		case '\r':
			if i+1 >= len(data) || data[i+1] != '\n' {
				l.maxBreaks++
				l.exact = false
			}
		case '\u0085', '\u2028', '\u2029':
			l.maxBreaks++
			l.exact = false
		}
	}
	return l
}

func checkPosition(t *testing.T, fm Format, data []byte, lines fuzzLines, i int, v Violation) {
	t.Helper()
	switch {
	case v.Line < 0 || v.Column < 0:
		t.Errorf("%s: violation %d at %d:%d: negative position", fm, i, v.Line, v.Column)
	case v.Line == 0 && v.Column != 0:
		t.Errorf("%s: violation %d at %d:%d: a column without a line", fm, i, v.Line, v.Column)
	case v.Line > lines.maxBreaks:
		t.Errorf("%s: violation %d at line %d: the input has at most %d lines\n%s", fm, i, v.Line, lines.maxBreaks, truncate(v.String(), 300))
	case !lines.exact || v.Line == 0 || v.Column == 0:
	case v.Line > len(lines.byNewline):
		t.Errorf("%s: violation %d at line %d: the input has %d lines\n%s", fm, i, v.Line, len(lines.byNewline), truncate(v.String(), 300))
	default:
		// Columns count runes, 1-based; one past the end of the line
		// points at its end (a missing value, an unterminated string).
		line := lines.byNewline[v.Line-1]
		if n := utf8.RuneCountInString(line); v.Column > n+1 {
			t.Errorf("%s: violation %d at %d:%d: line %d has %d runes (%q)\n%s", fm, i, v.Line, v.Column, v.Line, n, truncate(line, 80), truncate(v.String(), 300))
		}
	}
}
