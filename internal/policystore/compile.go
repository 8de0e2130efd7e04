// Package policystore holds the ConfigPolicies in force. Policy is
// configuration too, so it is handled the way configward asks applications
// to handle theirs: each generation is validated and compiled before it is
// used, the set in force is swapped in one step (a request in flight
// finishes on the set it started with), a generation that fails leaves the
// last good one in force, and the hash of what is in force is visible.
package policystore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/policy"
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
	// modules are the custom Rego modules, by file name.
	modules map[string]string
}

// ModulePackage is the package a custom rule's module must declare.
func ModulePackage(id string) string {
	return "configward.custom." + strings.ReplaceAll(id, "-", "_")
}

// Compile validates a ConfigPolicy and compiles its custom rules together
// with the built-in ones. Its error says what is wrong in terms of the
// policy's fields, with the Rego compiler's line numbers.
func Compile(ctx context.Context, cp *v1alpha1.ConfigPolicy) (*Compiled, error) {
	c := &Compiled{Name: cp.Name, Generation: cp.Generation, spec: *cp.Spec.DeepCopy(), modules: map[string]string{}}
	raw, err := json.Marshal(cp.Spec)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	c.Hash = hex.EncodeToString(sum[:])

	c.selector = labels.Everything()
	if cp.Spec.NamespaceSelector != nil {
		if c.selector, err = metav1.LabelSelectorAsSelector(cp.Spec.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("spec.namespaceSelector: %w", err)
		}
	}
	custom := map[string]bool{}
	for i, r := range cp.Spec.CustomRules {
		if policy.Builtin(r.ID) {
			return nil, fmt.Errorf("spec.customRules[%d]: %q is the id of a built-in rule", i, r.ID)
		}
		if custom[r.ID] {
			return nil, fmt.Errorf("spec.customRules[%d]: rule id %q is declared twice", i, r.ID)
		}
		custom[r.ID] = true
		file := fmt.Sprintf("configpolicy/%s/%s.rego", cp.Name, r.ID)
		mod, err := ast.ParseModuleWithOpts(file, r.Rego, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("spec.customRules[%d] (%s): %w", i, r.ID, err)
		}
		if got, want := strings.TrimPrefix(mod.Package.Path.String(), "data."), ModulePackage(r.ID); got != want {
			return nil, fmt.Errorf("spec.customRules[%d] (%s): the module's package is %s; it must be %s", i, r.ID, got, want)
		}
		c.modules[file] = r.Rego
	}
	for _, id := range slices.Sorted(maps.Keys(cp.Spec.Rules)) {
		if !policy.Builtin(id) && !custom[id] {
			return nil, fmt.Errorf("spec.rules: unknown rule id %q (built-in rules: %s; or declare it in spec.customRules)", id, strings.Join(builtinIDs(), ", "))
		}
	}
	c.pipeline = changecontrol.Identities{Users: cp.Spec.Pipeline.Users, Groups: cp.Spec.Pipeline.Groups}
	for i, sa := range cp.Spec.Pipeline.ServiceAccounts {
		u, err := changecontrol.ParseServiceAccount(sa)
		if err != nil {
			return nil, fmt.Errorf("spec.pipeline.serviceAccounts[%d]: %w", i, err)
		}
		c.pipeline.ServiceAccounts = append(c.pipeline.ServiceAccounts, u)
	}
	if len(c.modules) > 0 {
		if _, err := policy.Compile(ctx, c.modules); err != nil {
			// OPA reports compile errors of prepared queries as a failed
			// "bundle activation"; users wrote no bundle.
			return nil, fmt.Errorf("spec.customRules: %s", strings.Replace(err.Error(), "bundle activation failed: ", "", 1))
		}
	}
	return c, nil
}

func builtinIDs() []string {
	ids := append(slices.Collect(maps.Keys(policy.Defaults)), policy.SubpathConfig)
	slices.Sort(ids)
	return ids
}
