package analysis

import (
	"regexp"
	"strings"
	"testing"
)

// anchored compiles a rendered expression as Prometheus does: anchored at
// both ends, with Go's regexp.
func anchored(t *testing.T, expr string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile("^(?s:" + expr + ")$")
	if err != nil {
		t.Fatalf("%q does not compile: %v", expr, err)
	}
	return re
}

func TestRenderFields(t *testing.T) {
	v := Vars{Namespace: "shop", Config: "checkout-config", Kind: "Secret", Delivery: "checkout-config-3", Wave: "bake", Group: "rest",
		Pods: []string{"web-1", "web-2"}, Workloads: []string{"web"}}
	got, err := Render(`{{.Namespace}} {{.Config}} {{.Kind}} {{.Delivery}} {{.Wave}} {{.Group}} {{.Pods}} {{.Workloads}} {{$.Group}}`, v)
	if err != nil {
		t.Fatal(err)
	}
	if want := "shop checkout-config Secret checkout-config-3 bake rest web-1|web-2 web rest"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRenderPodsRegexp(t *testing.T) {
	pods := []string{"checkout.v2-5d4f-x2x7k", "web-1", "a.b.c"}
	got, err := Render(`sum(up{pod=~"{{ .Pods }}"})`, Vars{Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	expr := strings.TrimSuffix(strings.TrimPrefix(got, `sum(up{pod=~"`), `"})`)
	// Inside PromQL's double quotes a backslash must be an escape PromQL
	// knows, and `\.` is not: Kubernetes names must quote without one.
	if strings.Contains(expr, `\`) {
		t.Errorf("%q has a backslash, which PromQL refuses in a double-quoted string", expr)
	}
	re := anchored(t, expr)
	for _, p := range pods {
		if !re.MatchString(p) {
			t.Errorf("%q does not match pod %q", expr, p)
		}
	}
	for _, other := range []string{"checkoutXv2-5d4f-x2x7k", "aXb.c", "web-1|a.b.c", "web-", "web-10", "", "checkout.v2-5d4f-x2x7kweb-1"} {
		if re.MatchString(other) {
			t.Errorf("%q matches %q, not a pod of the group", expr, other)
		}
	}
}

func TestQuoteNameEveryMetacharacter(t *testing.T) {
	names := []string{`a.b`, `a+b*c?`, `(x)|[y]{z}`, `^start$`, `back\slash`, `]`, `[`, `^`, `\`, `.`, `-`, `ünï.cødé`}
	re := anchored(t, namesRegexp(names))
	for _, n := range names {
		if !re.MatchString(n) {
			t.Errorf("%q does not match %q", namesRegexp(names), n)
		}
	}
	for _, n := range []string{"aXb", "ab", "a+bbc", "x", "start", "backslash", "", "a.b|]"} {
		if re.MatchString(n) {
			t.Errorf("%q matches %q", namesRegexp(names), n)
		}
	}
}

func TestRenderEmptyGroupMatchesNothing(t *testing.T) {
	got, err := Render(`{{ .Pods }}`, Vars{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, `\`) {
		t.Errorf("%q has a backslash, which PromQL refuses in a double-quoted string", got)
	}
	// Not even the empty value: a matcher that matches "" would select
	// every series without the label.
	re := anchored(t, got)
	unanchored := regexp.MustCompile(got)
	for _, s := range []string{"", "a", ".", "^", ".^", "\n", "web-1", " "} {
		if re.MatchString(s) || unanchored.MatchString(s) {
			t.Errorf("the empty group's %q matches %q", got, s)
		}
	}
	w, err := Render(`{{ .Workloads }}`, Vars{Pods: []string{"p"}})
	if err != nil || w != got {
		t.Errorf("empty workloads render %q, %v; want %q", w, err, got)
	}
}

func TestRenderErrors(t *testing.T) {
	for _, tc := range []struct{ name, query, want string }{
		{"unknown field", `sum(up{pod=~"{{ .Pod }}"})`, "unknown field: query:1:16: .Pod; a query may name .Pods, .Workloads, .Namespace, .Config, .Kind, .Delivery, .Wave, .Group"},
		{"unknown field in a branch not taken", `{{ if eq .Group "nowhere" }}{{ .Podz }}{{ end }}up`, ": .Podz;"},
		{"unknown field in an else", `{{ with .Pods }}{{ . }}{{ else }}{{ .Nope }}{{ end }}`, ": .Nope;"},
		{"unknown field from the root variable", `{{ with .Pods }}{{ $.Cluster }}{{ end }}`, ": .Cluster;"},
		{"unknown field from a variable", `{{ $v := . }}{{ $v.Cluster }}`, ": .Cluster;"},
		{"unknown field in a chain", `{{ ($).Clusters }}`, ": .Clusters;"},
		// Rendering takes time in proportion to the template's size: no
		// loops, no templates calling each other.
		{"range", `{{ range 1000000000 }}{{ end }}up`, "uses {{ range }} at query:1:"},
		{"define", `{{ define "sel" }}pod=~"{{ .Pods }}"{{ end }}up{ {{ template "sel" . }} }`, `defines the template "sel"`},
		{"define alone", `{{ define "sel" }}x{{ end }}up`, `defines the template "sel"`},
		{"block", `{{ block "sel" . }}{{ .Pods }}{{ end }}`, `defines the template "sel"`},
		{"recursion", `{{ define "x" }}{{ template "x" . }}{{ template "x" . }}{{ end }}{{ template "x" . }}`, `defines the template "x"`},
		{"calling itself", `up{{ template "query" . }}`, "uses {{ template }} at query:1:"},
		{"longer than the CRD allows", "up" + strings.Repeat(" ", MaxQueryBytes), "at most 4096 are allowed"},
		{"renders too long", `{{ $p := printf "%256s" "" }}` + strings.Repeat(`{{ $p = print $p $p }}`, 12) + strings.Repeat(`{{ $p }}`, 9), "renders to more than 8 MiB"},
		{"field of a string", `{{ .Pods.Name }}`, "does not render"},
		{"does not parse", `sum(up{pod=~"{{ .Pods "})`, "does not parse"},
		{"empty", `  {{/* nothing */}} `, "empty query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(tc.query, Vars{Group: "wave", Pods: []string{"p"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if err := Validate(tc.query); err == nil {
				t.Errorf("Validate took %q", tc.query)
			}
		})
	}
}

func TestRenderActionsAndVariables(t *testing.T) {
	got, err := Render(`{{ with .Pods }}{{ . }}{{ end }} {{ $v := . }}{{ $v.Namespace }} {{ with $ }}{{ .Wave }}{{ end }} {{ printf "%s" (.Config) }}`,
		Vars{Pods: []string{"p"}, Namespace: "ns", Wave: "w1", Config: "c"})
	if want := "p ns w1 c"; err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

func TestValidate(t *testing.T) {
	for _, q := range []string{
		`sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}",code=~"5.."}[5m])) / sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[5m]))`,
		`{{ if eq .Group "rest" }}vector(0){{ else }}vector(1){{ end }}`,
		`up{job="{{ .Workloads }}", config="{{ .Config }}", kind="{{ .Kind }}", delivery="{{ .Delivery }}", wave="{{ .Wave }}"}`,
	} {
		if err := Validate(q); err != nil {
			t.Errorf("Validate(%q): %v", q, err)
		}
	}
	err := Validate(`{{ .Pods }`)
	if err == nil || strings.HasPrefix(err.Error(), "template:") {
		t.Errorf("Validate's error %v should be a sentence for the user", err)
	}
	// A template that fails for one group only is refused.
	if err := Validate(`{{ if eq .Group "rest" }}{{ .Pods.X }}{{ end }}up`); err == nil {
		t.Error("Validate took a template that fails to render for the rest")
	}
}
