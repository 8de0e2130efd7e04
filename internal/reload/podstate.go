package reload

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
)

// What configward keeps of the agents' reports is one condition on each
// pod (v1alpha1.ReloadConditionType), written by the webhook that takes
// the reports and read by the controller and `configward status`: its
// message holds one PodEntry per hot config the agent watches. It is in
// the API, so a restarted or new leader knows it, and it is bounded (a
// few hundred bytes per config, one per pod): the pod is the one object a
// report may change, and a report that changes nothing writes nothing.

// PodEntry is what a pod's agent last said of one config.
type PodEntry struct {
	// Config is "Kind/name".
	Config string `json:"config"`
	// Content is the ContentID of the content on the pod's disk, when it
	// was the config's content at the report; empty when it was none
	// configward knew (an older content).
	Content   string    `json:"content,omitempty"`
	Result    string    `json:"result"`
	Message   string    `json:"message,omitempty"`
	SwappedAt time.Time `json:"swappedAt"`
	At        time.Time `json:"at"`
	// Set is the set the agent applied the content with (Answer.Sets).
	Set string `json:"set,omitempty"`
}

// ContentID names the content of a ConfigMap or Secret (its key digests)
// under the installation's key, as the config hash does: it tells one
// content from another and reveals nothing of the values without the key.
func ContentID(key []byte, namespace, kind, name string, keyDigests map[string]string) string {
	return digest.PodTemplateHash(key, namespace, []digest.Entry{{Kind: kind, Name: name, Content: digest.Content(keyDigests, nil)}})
}

// Condition reasons.
const (
	ReasonApplied     = "Applied"
	ReasonRejected    = "Rejected"
	ReasonNotCurrent  = "NotCurrent"
	ReasonUnconfirmed = "Unconfirmed"
)

// Condition sums entries up as the pod's condition: True when the program
// applied every config's content, False when it rejected one, Unknown
// otherwise (a content configward did not know, or a result nothing
// confirms). Entries are sorted by config.
func Condition(entries []PodEntry) corev1.PodCondition {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b PodEntry) int { return strings.Compare(a.Config, b.Config) })
	c := corev1.PodCondition{Type: v1alpha1.ReloadConditionType, Status: corev1.ConditionTrue, Reason: ReasonApplied}
	for _, e := range entries {
		switch {
		case e.Result == Rejected:
			c.Status, c.Reason = corev1.ConditionFalse, ReasonRejected
		case c.Status == corev1.ConditionFalse:
		case e.Content == "":
			c.Status, c.Reason = corev1.ConditionUnknown, ReasonNotCurrent
		case e.Result != Applied && c.Reason != ReasonNotCurrent:
			c.Status, c.Reason = corev1.ConditionUnknown, ReasonUnconfirmed
		}
	}
	msg, _ := json.Marshal(entries)
	c.Message = string(msg)
	return c
}

// EntriesOf reads a pod's condition, by config; none for a pod without
// one, or with one configward did not write.
func EntriesOf(pod *corev1.Pod) map[string]PodEntry {
	out := map[string]PodEntry{}
	for _, c := range pod.Status.Conditions {
		if c.Type != v1alpha1.ReloadConditionType {
			continue
		}
		var entries []PodEntry
		if json.Unmarshal([]byte(c.Message), &entries) != nil {
			return out
		}
		for _, e := range entries {
			out[e.Config] = e
		}
	}
	return out
}

// HasAgent says whether the reload agent runs in pod.
func HasAgent(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == AgentContainer })
}

// ReportsHotConfig says whether pod's agent watches its hot config and
// reports what its program applied: the agent runs and the pod asked it to
// reload (v1alpha1.ReloadAgentAnnotation). An agent injected only to check
// a served certificate says nothing of hot config.
func ReportsHotConfig(pod *corev1.Pod) bool {
	_, reloads := pod.Annotations[v1alpha1.ReloadAgentAnnotation]
	return reloads && HasAgent(pod)
}

// Checked says whether pod's agent reads back what its program made of a
// content (v1alpha1.ReloadCheckAnnotation). Such an agent says triggered
// or seen only when its check, read for as long as it reads one, never
// showed the program acting on the content: a reload that came to
// nothing, not one nothing was asked about.
func Checked(pod *corev1.Pod) bool {
	_, checked := pod.Annotations[v1alpha1.ReloadCheckAnnotation]
	return checked
}

// AgentContainer is the agent's container in a pod.
const AgentContainer = "configward-agent"

// PodState is where one pod stands with one hot config.
type PodState string

const (
	// StateApplied: the pod has the config's content now, and its program
	// applied it.
	StateApplied PodState = "applied"
	// StateUnconfirmed: the pod has it, the program was told (or watches
	// its files), and nothing checks what it made of it.
	StateUnconfirmed PodState = "unconfirmed"
	// StateRejected: the pod has it, and its program rejected it: it runs
	// what it had.
	StateRejected PodState = "rejected"
	// StateOlder: the pod has another content (the kubelet has not swapped
	// the new one in yet, or the report of the swap is on its way).
	StateOlder PodState = "older"
	// StatePending: the agent has not reported on the config yet.
	StatePending PodState = "pending"
	// StateNoAgent: no agent reports on the pod's hot config (none runs,
	// or it only checks a served certificate), so nothing says what it
	// applied; never counted as applied.
	StateNoAgent PodState = "no-agent"
)

// States lists the states in the order they are shown.
var States = []PodState{StateApplied, StateUnconfirmed, StateRejected, StateOlder, StatePending, StateNoAgent}

// StateOf is where pod stands with config, whose content is current now
// (a ContentID).
func StateOf(pod *corev1.Pod, entries map[string]PodEntry, config, current string) (PodState, PodEntry) {
	if !ReportsHotConfig(pod) {
		return StateNoAgent, PodEntry{}
	}
	e, ok := entries[config]
	switch {
	case !ok:
		return StatePending, e
	case e.Content == "" || e.Content != current:
		return StateOlder, e
	case e.Result == Rejected:
		return StateRejected, e
	case e.Result == Applied:
		return StateApplied, e
	}
	return StateUnconfirmed, e
}

// Tally is how the pods of one workload stand with one hot config.
type Tally struct {
	// Pods counts pods by state.
	Pods map[PodState]int `json:"pods"`
	// Rejections name the pods whose program rejected the current content,
	// with what it said, sorted by pod (at most MaxRejections).
	Rejections []Rejection `json:"rejections,omitempty"`
}

// Rejection is one pod's program refusing the current content.
type Rejection struct {
	Pod     string `json:"pod"`
	Message string `json:"message"`
}

// MaxRejections bounds the rejections a Tally names: the first few tell
// what is wrong.
const MaxRejections = 3

// Count tallies pods (the live pods of one workload) on config, whose
// content is current now.
func Count(pods []*corev1.Pod, config, current string) Tally {
	t := Tally{Pods: map[PodState]int{}}
	for _, p := range pods {
		s, e := StateOf(p, EntriesOf(p), config, current)
		t.Pods[s]++
		if s == StateRejected {
			t.Rejections = append(t.Rejections, Rejection{Pod: p.Name, Message: e.Message})
		}
	}
	slices.SortFunc(t.Rejections, func(a, b Rejection) int { return strings.Compare(a.Pod, b.Pod) })
	if len(t.Rejections) > MaxRejections {
		t.Rejections = t.Rejections[:MaxRejections]
	}
	return t
}

// Total counts the pods.
func (t Tally) Total() int {
	n := 0
	for _, c := range t.Pods {
		n += c
	}
	return n
}

// Done says every pod that can say so has the current content and its
// program did not reject it: what a pipeline waits for. Pods without an
// agent cannot say, and do not hold it up.
func (t Tally) Done() bool {
	return t.Pods[StateOlder] == 0 && t.Pods[StatePending] == 0 && t.Pods[StateRejected] == 0
}

// Stale counts the pods that run other than the current content: on an
// older one, or having rejected it.
func (t Tally) Stale() int { return t.Pods[StateOlder] + t.Pods[StateRejected] }

// AgentTokenMountedElsewhere names a container of spec, other than the
// agent's, that mounts a volume projecting a service-account token of the
// agent's Audience ("" for none): only the agent may hold that token,
// which speaks for the pod's program to configward's delivery gate.
func AgentTokenMountedElsewhere(spec *corev1.PodSpec) string {
	agentTokens := agentTokenVolumes(spec)
	if len(agentTokens) == 0 {
		return ""
	}
	var containers []corev1.Container
	containers = append(containers, spec.InitContainers...)
	containers = append(containers, spec.Containers...)
	for _, c := range spec.EphemeralContainers {
		containers = append(containers, corev1.Container(c.EphemeralContainerCommon))
	}
	for _, c := range containers {
		if c.Name == AgentContainer && slices.ContainsFunc(spec.InitContainers, func(i corev1.Container) bool { return i.Name == AgentContainer }) {
			continue
		}
		for _, m := range c.VolumeMounts {
			if agentTokens[m.Name] {
				return c.Name
			}
		}
	}
	return ""
}

// agentTokenVolumes names the volumes of spec that project a
// service-account token of the agent's Audience, whatever they are called.
func agentTokenVolumes(spec *corev1.PodSpec) map[string]bool {
	out := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && t.Audience == Audience {
				out[v.Name] = true
			}
		}
	}
	return out
}

// CarriesAgent says whether configward must know pod's spec to answer for
// its reload agent: the agent runs in it (HasAgent: its reports are
// checked against what the pod consumes), or a volume projects a token of
// the agent's Audience (AgentTokenMountedElsewhere decides who may hold
// it). Both are fixed when the pod is created: volumes and init containers
// never change.
func CarriesAgent(pod *corev1.Pod) bool {
	return HasAgent(pod) || len(agentTokenVolumes(&pod.Spec)) > 0
}
