package valueschema

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// compile compiles a spec whose keys sit at "keys", its problems as one error.
func compile(spec Spec) (*Compiled, error) {
	c, errs := Compile(spec, field.NewPath("keys"))
	return c, errs.ToAggregate()
}

func mustCompile(t testing.TB, spec Spec) *Compiled {
	t.Helper()
	c, err := compile(spec)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

// want is the subset of a Violation a test checks; zero Line/Column are checked too.
type want struct {
	Pointer  string
	Line     int
	Column   int
	Expected string
	Found    string
}

func TestFormats(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		schema string
		value  string
		want   []want // nil: valid
	}{
		// JSON
		{"json valid", JSON, `{"type":"object","properties":{"port":{"type":"integer"}}}`, `{"port": 80}`, nil},
		{"json type", JSON, `{"type":"object","properties":{"server":{"properties":{"port":{"type":"integer"}}}}}`,
			"{\n  \"server\": {\n    \"port\": \"80a\"\n  }\n}",
			[]want{{"/server/port", 3, 13, "integer", `string "80a"`}}},
		{"json invalid", JSON, "", "{\n  \"a\": 1,\n}", []want{{"", 3, 1, "valid JSON", "invalid character '}' looking for beg..."}}},
		{"json trailing data", JSON, "", `{"a":1} {"b":2}`, []want{{"", 1, 9, "valid JSON", "data after the JSON value"}}},
		{"json empty", JSON, "", ``, []want{{"", 1, 1, "valid JSON", "unexpected end of JSON input"}}},
		{"json enum", JSON, `{"properties":{"level":{"enum":["debug","info","warn"]}}}`, `{"level": "trace"}`,
			[]want{{"/level", 1, 11, "one of [debug info warn]", `string "trace"`}}},
		{"json maximum", JSON, `{"properties":{"port":{"type":"integer","maximum":65535}}}`, `{"port": 70000}`,
			[]want{{"/port", 1, 10, "at most 65535", "number 70000"}}},
		// YAML
		{"yaml valid", YAML, `{"type":"object","required":["server"],"properties":{"server":{"properties":{"port":{"type":"integer"}}}}}`,
			"server:\n  port: 80\n", nil},
		{"yaml type", YAML, `{"properties":{"server":{"properties":{"port":{"type":"integer"}}}}}`,
			"# comment\nserver:\n  port: 80a\n", []want{{"/server/port", 3, 9, "integer", `string "80a"`}}},
		{"yaml required", YAML, `{"properties":{"server":{"required":["host"]}}}`,
			"server:\n  port: 80\n", []want{{"/server/host", 1, 1, `property "host"`, "missing"}}},
		{"yaml additional", YAML, `{"additionalProperties":false,"properties":{"a":{}}}`,
			"a: 1\nb: 2\n", []want{{"/b", 2, 1, `no property "b"`, `property "b"`}}},
		{"yaml array item", YAML, `{"properties":{"tags":{"items":{"type":"string","maxLength":3}}}}`,
			"tags:\n  - ok\n  - toolong\n", []want{{"/tags/1", 3, 5, "at most 3 characters", "7 characters"}}},
		{"yaml anyOf", YAML, `{"properties":{"x":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
			"x: [1]\n", []want{{"/x", 1, 4, "string or integer", "array of 1 items"}}},
		{"yaml merge key", YAML, `{"properties":{"b":{"properties":{"port":{"type":"integer"}}}}}`,
			"a: &a\n  port: x\nb:\n  <<: *a\n", []want{{"/b/port", 2, 9, "integer", `string "x"`}}},
		{"yaml syntax", YAML, "", "x: 1\na: b: c\n", []want{{"", 2, 0, "valid YAML", "mapping values are not allowed in thi..."}}},
		{"yaml two documents", YAML, "", "a: 1\n---\nb: 2\n", []want{{"", 2, 1, "a single YAML document", "more than one document"}}},
		{"yaml empty is null", YAML, `{"type":"object"}`, "", []want{{"", 0, 0, "object", "null"}}},
		// TOML
		{"toml valid", TOML, `{"properties":{"server":{"properties":{"port":{"type":"integer"}}}}}`, "[server]\nport = 80\n", nil},
		{"toml type", TOML, `{"properties":{"server":{"properties":{"port":{"type":"integer"}}}}}`,
			"title = \"x\"\n\n[server]\n  port = \"80a\"\n", []want{{"/server/port", 4, 3, "integer", `string "80a"`}}},
		{"toml array table", TOML, `{"properties":{"fruit":{"items":{"properties":{"name":{"minLength":2}}}}}}`,
			"[[fruit]]\nname = \"apple\"\n[[fruit]]\nname = \"x\"\n", []want{{"/fruit/1/name", 4, 1, "at least 2 characters", "1 characters"}}},
		{"toml inline and dotted", TOML, `{"properties":{"a":{"properties":{"b":{"properties":{"c":{"type":"boolean"}}}}}}}`,
			"a.b = { c = 1 }\n", []want{{"/a/b/c", 1, 9, "boolean", "number 1"}}},
		{"toml date is a string", TOML, `{"properties":{"d":{"type":"string","format":"date"}}}`, "d = 2024-01-02\n", nil},
		{"toml syntax", TOML, "", "a = \n", []want{{"", 1, 5, "valid TOML", ""}}},
		// properties
		{"properties valid", Properties, `{"required":["a.b"],"properties":{"a.b":{"const":"x y"}}}`, "# c\n! c\na.b = x y\n", nil},
		{"properties continuation and escapes", Properties, `{"properties":{"k":{"const":"one two"},"x y":{"const":"é"}}}`,
			"k = one \\\n    two\nx\\ y:\\u00e9\n", nil},
		{"properties violation", Properties, `{"properties":{"port":{"pattern":"^[0-9]+$"}}}`,
			"name=x\n  port: 80a\n", []want{{"/port", 2, 3, "a string matching ^[0-9]+$", `string "80a"`}}},
		{"properties bad escape", Properties, "", "a=\\u12\n", []want{{"", 1, 1, "valid properties", ""}}},
		// ini
		{"ini valid", INI, `{"properties":{"top":{"const":"1"},"db":{"properties":{"host":{"const":"h"}}}}}`,
			"top = 1\n; c\n[db]\nhost = h\n", nil},
		{"ini violation", INI, `{"properties":{"db":{"required":["port"],"properties":{"host":{"maxLength":1}}}}}`,
			"[db]\nhost = long\n", []want{{"/db/port", 1, 1, `property "port"`, "missing"}, {"/db/host", 2, 1, "at most 1 characters", "4 characters"}}},
		{"ini syntax", INI, "", "[db\n", []want{{"", 1, 1, "valid INI", "[db"}}},
		// env
		{"env valid", Env, `{"properties":{"A":{"const":"x y"},"B":{"const":"l1\nl2"},"C":{"const":"$lit"},"D":{"const":"v"}}}`,
			"# c\nexport A=\"x y\"\nB=\"l1\nl2\"\nC='$lit'\nD=v # comment\n", nil},
		{"env violation", Env, `{"properties":{"PORT":{"pattern":"^[0-9]+$"}}}`, "A=1\nexport PORT=80a\n",
			[]want{{"/PORT", 2, 8, "a string matching ^[0-9]+$", `string "80a"`}}},
		{"env syntax", Env, "", "A=1\nnot a line\n", []want{{"", 2, 1, "valid dotenv", "not a line"}}},
		{"env unterminated", Env, "", "A=\"x\n", []want{{"", 1, 1, "valid dotenv", `"x`}}},
		// text
		{"text valid", Text, `{"maxLength":100,"pattern":"^[a-z]+$"}`, "hello", nil},
		{"text violation", Text, `{"maxLength":100,"pattern":"^[a-z]+$"}`, "Hello", []want{{"", 1, 1, "a string matching ^[a-z]+$", `string "Hello"`}}},
		{"text any", Text, "", "anything\x00", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, Spec{Keys: []KeyRule{{Name: "k", Format: tt.format, Schema: []byte(tt.schema)}}})
			got := c.Validate(map[string]string{"k": tt.value}, nil)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d violations, want %d:\n%s", len(got), len(tt.want), render(got))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Key != "k" || g.Pointer != w.Pointer || g.Line != w.Line || g.Column != w.Column || g.Expected != w.Expected || (w.Found != "" && g.Found != w.Found) {
					t.Errorf("violation %d:\n got %#v\nwant %#v", i, g, w)
				}
				if g.Message == "" || strings.Contains(g.Message, "\n") {
					t.Errorf("violation %d: message must be one non-empty line: %q", i, g.Message)
				}
			}
		})
	}
}

func render(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(v.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestString(t *testing.T) {
	c := mustCompile(t, Spec{Keys: []KeyRule{{Name: "app.yaml", Format: YAML,
		Schema: []byte(`{"properties":{"server":{"properties":{"port":{"type":"integer"}}}}}`)}}})
	got := c.Validate(map[string]string{"app.yaml": "# x\nserver:\n  port: 80a\n"}, nil)
	if len(got) != 1 {
		t.Fatalf("got %v", got)
	}
	const w = `key "app.yaml" line 3 column 9 at /server/port: expected integer, found string "80a"`
	if s := got[0].String(); s != w {
		t.Errorf("String() = %s\nwant       %s", s, w)
	}
	v := Violation{Key: "a", Expected: "key present", Found: "missing"}
	if s := v.String(); s != `key "a": expected key present, found missing` {
		t.Errorf("String() without message = %s", s)
	}
}

func TestKeys(t *testing.T) {
	c := mustCompile(t, Spec{Keys: []KeyRule{
		{Name: "app.json", Format: JSON, Required: true},
		{Name: "other.json", Format: JSON, Required: true},
		{Pattern: `.*\.props`, Format: Properties, Schema: []byte(`{"required":["id"]}`)},
		{Pattern: `cert`, Format: Text, Schema: []byte(`{"maxLength":4}`)},
	}})
	got := c.Validate(
		map[string]string{"app.json": "{}", "a.props": "x=1", "zz-undeclared": "", "my.props.bak": "", "b.props": "id=2"},
		map[string][]byte{"cert": []byte("toolong"), "blob": {0xff}, "certx": []byte("x")},
	)
	wantKeys := []string{"other.json", "a.props", "cert", "blob", "certx", "my.props.bak", "zz-undeclared"}
	wantExp := []string{"key present", `property "id"`, "at most 4 characters", "a declared key", "a declared key", "a declared key", "a declared key"}
	if len(got) != len(wantKeys) {
		t.Fatalf("got:\n%s", render(got))
	}
	for i := range wantKeys {
		if got[i].Key != wantKeys[i] || got[i].Expected != wantExp[i] {
			t.Errorf("violation %d = %s (%q), want key %q expected %q", i, got[i], got[i].Expected, wantKeys[i], wantExp[i])
		}
	}
	// A required key present only in binaryData counts as present.
	if vs := c.Validate(map[string]string{"app.json": "{}"}, map[string][]byte{"other.json": []byte("[]")}); vs != nil {
		t.Errorf("unexpected: %s", render(vs))
	}
	// Undeclared keys allowed.
	c2 := mustCompile(t, Spec{AllowUndeclaredKeys: true, Keys: []KeyRule{{Name: "a", Format: Text}}})
	if vs := c2.Validate(map[string]string{"x": "y"}, map[string][]byte{"z": {0xff}}); vs != nil {
		t.Errorf("unexpected: %s", render(vs))
	}
}

func TestNameWinsOverPattern(t *testing.T) {
	c := mustCompile(t, Spec{Keys: []KeyRule{
		{Pattern: `.*`, Format: JSON},
		{Name: "plain", Format: Text},
	}})
	if vs := c.Validate(map[string]string{"plain": "not json"}, nil); vs != nil {
		t.Errorf("name rule should win: %s", render(vs))
	}
	if vs := c.Validate(map[string]string{"other": "not json"}, nil); len(vs) != 1 || vs[0].Expected != "valid JSON" {
		t.Errorf("pattern rule should apply: %s", render(vs))
	}
}

func TestBinaryData(t *testing.T) {
	c := mustCompile(t, Spec{Keys: []KeyRule{
		{Name: "conf.yaml", Format: YAML, Schema: []byte(`{"properties":{"n":{"type":"integer"}}}`)},
		{Name: "t", Format: Text},
	}})
	got := c.Validate(nil, map[string][]byte{"conf.yaml": []byte("n: x\n"), "t": []byte("ok\n\xc3\x28")})
	if len(got) != 2 {
		t.Fatalf("got:\n%s", render(got))
	}
	if got[0].Key != "t" || got[0].Expected != "valid UTF-8" || got[0].Line != 2 || got[0].Column != 1 {
		t.Errorf("invalid UTF-8: %#v", got[0])
	}
	if got[1].Key != "conf.yaml" || got[1].Pointer != "/n" || got[1].Line != 1 || got[1].Column != 4 {
		t.Errorf("schema violation in binaryData: %#v", got[1])
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		rule KeyRule
		want string
	}{
		{"unknown format", KeyRule{Name: "a", Format: "xml"}, `keys[1].format: Unsupported value: "xml": supported values: "json", "yaml"`},
		{"empty format", KeyRule{Name: "a"}, `keys[1].format: Unsupported value: ""`},
		{"invalid pattern", KeyRule{Pattern: "a(", Format: Text}, "keys[1].pattern: Invalid value: invalid pattern \"a(\": error parsing regexp: missing closing ): `^(?:a()$`"},
		{"both", KeyRule{Name: "a", Pattern: "b", Format: Text}, "keys[1]: Invalid value: set either name or pattern, not both"},
		{"neither", KeyRule{Format: Text}, "keys[1].name: Required value: set a name or a pattern"},
		{"required with pattern", KeyRule{Pattern: "a.*", Required: true, Format: Text}, "keys[1].required: Invalid value: required applies only to a named key"},
		{"schema not JSON", KeyRule{Name: "a", Format: JSON, Schema: []byte(`{"type":`)}, "keys[1].schema: Invalid value: schema is not valid JSON"},
		{"schema does not compile", KeyRule{Name: "a", Format: JSON, Schema: []byte(`{"type": 5}`)}, "keys[1].schema: Invalid value: schema does not compile"},
		{"external ref", KeyRule{Name: "a", Format: JSON, Schema: []byte(`{"$ref": "file:///etc/passwd"}`)}, "external references are not allowed"},
		{"duplicate name", KeyRule{Name: "ok", Format: Text}, `keys[1].name: Invalid value: key "ok" is already declared by keys[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compile(Spec{Keys: []KeyRule{{Name: "ok", Format: Text}, tt.rule}})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "keys[0].") || strings.Contains(err.Error(), "keys[0]:") {
				t.Errorf("error blames the good rule: %v", err)
			}
		})
	}
	if _, err := compile(Spec{Keys: []KeyRule{{Name: "a", Format: "x"}, {Name: "b", Format: "y"}}}); err == nil ||
		!strings.Contains(err.Error(), "keys[0]") || !strings.Contains(err.Error(), "keys[1]") {
		t.Errorf("every bad rule should be reported: %v", err)
	}
	// The schema's compile message is the library's own.
	_, err := compile(Spec{Keys: []KeyRule{{Name: "a", Format: JSON, Schema: []byte(`{"type": 5}`)}}})
	if err == nil || !strings.Contains(err.Error(), "/type") {
		t.Errorf("compile error should locate the problem: %v", err)
	}
}

func TestOrderingAndCap(t *testing.T) {
	c := mustCompile(t, Spec{Keys: []KeyRule{
		{Name: "a.yaml", Format: YAML, Schema: []byte(`{"items":{"type":"integer"}}`)},
		{Name: "b.json", Format: JSON},
		{Name: "c.yaml", Format: YAML, Schema: []byte(`{"properties":{"x":{"type":"string"},"y":{"type":"string"}}}`)},
		{Name: "req", Format: Text, Required: true},
	}})
	var items strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&items, "- s%d\n", i)
	}
	got := c.Validate(map[string]string{
		"a.yaml": items.String(),
		"b.json": "{",
		"c.yaml": "y: 1\nx: 2\n",
		"undecl": "",
	}, nil)
	var keys []string
	for _, v := range got {
		keys = append(keys, fmt.Sprintf("%s:%d", v.Key, v.Line))
	}
	want := []string{"b.json:1", "req:0"}
	for i := 1; i <= MaxViolationsPerKey; i++ {
		want = append(want, fmt.Sprintf("a.yaml:%d", i))
	}
	want = append(want, "a.yaml:0", "c.yaml:1", "c.yaml:2", "undecl:0")
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("order:\n got %v\nwant %v", keys, want)
	}
	more := got[2+MaxViolationsPerKey]
	if !strings.Contains(more.Message, "30 more") {
		t.Errorf("cap violation: %#v", more)
	}
}

func TestHostileInput(t *testing.T) {
	var block strings.Builder
	for i := 0; block.Len() < 1<<20; i++ {
		block.WriteString(strings.Repeat(" ", i%2000) + "a:\n")
	}
	var deepBlock strings.Builder
	for i := 0; deepBlock.Len() < 1<<20; i++ {
		deepBlock.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	lol := "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		lol += n + ": &" + n + " [" + strings.Repeat("*"+prev+",", 8) + "*" + prev + "]\n"
		prev = n
	}
	big := "s: &s " + strings.Repeat("x", 900_000) + "\nl: [" + strings.Repeat("*s,", 30_000) + "*s]\n"
	tests := []struct {
		name   string
		format Format
		value  string
		want   string // substring of the message
	}{
		{"1MiB nested flow sequences", YAML, strings.Repeat("[", 1<<20), "nested deeper than 100 levels"},
		{"1MiB nested flow mappings", YAML, strings.Repeat("{a: ", 1<<18), "nested deeper than 100 levels"},
		{"1MiB nested block sequences", YAML, strings.Repeat("- ", 1<<19), "nested deeper than 100 levels"},
		{"1MiB nested block mappings", YAML, deepBlock.String(), "nested deeper than 100 levels"},
		{"1MiB sawtooth block mappings", YAML, block.String(), "invalid YAML"},
		{"billion laughs", YAML, lol, "aliases expand"},
		{"aliased long string", YAML, big, "aliases expand"},
		{"self alias", YAML, "a: &a [*a]\n", "invalid YAML"},
		{"invalid UTF-8 YAML", YAML, "a: \xff\xfe\n", "not valid UTF-8"},
		{"invalid UTF-8 JSON", JSON, "{\"a\": \"\xff\"}", "not valid UTF-8"},
		{"1MiB nested JSON", JSON, strings.Repeat("[", 1<<20), "nested deeper than 100 levels"},
		{"nested JSON", JSON, strings.Repeat("[", 200) + strings.Repeat("]", 200), "nested deeper than 100 levels"},
		{"1MiB nested TOML", TOML, "a = " + strings.Repeat("[", 1<<20), "invalid TOML"},
		{"nested TOML", TOML, "a = " + strings.Repeat("[", 200) + strings.Repeat("]", 200), "nested deeper than 100 levels"},
		{"yaml inf", YAML, "a: .inf\n", "not a finite number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, Spec{Keys: []KeyRule{{Name: "k", Format: tt.format, Schema: []byte(`{"type":"object"}`)}}})
			start := time.Now()
			got := c.Validate(nil, map[string][]byte{"k": []byte(tt.value)})
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if len(got) != 1 || !strings.Contains(got[0].Message, tt.want) {
				t.Fatalf("want one violation containing %q, got:\n%s", tt.want, render(got))
			}
			if len(got[0].String()) > 300 {
				t.Errorf("violation too long: %d bytes", len(got[0].String()))
			}
		})
	}
}

// BenchmarkValidateYAML100KiB validates a ~100 KiB YAML value against a 50-property schema.
func BenchmarkValidateYAML100KiB(b *testing.B) {
	var props []string
	var doc strings.Builder
	for i := 0; i < 50; i++ {
		props = append(props, fmt.Sprintf(`"prop%02d":{"type":"object","required":["name","port"],"properties":{"name":{"type":"string","pattern":"^[a-z0-9-]+$"},"port":{"type":"integer","minimum":1,"maximum":65535},"enabled":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string","maxLength":64}}}}`, i))
	}
	schema := `{"type":"object","additionalProperties":false,"properties":{` + strings.Join(props, ",") + `}}`
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&doc, "prop%02d:\n  name: service-%d\n  port: %d\n  enabled: true\n  tags:\n", i, i, 8000+i)
		for j := 0; j < 70; j++ {
			fmt.Fprintf(&doc, "    - tag-%02d-%03d-lorem-ipsum\n", i, j)
		}
	}
	value := doc.String()
	c := mustCompile(b, Spec{Keys: []KeyRule{{Name: "app.yaml", Format: YAML, Schema: []byte(schema)}}})
	data := map[string]string{"app.yaml": value}
	if vs := c.Validate(data, nil); vs != nil {
		b.Fatalf("unexpected violations: %s", render(vs))
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c.Validate(data, nil)
	}
	b.ReportMetric(float64(len(value))/1024, "KiB")
}

func TestConcurrentValidate(t *testing.T) {
	c := mustCompile(t, Spec{Keys: []KeyRule{{Name: "a", Format: YAML, Schema: []byte(`{"properties":{"n":{"type":"integer"}}}`)}}})
	done := make(chan []Violation)
	for i := 0; i < 8; i++ {
		go func() { done <- c.Validate(map[string]string{"a": "n: x\n"}, nil) }()
	}
	for i := 0; i < 8; i++ {
		if vs := <-done; len(vs) != 1 || vs[0].Line != 1 {
			t.Errorf("got %s", render(vs))
		}
	}
}
