// Package analysis runs the checks that gate a delivery's waves and judges
// their answers: Prometheus queries over a wave's pods (alone, or against
// the pods the delivery has not reached yet) and generic HTTP webhooks. It
// does the I/O and the judging only; when to ask, and what a failure
// does, is the delivery state machine's.
package analysis

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// Vars are what a check's query may name, as Go text/template fields:
//
//   - {{ .Pods }}: a regular expression matching exactly the group's pod
//     names, and for no pods one matching no label value at all;
//   - {{ .Workloads }}: the same for the group's workload names;
//   - {{ .Namespace }}, {{ .Config }} (the config's name), {{ .Kind }}
//     (ConfigMap or Secret), {{ .Delivery }} (the ConfigDelivery's name),
//     {{ .Wave }} (the wave's name, or "bake");
//   - {{ .Group }}: "wave" or "rest"; a check compared with the control
//     group renders the same query once per group.
type Vars struct {
	Namespace, Config, Kind, Delivery, Wave, Group string
	Pods, Workloads                                []string
}

// fields are the names a query may use, in the order messages list them.
var fields = []string{"Pods", "Workloads", "Namespace", "Config", "Kind", "Delivery", "Wave", "Group"}

// matchNothing is the regular expression of an empty group: a character
// followed by the start of the text, which no string has, not even the
// empty one (an empty matcher would select every series without the label).
// It has no backslash, unlike the usual [^\s\S], so it stays valid inside a
// PromQL double-quoted string as well as a backquoted one, as the
// escaping of names does (see quoteName).
const matchNothing = ".^"

// namesRegexp gives the regular expression that matches exactly names: each
// name quoted, joined with |. Prometheus anchors it at both ends.
func namesRegexp(names []string) string {
	if len(names) == 0 {
		return matchNothing
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = quoteName(n)
	}
	return strings.Join(quoted, "|")
}

// quoteName quotes the metacharacters of a name as regexp.QuoteMeta does,
// but as one-character classes ("[.]", not `\.`) where a class can hold the
// character: a query writes the expression inside a PromQL string, and in
// the usual double-quoted one `\.` is an invalid escape (Prometheus refuses
// the query) while "[.]" means the same in either quoting. Kubernetes names
// have only '.' and '-' beyond letters and digits; a backslash or a caret,
// which no class can hold bare, keeps regexp.QuoteMeta's escape.
func quoteName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch r {
		case '\\', '^':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '$':
			b.WriteByte('[')
			b.WriteRune(r)
			b.WriteByte(']')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Render renders query with v. A field Vars does not have is an error, as
// is a template that does not parse or execute, or one that makes more
// than its budget (see renderBudget).
func Render(query string, v Vars) (string, error) {
	t, err := parseQuery(query)
	if err != nil {
		return "", err
	}
	return execute(t, v)
}

// Validate parses a query template and renders it with sample Vars for
// both groups, so that the admission webhook refuses a bad template when
// the policy is written rather than when a wave reaches it. Its errors are
// meant for the user who wrote the query.
func Validate(query string) error {
	t, err := parseQuery(query)
	if err != nil {
		return err
	}
	for _, group := range []string{"wave", "rest"} {
		v := Vars{Namespace: "shop", Config: "checkout-config", Kind: "ConfigMap", Delivery: "checkout-config-7",
			Wave: "canary", Group: group, Pods: []string{"checkout-5d4f9c-x2x7k", "checkout-5d4f9c-q8r2m"}, Workloads: []string{"checkout"}}
		if _, err := execute(t, v); err != nil {
			return err
		}
	}
	return nil
}

// MaxQueryBytes is the longest query template, as the CRD says
// (AnalysisCheck.Query); the render budget is measured for it, and
// configward check, which reads files no API server has validated, is held
// to it here.
const MaxQueryBytes = 4096

// maxRendered bounds a rendered query. A wave of thousands of pods makes
// a {{ .Pods }} of hundreds of KiB; a printf with a wide padding, repeated,
// would otherwise take the admission webhook's memory.
const maxRendered = 8 << 20

// parseQuery parses query and checks its tree (see checkTree). A query
// template is one template: {{ define }} and {{ block }} are refused with
// {{ template }}, as {{ range }} is, so that rendering takes time in
// proportion to the template: a template calling itself, or a range over a
// large number, would hold the admission webhook, and a PromQL expression
// has no use for either.
func parseQuery(query string) (*template.Template, error) {
	if len(query) > MaxQueryBytes {
		return nil, fmt.Errorf("the query template is %d bytes; at most %d are allowed", len(query), MaxQueryBytes)
	}
	t, err := template.New("query").Option("missingkey=error").Funcs(budgeted(nil)).Parse(query)
	if err != nil {
		return nil, templateError("the query template does not parse", err)
	}
	for _, tmpl := range t.Templates() {
		if tmpl.Name() != t.Name() {
			return nil, fmt.Errorf("the query template defines the template %q; a query template renders one expression, without {{ define }} or {{ block }}", tmpl.Name())
		}
	}
	if t.Tree != nil {
		if err := checkTree(t.Tree, t.Root); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func execute(t *template.Template, v Vars) (string, error) {
	data := map[string]string{
		"Pods":      namesRegexp(v.Pods),
		"Workloads": namesRegexp(v.Workloads),
		"Namespace": v.Namespace,
		"Config":    v.Config,
		"Kind":      v.Kind,
		"Delivery":  v.Delivery,
		"Wave":      v.Wave,
		"Group":     v.Group,
	}
	b := &limitedBuilder{}
	spent := &budget{left: renderBudget}
	if err := t.Funcs(budgeted(spent)).Execute(b, data); err != nil {
		switch {
		case b.over:
			return "", fmt.Errorf("the query template renders to more than %d MiB", maxRendered>>20)
		case spent.over:
			return "", fmt.Errorf("the query template's functions make more than %d MiB while it renders", renderBudget>>20)
		}
		return "", templateError("the query template does not render", err)
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", errors.New("the query template renders to an empty query")
	}
	return b.String(), nil
}

// limitedBuilder is a strings.Builder that refuses to grow past
// maxRendered, which stops the template's execution.
type limitedBuilder struct {
	strings.Builder
	over bool
}

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRendered {
		b.over = true
		return 0, errors.New("too long")
	}
	return b.Builder.Write(p)
}

// templateError drops text/template's "template: " prefix, which says
// nothing to someone reading a policy's status.
func templateError(what string, err error) error {
	return fmt.Errorf("%s: %s", what, strings.TrimPrefix(err.Error(), "template: "))
}

// checkTree walks a template's tree. It refuses {{ range }} and
// {{ template }} (see parseQuery), and the fields it names, .X, $v.X and
// (pipeline).X, that Vars does not have, with their position. Dot and
// variables hold the Vars or a string, and only the Vars has fields, so
// any other field name is an error wherever it is; the walk finds it in
// branches a sample rendering does not take.
func checkTree(tree *parse.Tree, n parse.Node) error {
	check := func(node parse.Node, name string) error {
		if slices.Contains(fields, name) {
			return nil
		}
		loc, _ := tree.ErrorContext(node)
		return fmt.Errorf("the query template names an unknown field: %s: .%s; a query may name .%s", loc, name, strings.Join(fields, ", ."))
	}
	var children []parse.Node
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			children = n.Nodes
		}
	case *parse.ActionNode:
		children = []parse.Node{n.Pipe}
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				children = append(children, c)
			}
		}
	case *parse.CommandNode:
		children = n.Args
	case *parse.FieldNode:
		return check(n, n.Ident[0])
	case *parse.VariableNode:
		if len(n.Ident) > 1 {
			return check(n, n.Ident[1])
		}
	case *parse.ChainNode: // (pipeline).X
		if err := check(n, n.Field[0]); err != nil {
			return err
		}
		children = []parse.Node{n.Node}
	case *parse.IfNode:
		children = []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.WithNode:
		children = []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.RangeNode:
		return refuse(tree, n, "{{ range }}")
	case *parse.TemplateNode:
		return refuse(tree, n, "{{ template }}")
	}
	for _, c := range children {
		if err := checkTree(tree, c); err != nil {
			return err
		}
	}
	return nil
}

func refuse(tree *parse.Tree, n parse.Node, action string) error {
	loc, _ := tree.ErrorContext(n)
	return fmt.Errorf("the query template uses %s at %s; a query template renders one expression, without loops or sub-templates", action, loc)
}
