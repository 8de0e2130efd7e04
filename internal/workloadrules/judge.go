// Package workloadrules is the one judgement of a workload by configward's
// rules: the facts of what its pod spec consumes, the rollout settings of
// its namespace, the Rego rules in force, and the ConfigPolicies' actions
// and exemptions. Admission, `configward check` and the Reports of
// existing workloads all judge here, so they cannot find different things
// in the same workload.
package workloadrules

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/builtinrules"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
)

// Subject is one workload to judge, with what is known around it.
type Subject struct {
	Workload workload.Object
	// Spec is the workload's pod spec, as Workload.PodSpec read it. A
	// template that cannot be read as a pod spec must be refused or
	// reported by the caller, never judged as empty.
	Spec *corev1.PodSpec
	// Namespace is the workload's namespace object: its labels select the
	// ConfigPolicies. Nil when it is not known (matched with no labels).
	Namespace *corev1.Namespace
	// Request says how the workload came in (kind, namespace and name are
	// the workload's; an existing or offline one is judged as a CREATE).
	Request ruleinput.Request
	// Targets answers what is known of the ConfigMaps and Secrets it
	// references.
	Targets ruleinput.TargetLookup
	// Objects returns the object and the old object as JSON; it is called
	// only when custom rules, which read them, are in force.
	Objects func() (object, oldObject []byte, err error)
	// Unchanged says the write leaves the pod spec as it was: its denials
	// come back as warnings (see rules.Options).
	Unchanged bool
}

// Judgement is what the rules made of a workload.
type Judgement struct {
	rules.Outcome
	// References are the workload's references with what is known of each
	// target, as the rules saw them.
	References []ruleinput.Reference
	// Evaluation is how long the rules took to evaluate.
	Evaluation time.Duration
}

// ErrObject marks a judgement that failed on the object itself (custom
// rules could not read it): the request is at fault, not configward.
var ErrObject = errors.New("the object cannot be read")

// Judge runs the rules in force on a workload and decides their actions.
func Judge(ctx context.Context, active *configpolicy.Active, s Subject) (Judgement, error) {
	input, err := ruleinput.WorkloadInput(s.Request, s.Workload, s.Spec, s.Targets)
	if err != nil {
		return Judgement{}, fmt.Errorf("gathering facts: %w", err)
	}
	if !active.For(s.Namespace).Rollouts {
		// A ConfigPolicy that turns rollouts off here leaves rollout-mode
		// config mounted with subPath no way to arrive, as the workload's
		// own opt-out does.
		input.Workload.RolloutDisabled = true
	}
	// The built-in rules run as Go; Rego runs only for a ConfigPolicy's
	// custom rules, on the input document they read.
	start := time.Now()
	findings := builtinrules.Findings(input)
	if version := active.Version; version.WantsObjects {
		if s.Objects != nil {
			if input.Object, input.OldObject, err = s.Objects(); err != nil {
				return Judgement{}, fmt.Errorf("%w: %w", ErrObject, err)
			}
		}
		value, err := input.Value(true)
		if err != nil {
			return Judgement{}, fmt.Errorf("%w: %w", ErrObject, err)
		}
		custom, err := version.EvalCustom(ctx, value)
		if err != nil {
			return Judgement{}, fmt.Errorf("evaluating rules: %w", err)
		}
		findings = append(findings, custom...)
	}
	rules.SortFindings(findings)
	took := time.Since(start)
	out := rules.Apply(active.Rules(s.Namespace), findings, s.Workload.Obj.GetAnnotations(), rules.Options{Unchanged: s.Unchanged})
	return Judgement{Outcome: out, References: input.References, Evaluation: took}, nil
}

// JudgedAsOwned says why a workload is not judged on its own: a workload
// of a kind of reg controls it (a Deployment's ReplicaSets, any workload's
// Pods) and user, who writes it, is that kind's controller. The rules ran
// on that owner; refusing what it creates would only stop an admitted
// workload from scaling, and judging it again would record every finding
// once more. Any other controller proves nothing, and neither does a
// controller reference anyone else writes (see Registry.WrittenByOwner).
func JudgedAsOwned(reg *workload.Registry, w workload.Object, user string) (string, bool) {
	if !reg.WrittenByOwner(w.Obj, user) {
		return "", false
	}
	return "created by a " + metav1.GetControllerOf(w.Obj).Kind + ", which was judged", true
}
