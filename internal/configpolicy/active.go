package configpolicy

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/rules"
)

// What the ConfigPolicies in force say for one namespace: the rules'
// settings, the pipeline, change control and rollouts.

// selecting returns the policies that select the namespace. A namespace
// the cache does not know yet is matched with no labels.
func (a *Active) selecting(ns *corev1.Namespace) []*Compiled {
	var l map[string]string
	if ns != nil {
		l = ns.Labels
	}
	var out []*Compiled
	for _, p := range a.policies {
		if p.selector.Matches(labelSet(l)) {
			out = append(out, p)
		}
	}
	return out
}

// Fingerprint names what the rules' findings on an object of ns depend on
// in this set: the rule set (built-in and custom rules) and the version of
// every policy selecting ns. It changes for ns only when a change of the
// policies reaches ns, so a cache of findings keyed by it survives the
// policies of other namespaces changing.
func (a *Active) Fingerprint(ns *corev1.Namespace) string {
	var b strings.Builder
	b.WriteString(a.Version.Hash)
	for _, p := range a.selecting(ns) {
		b.WriteString("|" + p.Name + "=" + p.Hash)
	}
	return b.String()
}

// Rules merges the rule settings of the policies selecting ns: the
// strictest action wins, a rule is exemptible only if every selecting
// policy allows it, and custom rules apply only where a policy declaring
// them selects.
func (a *Active) Rules(ns *corev1.Namespace) rules.Settings {
	sel := a.selecting(ns)
	if len(a.policies) == 0 {
		return rules.Settings{}
	}
	s := rules.Settings{Actions: map[string]rules.Action{}, Defaulted: map[string]bool{},
		Custom: map[string]rules.Action{}, Exemptible: map[string]bool{}, Scoped: true}
	exemptVotes := map[string]int{}
	for _, p := range sel {
		for _, r := range p.spec.CustomRules {
			act := rules.Action(r.Action)
			if act == "" {
				act = rules.Warn
			}
			if prev, ok := s.Custom[r.ID]; ok {
				act = rules.Stricter(prev, act)
			}
			s.Custom[r.ID] = act
		}
		for id, rs := range p.spec.Rules {
			if rs.AllowExemption {
				exemptVotes[id]++
			}
			if rs.Action == "" {
				continue
			}
			act := rules.Action(rs.Action)
			if prev, ok := s.Actions[id]; ok {
				act = rules.Stricter(prev, act)
			}
			s.Actions[id] = act
		}
	}
	for id := range s.Actions {
		if !rules.Builtin(id) {
			continue
		}
		for _, p := range sel {
			if rs, ok := p.spec.Rules[id]; !ok || rs.Action == "" {
				s.Defaulted[id] = true
			}
		}
	}
	for id, n := range exemptVotes {
		if n == len(sel) {
			s.Exemptible[id] = true
		}
	}
	return s
}

// Pipeline combines the pipeline identities of the policies selecting ns.
func (a *Active) Pipeline(ns *corev1.Namespace) changecontrol.Identities {
	var ids changecontrol.Identities
	for _, p := range a.selecting(ns) {
		ids = ids.Merge(p.pipeline)
	}
	return ids
}

// ChangeControl is the change-control settings of a namespace: those of
// the webhook's flags (base), with the pipeline identities of the policies
// that select it; a namespace any of them names a pipeline for is governed.
// Admission, the namespace webhook and the controller's namespace labels
// all take governance from here.
func (a *Active) ChangeControl(base func(*corev1.Namespace) changecontrol.Settings, ns *corev1.Namespace) changecontrol.Settings {
	return base(ns).WithPipeline(a.Pipeline(ns))
}

// revisions returns the revision settings in ns: revisions are on where
// any selecting policy turns them on, and Secrets are copied where any
// selecting policy that turns revisions on says so. Rollouts are then on
// too: a policy cannot turn on revisions and turn off rollouts.
func (a *Active) revisions(ns *corev1.Namespace) (enabled, secrets bool) {
	for _, p := range a.selecting(ns) {
		if p.spec.Revisions.Enabled {
			enabled = true
			secrets = secrets || p.spec.Revisions.Secrets
		}
	}
	return enabled, secrets
}

// rollouts returns the rollout settings in ns: rollouts stay on unless
// every selecting policy turns them off, and Secrets stay in the hash
// unless every selecting policy leaves them out.
func (a *Active) rollouts(ns *corev1.Namespace) (enabled, includeSecrets bool) {
	sel := a.selecting(ns)
	if len(sel) == 0 {
		return true, true
	}
	enabled, includeSecrets = false, false
	for _, p := range sel {
		enabled = enabled || !p.spec.Rollouts.Disabled
		includeSecrets = includeSecrets || !p.spec.Rollouts.ExcludeSecrets
	}
	return enabled, includeSecrets
}

// flapping returns the flapping threshold in ns: the default where no
// selecting policy sets one, otherwise the strictest of those set (see
// flapping.Stricter).
func (a *Active) flapping(ns *corev1.Namespace) flapping.Threshold {
	var out *flapping.Threshold
	for _, p := range a.selecting(ns) {
		if p.spec.Rollouts.Flapping == nil {
			continue
		}
		t := FlappingThreshold(*p.spec.Rollouts.Flapping)
		if out != nil {
			t = flapping.Stricter(*out, t)
		}
		out = &t
	}
	if out == nil {
		return flapping.Default
	}
	return *out
}

// FlappingThreshold reads a policy's flapping settings, with the defaults
// for what it leaves unset.
func FlappingThreshold(f v1alpha1.FlappingSettings) flapping.Threshold {
	t := flapping.Threshold{Changes: int(f.Changes), Window: f.Window.Duration}
	if t.Changes == 0 {
		t.Changes = flapping.Default.Changes
	}
	if t.Window == 0 {
		t.Window = flapping.Default.Window
	}
	return t
}

func labelSet(l map[string]string) labels.Set { return labels.Set(l) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// LookupNamespace reads a namespace from a cache; nil when it is not there
// (yet): it then matches only selectors that select everything.
func LookupNamespace(ctx context.Context, reader client.Reader, name string) (*corev1.Namespace, error) {
	var ns corev1.Namespace
	if err := reader.Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return &ns, nil
}
