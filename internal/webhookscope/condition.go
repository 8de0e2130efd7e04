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
// template path like the built-in ones.
package webhookscope

import (
	"fmt"
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
// of a built-in workload kind whose controller owner is of a kind of reg.
// The config-hash webhook never stamps a controlled object and the
// validating webhook judges such an object at its owner
// (workloadrules.JudgedAsOwned); declared kinds are left out, since their
// template is checked before that.
func NotJudgedAtOwner(reg *workload.Registry) string {
	var builtin, owners []string
	for _, t := range reg.Types() {
		if !t.Custom() {
			builtin = append(builtin, quote(t.Group+"/"+t.Kind.Kind))
		}
		group := "!o.apiVersion.contains('/')"
		if t.Group != "" {
			group = "o.apiVersion.startsWith(" + quote(t.Group+"/") + ")"
		}
		owners = append(owners, fmt.Sprintf("(o.kind == %s && %s)", quote(t.Kind.Kind), group))
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
// CSI driver.
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

// references is true when the pod spec at the optional chain s references
// a ConfigMap or Secret.
func references(s string) string {
	container := "c.?envFrom.orValue([]).exists(e, has(e.configMapRef) || has(e.secretRef)) || " +
		"c.?env.orValue([]).exists(e, has(e.valueFrom) && (has(e.valueFrom.configMapKeyRef) || has(e.valueFrom.secretKeyRef)))"
	parts := []string{
		s + ".?volumes.orValue([]).exists(v, has(v.configMap) || has(v.secret) || " +
			"v.?projected.?sources.orValue([]).exists(p, has(p.configMap) || has(p.secret)) || " +
			"v.?csi.?driver.orValue('') == '" + refs.CSIDriver + "')",
	}
	for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
		parts = append(parts, fmt.Sprintf("%s.?%s.orValue([]).exists(c, %s)", s, list, container))
	}
	return strings.Join(parts, " || ")
}

// quote is a CEL string literal of s (group and kind names: letters,
// digits, dots and dashes, which need no escaping).
func quote(s string) string { return "'" + s + "'" }
