// Package builtinrules runs configward's built-in rules as Go. policies/
// holds the same rules in Rego: the documented contract, the shape custom
// rules follow, and what the parity suite (parity_test.go, FuzzParity)
// holds this package to, finding for finding, message for message.
//
// They run as Go because in Rego they cost more than everything else a
// review does: building the Rego input document and evaluating five rule
// packages took about 300 µs for a Deployment of 20 references, where these
// functions take a few. Rego still runs where a ConfigPolicy brings custom
// rules (internal/regoengine).
//
// Each function below names the Rego file it mirrors; change both together.
package builtinrules

import (
	"fmt"
	"slices"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/rules"
)

// Findings runs every built-in rule on in. Like the Rego rules' sets of
// findings, it holds each finding once, in no particular order (callers
// sort with rules.SortFindings).
func Findings(in ruleinput.Input) []rules.Finding {
	var out []rules.Finding
	first := ruleinput.FirstOfSource(in.References)
	workload := in.Workload.Display()
	for i := range in.References {
		r := &in.References[i]
		switch r.Via {
		case refs.Env, refs.EnvFrom:
			out = hotConfigInEnv(out, workload, r)
			out = secretInEnv(out, workload, r)
		case refs.Volume, refs.Projected, refs.CSI:
			out = subpathConfig(out, in.Workload, workload, r)
			out = secretFileMode(out, workload, r, first[i])
		}
		out = missingConfigRef(out, workload, r, first[i])
	}
	return unique(out)
}

// hotConfigInEnv mirrors policies/hot_config_in_env.rego.
func hotConfigInEnv(out []rules.Finding, workload string, r *ruleinput.Reference) []rules.Finding {
	if r.Reload() != "hot" {
		return out
	}
	form, ok := envForm(r)
	if !ok {
		return out
	}
	return append(out, rules.Finding{Rule: rules.HotConfigInEnv, Path: r.Path, Message: fmt.Sprintf(
		"%s %s reads %s %s (%s): environment variables are fixed when the container starts, but this %s is marked configward.dev/reload=hot. Mount it as a volume and read the files, or mark it configward.dev/reload=rollout.",
		workload, r.ContainerDisplay(), r.Display(), form, r.Path, r.Kind)})
}

// envForm mirrors env_form in policies/lib.rego: how the value reaches the
// environment. A single-key reference without its key (which the Rego
// function leaves undefined) has none.
func envForm(r *ruleinput.Reference) (string, bool) {
	switch {
	case r.Via == refs.Env && len(r.Keys) > 0:
		return fmt.Sprintf("key %q as an environment variable", r.Keys[0]), true
	case r.Via == refs.EnvFrom:
		return "all keys as environment variables (envFrom)", true
	}
	return "", false
}

// secretInEnv mirrors policies/secret_in_env.rego.
func secretInEnv(out []rules.Finding, workload string, r *ruleinput.Reference) []rules.Finding {
	if r.Kind != refs.Secret {
		return out
	}
	return append(out, rules.Finding{Rule: rules.SecretInEnv, Path: r.Path, Message: fmt.Sprintf(
		"%s %s gets Secret %q as env (%s): env leaks to child processes and dumps and never updates. Mount the Secret as a file.",
		workload, r.ContainerDisplay(), r.Name, r.Path)})
}

// subpathConfig mirrors policies/subpath_config.rego.
func subpathConfig(out []rules.Finding, w ruleinput.Workload, workload string, r *ruleinput.Reference) []rules.Finding {
	if r.Container == "" {
		return out
	}
	reload := r.Reload()
	if reload != "hot" && (reload != "rollout" || !w.RolloutDisabled) {
		return out
	}
	sp, ok := subPath(r)
	if !ok {
		return out
	}
	if reload == "hot" {
		return append(out, rules.Finding{Rule: rules.SubpathConfig, Action: rules.Deny, Path: r.MountFieldPath, Message: fmt.Sprintf(
			"%s %s mounts %s with %s at %s (%s): subPath mounts never receive updates, and this %s is marked configward.dev/reload=hot. Mount the volume as a directory (drop the subPath) and point the app at the file inside it.",
			workload, r.ContainerDisplay(), r.Display(), sp, r.MountPath, r.MountFieldPath, r.Kind)})
	}
	return append(out, rules.Finding{Rule: rules.SubpathConfig, Action: rules.Warn, Path: r.MountFieldPath, Message: fmt.Sprintf(
		"%s %s mounts %s with %s (%s): subPath files never update and config-hash rollouts are off for this workload (its configward.dev/rollout annotation or a ConfigPolicy), so changes never arrive. Drop the subPath or turn rollouts on.",
		workload, r.ContainerDisplay(), r.Display(), sp, r.MountFieldPath)})
}

// subPath mirrors sub_path in policies/subpath_config.rego.
func subPath(r *ruleinput.Reference) (string, bool) {
	switch {
	case r.SubPath != "":
		return fmt.Sprintf("subPath %q", r.SubPath), true
	case r.SubPathExpr != "":
		return fmt.Sprintf("subPathExpr %q", r.SubPathExpr), true
	}
	return "", false
}

// groupOrOther is 0o077: any permission of group or others.
const groupOrOther = 0o077

// secretFileMode mirrors policies/secret_file_mode.rego.
func secretFileMode(out []rules.Finding, workload string, r *ruleinput.Reference, first bool) []rules.Finding {
	if r.Kind != refs.Secret || !first || r.MaxMode&groupOrOther == 0 {
		return out
	}
	return append(out, rules.Finding{Rule: rules.SecretFileMode, Path: r.Path, Message: fmt.Sprintf(
		"%s mounts Secret %q with file mode 0%o (%s): group and others can read it. Set defaultMode to 0400 (0440 with fsGroup).",
		workload, r.Name, r.MaxMode, r.Path)})
}

// missingConfigRef mirrors policies/missing_config_ref.rego.
func missingConfigRef(out []rules.Finding, workload string, r *ruleinput.Reference, first bool) []rules.Finding {
	if r.Optional || !first {
		return out
	}
	if r.Target.Known && !r.Target.Exists {
		out = append(out, rules.Finding{Rule: rules.MissingConfigRef, Path: r.Path, Message: fmt.Sprintf(
			"%s references %s (%s), which does not exist: pods will not start until it does. Create it first or mark the reference optional.",
			workload, r.Display(), r.Path)})
	}
	for _, key := range r.MissingKeys() {
		out = append(out, rules.Finding{Rule: rules.MissingConfigRef, Path: r.Path, Message: fmt.Sprintf(
			"%s reads key %q of %s (%s), which has no such key: pods will not start until it does. Add the key or mark the reference optional.",
			workload, key, r.Display(), r.Path)})
	}
	return out
}

// unique drops repeated findings, as a Rego set holds each value once.
func unique(fs []rules.Finding) []rules.Finding {
	if len(fs) < 2 {
		return fs
	}
	slices.SortFunc(fs, rules.CompareFindings)
	return slices.CompactFunc(fs, func(a, b rules.Finding) bool { return rules.CompareFindings(a, b) == 0 })
}
