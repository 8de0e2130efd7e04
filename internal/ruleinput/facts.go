package ruleinput

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/configward/configward/internal/refs"
)

// What the rules read of a workload and its references beyond their
// fields: names for messages, the reload mode a missing object counts as,
// the keys that are not there. The Rego document (Value) and the built-in
// rules in Go (internal/builtinrules) both take these facts from here, so
// the two can never tell a reference apart differently.

// Display names the workload in messages: Deployment shop/web.
func (w Workload) Display() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// Reload is the target's reload mode as the rules see it: an object that
// does not exist, or does not say, is rollout (what it will have by
// default).
func (r Reference) Reload() string {
	if !r.Target.Exists || r.Target.Reload == "" {
		return "rollout"
	}
	return r.Target.Reload
}

// Display names the referenced object in messages: ConfigMap "settings".
func (r Reference) Display() string { return string(r.Kind) + " " + strconv.Quote(r.Name) }

// ContainerDisplay names the container that uses the reference in
// messages (container "app", init container "setup"), or is empty for a
// volume no container mounts.
func (r Reference) ContainerDisplay() string {
	switch {
	case r.Container == "":
		return ""
	case r.ContainerType == refs.Init:
		return fmt.Sprintf("init container %q", r.Container)
	case r.ContainerType == refs.Ephemeral:
		return fmt.Sprintf("ephemeral container %q", r.Container)
	}
	return fmt.Sprintf("container %q", r.Container)
}

// MissingKeys lists the keys the reference reads that its existing target
// does not have (none when it reads every key or the target is missing).
func (r Reference) MissingKeys() []string {
	if !r.Target.Exists || r.Keys == nil {
		return nil
	}
	var out []string
	for _, k := range r.Keys {
		if !slices.Contains(r.Target.Keys, k) {
			out = append(out, k)
		}
	}
	return out
}

// FirstOfSource says, reference by reference, whether it is the first
// with its field path: a volume mounted by several containers is one
// source, reported once, not once per mount.
func FirstOfSource(references []Reference) []bool {
	out := make([]bool, len(references))
	seen := make(map[string]bool, len(references))
	for i, r := range references {
		out[i] = !seen[r.Path]
		seen[r.Path] = true
	}
	return out
}
