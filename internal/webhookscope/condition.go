// Package webhookscope decides which workload writes the API server sends
// to configward at all, as matchConditions on the two workload webhooks:
// writes configward provably ignores pay neither the round trip nor
// configward's CPU. A built-in workload that a workload kind controls is
// judged at its owner and never stamped. A write whose pod template
// references no ConfigMap or Secret and that carries no configward.dev/
// annotation or label gets nothing from the built-in rules and has no hash
// to stamp or remove; custom rules may judge anything, so that condition
// holds only while no ConfigPolicy has them.
//
// The conditions are written in CEL from the workload kinds' own table
// (internal/workload), so a declared custom kind is scoped by its declared
// template path like the built-in ones, and from the one map of where
// config enters a pod (refs.Entries), so they send what internal/refs reads.
package webhookscope

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// The matchConditions configward keeps on its workload webhooks.
const (
	// JudgedAtOwnerCondition keeps away built-in workloads a workload
	// kind controls (a Deployment's ReplicaSets, any workload's pods):
	// both webhooks let them through untouched whatever the policies say
	// (the owner's template was stamped and judged), so it is always on.
	JudgedAtOwnerCondition = "configward-not-judged-at-owner"
	// WithConfigCondition keeps away writes that involve no config; off
	// while custom rules are in force.
	WithConfigCondition = "configward-writes-with-config"
)

// Names are the conditions' names, in the order they are applied.
var Names = []string{JudgedAtOwnerCondition, WithConfigCondition}

// Conditions are the matchConditions configward wants on its workload
// webhooks: the owner condition always, the config condition unless custom
// rules (which may judge any workload) are in force.
func Conditions(reg *workload.Registry, customRules bool) []admissionregistrationv1.MatchCondition {
	out := []admissionregistrationv1.MatchCondition{{Name: JudgedAtOwnerCondition, Expression: NotJudgedAtOwner(reg)}}
	if !customRules {
		out = append(out, admissionregistrationv1.MatchCondition{Name: WithConfigCondition, Expression: WithConfig(reg)})
	}
	return out
}

// NotJudgedAtOwner is the CEL expression that is false for a create or
// update (not of a subresource: kubectl debug is judged on the pod itself)
// of a built-in workload kind whose controller owner is of a kind of reg,
// written by that kind's controller (Traits.Controllers). The config-hash
// webhook never stamps a controlled object and the validating webhook
// judges such an object at its owner (workloadrules.JudgedAsOwned, which
// decides the same from the same table); declared kinds are left out,
// since their template is checked before that. A controller reference
// written by anyone else is sent, and judged like any object.
func NotJudgedAtOwner(reg *workload.Registry) string {
	var builtin, owners []string
	for _, t := range reg.Types() {
		if !t.Custom() {
			builtin = append(builtin, quote(t.Group+"/"+t.Kind.Kind))
		}
		if len(t.Controllers) == 0 {
			continue
		}
		group := "!o.apiVersion.contains('/')"
		if t.Group != "" {
			group = "o.apiVersion.startsWith(" + quote(t.Group+"/") + ")"
		}
		users := make([]string, len(t.Controllers))
		for i, u := range t.Controllers {
			users[i] = quote(u)
		}
		owners = append(owners, fmt.Sprintf("(o.kind == %s && %s && %s in [%s])", quote(t.Kind.Kind), group, username, strings.Join(users, ", ")))
	}
	return fmt.Sprintf("(%s) || !(%s in [%s]) || "+
		"!object.metadata.?ownerReferences.orValue([]).exists(o, o.?controller.orValue(false) && (%s))",
		subresource, kindOf, strings.Join(builtin, ", "), strings.Join(owners, " || "))
}

// Webhooks are the webhooks the condition scopes, by configuration: the
// mutating one that stamps config hashes and the validating one that runs
// the workload rules (see the markers in internal/admission).
const (
	ConfigHashWebhook       = "config-hash.configward.dev"
	ValidateWorkloadWebhook = "validate.configward.dev"
)

// kindOf is the request's kind as group/kind in CEL, and subresource says
// the request is for a subresource (absent from the request when empty).
const (
	kindOf      = "request.kind.group + '/' + request.kind.kind"
	subresource = "has(request.subResource) && request.subResource != ''"
	// username is the user the request comes from.
	username = "request.userInfo.username"
)

// configwardKeyPrefix starts every annotation and label configward reads or
// writes (internal/api/v1alpha1/names.go).
const configwardKeyPrefix = "configward.dev/"

// WithConfig is the CEL expression that is true for the writes configward
// must see: any request for a kind reg does not know or for a subresource
// (kubectl debug), any object or pod template with a configward.dev/
// annotation or label, any object of a declared kind that names another
// object to take its template from, and any pod spec that references a ConfigMap or
// Secret by any of the ways internal/refs reads (env valueFrom, envFrom,
// volumes, projected volumes; in containers, init and ephemeral
// containers), or mounts a SecretProviderClass through the Secrets Store
// CSI driver: the entries of refs.Entries.
func WithConfig(reg *workload.Registry) string {
	// Kinds that keep their pod template at the same path share a clause.
	var all, templateRefs []string
	var paths [][]string
	byPath := map[string][]string{}
	for _, t := range reg.Types() {
		kind := quote(t.Group + "/" + t.Kind.Kind)
		all = append(all, kind)
		if ref := t.TemplateRefPath(); ref != nil {
			// Its template may live in another object: configward warns
			// when it cannot follow it there.
			templateRefs = append(templateRefs, fmt.Sprintf("(%s == %s && %s.hasValue())", kindOf, kind, path("object", ref)))
		}
		template := t.PodTemplatePath()[:len(t.PodTemplatePath())-1] // without "metadata"
		key := strings.Join(template, ".")
		if _, seen := byPath[key]; !seen {
			paths = append(paths, template)
		}
		byPath[key] = append(byPath[key], kind)
	}
	clauses := []string{
		subresource,
		fmt.Sprintf("!(%s in [%s])", kindOf, strings.Join(all, ", ")),
		configwardMetadata("object.?metadata"),
	}
	clauses = append(clauses, templateRefs...)
	for _, p := range paths {
		template := path("object", p)
		clauses = append(clauses, fmt.Sprintf("(%s in [%s] && (%s || %s))", kindOf, strings.Join(byPath[strings.Join(p, ".")], ", "),
			configwardMetadata(template+".?metadata"), references(template+".?spec")))
	}
	return strings.Join(clauses, " || ")
}

// path is the CEL optional chain to a dotted field path from root:
// object.?spec.?template; root alone when the path is empty.
func path(root string, fields []string) string {
	if len(fields) == 0 {
		return root
	}
	return root + ".?" + strings.Join(fields, ".?")
}

// configwardMetadata is true when the metadata at the optional chain m has
// a configward.dev/ annotation or label.
func configwardMetadata(m string) string {
	return fmt.Sprintf("%[1]s.?annotations.orValue({}).exists(k, k.startsWith('%[2]s')) || %[1]s.?labels.orValue({}).exists(k, k.startsWith('%[2]s'))",
		m, configwardKeyPrefix)
}

// references is true when the pod spec at the optional chain s names a
// ConfigMap, a Secret or a SecretProviderClass by any entry of
// refs.Entries, the one map of where config enters a pod. The entries read
// in one list share one walk of it, as a person would write it and as
// cheaply for the API server.
func references(s string) string {
	spec := &listNode{}
	for _, e := range refs.Entries {
		for _, lists := range listsOf(e) {
			n := spec
			for _, field := range lists {
				n = n.child(field)
			}
			n.entries = append(n.entries, e)
		}
	}
	parts := make([]string, 0, len(spec.children))
	for _, c := range spec.children {
		parts = append(parts, c.exists(s, nil))
	}
	return strings.Join(parts, " || ")
}

// listsOf is every chain of lists, outermost first, in whose items an entry
// is read: its own, or, for a container's, its own under each of the
// container lists.
func listsOf(e refs.Entry) [][]string {
	if len(e.Containers) == 0 {
		return [][]string{e.Lists()}
	}
	out := make([][]string, 0, len(e.Containers))
	for _, l := range e.Containers {
		out = append(out, append([]string{l.Field}, e.Lists()...))
	}
	return out
}

// listNode is one list of the pod spec ("volumes"), or of an item of an
// enclosing list ("projected.sources"), with the entries read in its items
// and the lists inside them.
type listNode struct {
	field    string
	entries  []refs.Entry
	children []*listNode
}

func (n *listNode) child(field string) *listNode {
	for _, c := range n.children {
		if c.field == field {
			return c
		}
	}
	c := &listNode{field: field}
	n.children = append(n.children, c)
	return c
}

// exists is true when an item of the list, in the object at the optional
// chain parent, holds one of its entries. A list the API server hands over
// as null (a nil slice without omitempty, such as a pod's containers or a
// projected volume's sources) holds nothing, where exists on it would fail
// the whole condition. outer are the enclosing lists' item variables.
func (n *listNode) exists(parent string, outer []string) string {
	item := itemVariable(n.field, outer)
	var terms []string
	for _, e := range n.entries {
		terms = append(terms, holds(item, e))
	}
	for _, c := range n.children {
		terms = append(terms, c.exists(item, slices.Concat(outer, []string{item})))
	}
	list := path(parent, strings.Split(n.field, ".")) + ".orValue([])"
	return fmt.Sprintf("(%[1]s != null && %[1]s.exists(%[2]s, %[3]s))", list, item, strings.Join(terms, " || "))
}

// itemVariable names the items of a list by its last field's initial
// ("v" for volumes), with the depth added where an enclosing list took it.
func itemVariable(field string, outer []string) string {
	name := strings.ToLower(field[strings.LastIndex(field, ".")+1:][:1])
	if slices.Contains(outer, name) {
		name += strconv.Itoa(len(outer))
	}
	return name
}

// holds is true when the list item x holds a reference of entry e, as
// refs reads it: a Field that is set (a null one is not), of the entry's
// driver if it names one, and with a name if it needs one.
func holds(x string, e refs.Entry) string {
	field := strings.Split(e.Field, ".")
	var conditions []string
	if e.Driver != "" {
		conditions = append(conditions, path(x, slices.Concat(field, []string{"driver"}))+".orValue('') == "+quote(e.Driver))
	}
	if e.NameRequired {
		conditions = append(conditions, path(x, slices.Concat(field, strings.Split(e.NameField, ".")))+".orValue('') != ''")
	}
	if len(conditions) == 0 {
		return path(x, field) + ".orValue(null) != null"
	}
	return "(" + strings.Join(conditions, " && ") + ")"
}

// quote is a CEL string literal of s: group and kind names, and user
// names, which are free text in a declaration.
func quote(s string) string { return "'" + celEscaper.Replace(s) + "'" }

// celEscaper escapes what ends or escapes a single-quoted CEL string.
var celEscaper = strings.NewReplacer(`\`, `\\`, `'`, `\'`)
