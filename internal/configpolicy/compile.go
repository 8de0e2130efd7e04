// Package configpolicy holds the ConfigPolicies in force. Policy is
// configuration too, so it is handled the way configward asks applications
// to handle theirs: each generation is validated and compiled before it is
// used, the set in force is swapped in one step (a request in flight
// finishes on the set it started with), a generation that fails leaves the
// last good one in force, and the hash of what is in force is visible.
package configpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/regoengine"
	"github.com/configward/configward/internal/rules"
)

// Compiled is one generation of a ConfigPolicy that validated and compiled.
type Compiled struct {
	Name       string
	Generation int64
	// Hash is the sha256 of the spec: the "version" of this policy.
	Hash     string
	selector labels.Selector
	spec     v1alpha1.ConfigPolicySpec
	pipeline changecontrol.Identities
	// modules are the custom rules' Rego modules, in spec order.
	modules []regoengine.CustomModule
}

// ModulePackage is the package a custom rule's module must declare.
func ModulePackage(id string) string { return regoengine.Package(id) }

// Validate checks a ConfigPolicy and compiles its custom rules together
// with the built-in ones. Every problem is a field error with its exact
// path (spec.customRules[1].rego, with the Rego compiler's line numbers):
// admission answers them all at once (422 Invalid), and the controller's
// Ready condition says the same.
func Validate(ctx context.Context, cp *v1alpha1.ConfigPolicy) (*Compiled, field.ErrorList) {
	c := &Compiled{Name: cp.Name, Generation: cp.Generation, spec: *cp.Spec.DeepCopy()}
	spec := field.NewPath("spec")
	invalid := func(p *field.Path, format string, args ...any) *field.Error {
		return field.Invalid(p, field.OmitValueType{}, fmt.Sprintf(format, args...))
	}
	var errs field.ErrorList
	raw, err := json.Marshal(cp.Spec)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(spec, err)}
	}
	sum := sha256.Sum256(raw)
	c.Hash = hex.EncodeToString(sum[:])

	c.selector = labels.Everything()
	if cp.Spec.NamespaceSelector != nil {
		if c.selector, err = metav1.LabelSelectorAsSelector(cp.Spec.NamespaceSelector); err != nil {
			errs = append(errs, invalid(spec.Child("namespaceSelector"), "%v", err))
		}
	}
	custom := map[string]bool{}
	index := map[string]int{} // custom rule index by module file
	for i, r := range cp.Spec.CustomRules {
		at := spec.Child("customRules").Index(i)
		switch {
		case rules.Builtin(r.ID):
			errs = append(errs, invalid(at.Child("id"), "%q is the id of a built-in rule", r.ID))
			continue
		case custom[r.ID]:
			errs = append(errs, field.Duplicate(at.Child("id"), r.ID))
			continue
		}
		custom[r.ID] = true
		file := fmt.Sprintf("configpolicy/%s/%s.rego", cp.Name, r.ID)
		mod, err := ast.ParseModuleWithOpts(file, r.Rego, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			errs = append(errs, invalid(at.Child("rego"), "%v", err))
			continue
		}
		if got, want := strings.TrimPrefix(mod.Package.Path.String(), "data."), ModulePackage(r.ID); got != want {
			errs = append(errs, invalid(at.Child("rego"), "the module's package is %s; it must be %s", got, want))
			continue
		}
		index[file] = i
		c.modules = append(c.modules, regoengine.CustomModule{Policy: cp.Name, ID: r.ID, File: file, Source: r.Rego})
	}
	for _, id := range slices.Sorted(maps.Keys(cp.Spec.Rules)) {
		if !rules.Builtin(id) && !custom[id] {
			errs = append(errs, invalid(spec.Child("rules").Key(id), "unknown rule id %q (built-in rules: %s; or declare it in spec.customRules)", id, strings.Join(builtinIDs(), ", ")))
		}
	}
	errs = append(errs, validateRevisions(spec, cp.Spec)...)
	errs = append(errs, validateDelivery(spec, cp.Spec)...)
	if f := cp.Spec.Rollouts.Flapping; f != nil {
		if err := FlappingThreshold(*f).Validate(); err != nil {
			errs = append(errs, invalid(spec.Child("rollouts", "flapping"), "%v", err))
		}
	}
	c.pipeline = changecontrol.Identities{Users: cp.Spec.Pipeline.Users, Groups: cp.Spec.Pipeline.Groups}
	for i, sa := range cp.Spec.Pipeline.ServiceAccounts {
		u, err := changecontrol.ParseServiceAccount(sa)
		if err != nil {
			errs = append(errs, invalid(spec.Child("pipeline", "serviceAccounts").Index(i), "%v", err))
			continue
		}
		c.pipeline.ServiceAccounts = append(c.pipeline.ServiceAccounts, u)
	}
	if len(errs) == 0 && len(c.modules) > 0 {
		if _, err := regoengine.Compile(ctx, c.modules); err != nil {
			// A call of a built-in the sandbox leaves out is the problem of
			// the rule that makes it; other compile errors may involve
			// several modules (the built-in ones too), so they are the
			// custom rules'.
			violations, rest := regoengine.SandboxViolations(err)
			for _, v := range violations {
				i, ok := index[v.Location.File]
				if !ok {
					rest = errors.Join(rest, v)
					continue
				}
				errs = append(errs, invalid(spec.Child("customRules").Index(i).Child("rego"), "%s:%d: %s", v.Location.File, v.Location.Row, v.Message))
			}
			if rest != nil {
				errs = append(errs, invalid(spec.Child("customRules"), "%v", rest))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// validateRevisions refuses the revision settings that cannot work: a
// revision is a rollout, and a Secret snapshot is of a Secret that takes
// part in the hash.
func validateRevisions(spec *field.Path, s v1alpha1.ConfigPolicySpec) field.ErrorList {
	var errs field.ErrorList
	at := spec.Child("revisions")
	if s.Revisions.Enabled && s.Rollouts.Disabled {
		errs = append(errs, field.Invalid(at.Child("enabled"), true,
			"revisions need rollouts: a revision is what a rollout moves pods to, and spec.rollouts.disabled turns rollouts off"))
	}
	if s.Revisions.Secrets && !s.Revisions.Enabled {
		errs = append(errs, field.Invalid(at.Child("secrets"), true, "Secret snapshots need spec.revisions.enabled"))
	}
	if s.Revisions.Secrets && s.Rollouts.ExcludeSecrets {
		errs = append(errs, field.Invalid(at.Child("secrets"), true,
			"Secret snapshots need Secrets in the config hash, and spec.rollouts.excludeSecrets leaves them out"))
	}
	return errs
}

// Compile is Validate with every problem in one error.
func Compile(ctx context.Context, cp *v1alpha1.ConfigPolicy) (*Compiled, error) {
	c, errs := Validate(ctx, cp)
	return c, errs.ToAggregate()
}

// customIDs lists the ids of the custom rules the policy declares.
func (c *Compiled) customIDs() []string {
	ids := make([]string, len(c.spec.CustomRules))
	for i, r := range c.spec.CustomRules {
		ids[i] = r.ID
	}
	return ids
}

func builtinIDs() []string {
	ids := append(slices.Collect(maps.Keys(rules.Defaults)), rules.SubpathConfig)
	slices.Sort(ids)
	return ids
}
