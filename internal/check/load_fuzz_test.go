package check

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzCanary stands for a Secret's value in the seeds. An error must never
// repeat it: the decoder's own messages quote whole documents.
const fuzzCanary = "CANARY-7f3a9c"

// maxQuote is the longest stretch of the input an error may repeat: a file
// name, an apiVersion, a kind, a short field value, never a document.
const maxQuote = 64

// FuzzLoadManifests loads fuzzed bytes as a manifest file on stdin. It
// asserts that Load does not panic, returns in bounded time, answers the same
// twice, that every error is an InputError that neither holds the canary nor
// repeats more than maxQuote bytes of the input, and that every object is
// placed on a line and column inside the input (line within its line count,
// column within that line, both from 1).
func FuzzLoadManifests(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: " + fuzzCanary + "}\n",
		"apiVersion: v1\nmetadata: {name: db}\nstringData: {password: " + fuzzCanary + "}\n",
		"kind: Secret\nmetadata:\n  name: db\ndata:\n  password: " + fuzzCanary + "\n",
		"apiVersion: v1\nkind: List\nitems:\n- {metadata: {name: db}, stringData: {password: " + fuzzCanary + "}}\n",
		"apiVersion: v1\nkind: SecretList\nitems:\n- metadata: {name: a}\n  stringData: {k: " + fuzzCanary + "}\n- just a string\n",
		"# comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n---\n\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - &api\n        name: api\n        env: [{name: A, valueFrom: {secretKeyRef: {name: db, key: " + fuzzCanary + "}}}]\n      - <<: *api\n        name: sidecar\n",
		`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "one"}, "stringData": {"p": "` + fuzzCanary + `"}}]}`,
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {secret: " + fuzzCanary + "}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db, creationTimestamp: yesterday}\nstringData: {password: " + fuzzCanary + "}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {password: not-base64!}\nstringData: {p: " + fuzzCanary + "}\n",
		"apiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: crlf}\r\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: \"\tv\"}\n--- # a comment\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		objs, err := Load([]string{"-"}, bytes.NewReader(data))
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Load took %v on %d bytes", d, len(data))
		}
		objs2, err2 := Load([]string{"-"}, bytes.NewReader(data))
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() || len(objs) != len(objs2) {
			t.Fatalf("not deterministic: %d objects, %v; then %d, %v", len(objs), err, len(objs2), err2)
		}
		for i := range objs {
			if a, b := where(objs[i]), where(objs2[i]); a != b {
				t.Fatalf("object %d not deterministic: %s then %s", i, a, b)
			}
		}
		if err != nil {
			if _, ok := err.(InputError); !ok {
				t.Fatalf("error %T is not an InputError: %v", err, err)
			}
			msg := err.Error()
			// An alias's name is syntax the author typed, not a value: the
			// parser names an unknown one, even when the fuzzer made it of
			// the canary's letters (seed d4f018859ca89938).
			if strings.Contains(anchorsOut.ReplaceAllString(msg, ""), fuzzCanary) {
				t.Fatalf("error repeats the canary: %.300q", msg)
			}
			if q := longestQuote(msg, string(data)); len(q) > maxQuote {
				t.Fatalf("error repeats %d bytes of the input (%.80q...): %.300q", len(q), q, msg)
			}
			return
		}
		lines := strings.Split(string(data), "\n")
		// go-yaml also breaks lines at a lone \r, NEL, LS and PS: where the
		// input has any, lines are only checked against an upper bound.
		exact := !bytes.ContainsAny(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), "\r\u0085\u2028\u2029")
		breaks := 1 + bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) + bytes.Count(data, []byte("\u0085")) +
			bytes.Count(data, []byte("\u2028")) + bytes.Count(data, []byte("\u2029"))
		for i, o := range objs {
			if o.Obj == nil || o.File != "<stdin>" {
				t.Fatalf("object %d: %+v", i, o)
			}
			switch {
			case o.Line < 1 || o.Column < 1:
				t.Errorf("object %d (%s) not placed from 1:1", i, where(o))
			case o.Line > breaks:
				t.Errorf("object %d (%s) past the input's at most %d lines", i, where(o), breaks)
			case !exact:
			case o.Line > len(lines):
				t.Errorf("object %d (%s) past the input's %d lines", i, where(o), len(lines))
			default:
				line := strings.TrimSuffix(lines[o.Line-1], "\r")
				if n := utf8.RuneCountInString(line); o.Column > n+1 {
					t.Errorf("object %d (%s) past the end of line %d, of %d runes", i, where(o), o.Line, n)
				}
			}
		}
	})
}

// anchorsOut removes the alias names go-yaml quotes in its errors.
var anchorsOut = regexp.MustCompile(`anchor '[^']*'`)

// longestQuote is the longest stretch of msg found in input, looked for only
// past maxQuote bytes (cheap: msg is short).
func longestQuote(msg, input string) string {
	best := ""
	for i := 0; i+len(best) < len(msg); i++ {
		n := max(len(best)+1, maxQuote+1)
		for i+n <= len(msg) && strings.Contains(input, msg[i:i+n]) {
			best = msg[i : i+n]
			n++
		}
	}
	return best
}
