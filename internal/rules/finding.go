// Package rules holds what every configward decision shares, with no
// policy engine behind it: findings, the rule ids and their default
// actions, the settings a namespace's ConfigPolicies give, exemptions, and
// Apply, the one place where findings become an outcome (denied, warned,
// audited) for admission and for `configward check` alike. Rego lives in
// internal/regoengine; this package only decides what a finding's action is.
package rules

import (
	"cmp"
	"slices"
)

// Finding is one problem a rule found.
type Finding struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
	// Path is the exact field path, e.g.
	// "spec.template.spec.containers[0].volumeMounts[1]".
	Path string `json:"path"`
	// Action, when the rule sets it, is the rule's default for this finding
	// (subpath-config: Deny for hot config, Warn where rollouts are off).
	Action Action `json:"action,omitempty"`
	// Exemption is the reason of an exemption the object carries for this
	// rule and its policy allows; the finding is then audited.
	Exemption string `json:"-"`
}

// Action is what happens to a request a rule finds a problem with.
type Action string

const (
	Deny  Action = "Deny"  // the request is rejected
	Warn  Action = "Warn"  // allowed; kubectl prints a warning
	Audit Action = "Audit" // allowed silently; recorded as Event, metric and audit annotation
	Off   Action = "Off"   // the rule does not run
)

// Rule ids.
const (
	SubpathConfig     = "subpath-config"
	HotConfigInEnv    = "hot-config-in-env"
	SecretInEnv       = "secret-in-env"
	MissingConfigRef  = "missing-config-ref"
	SecretFileMode    = "secret-file-mode"
	ConfigSchema      = "config-schema"
	OutOfPipelineEdit = "out-of-pipeline-edit"
	ConfigInUseDelete = "config-in-use-delete"
)

// Defaults are the built-in actions (the rules table in docs/apps/rules.md). subpath-config has none
// here because its findings carry their own (Deny for hot config, Warn where
// rollouts are off).
var Defaults = map[string]Action{
	HotConfigInEnv:    Deny,
	SecretInEnv:       Warn,
	MissingConfigRef:  Warn,
	SecretFileMode:    Audit,
	ConfigSchema:      Deny,
	OutOfPipelineEdit: Deny,
	ConfigInUseDelete: Deny,
}

// strictness orders actions: where several policies set a rule, the
// strictest wins.
var strictness = map[Action]int{Off: 0, Audit: 1, Warn: 2, Deny: 3}

// Stricter returns the stricter of two actions.
func Stricter(a, b Action) Action {
	if strictness[b] > strictness[a] {
		return b
	}
	return a
}

// Builtin reports whether id is a built-in rule.
func Builtin(id string) bool {
	_, ok := Defaults[id]
	return ok || id == SubpathConfig
}

// CompareFindings orders findings by rule, path, message and action: the
// order users see them in, the same from one request to the next.
func CompareFindings(a, b Finding) int {
	return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Message, b.Message),
		cmp.Compare(a.Action, b.Action), cmp.Compare(a.Exemption, b.Exemption))
}

// SortFindings puts findings in CompareFindings' order.
func SortFindings(fs []Finding) { slices.SortFunc(fs, CompareFindings) }
