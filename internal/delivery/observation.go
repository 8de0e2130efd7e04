package delivery

// What one step of a delivery reads (Observation, Gate) and returns (Step,
// with its Events and Metrics).

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Observation is what the controller gathered for one look at a delivery.
type Observation struct {
	// Now is the time of the look: what the step writes is stamped with
	// it, and the soak and the progress deadline are measured to it.
	Now time.Time
	// Gate is what the gate saw of the current wave's workloads; nil when
	// the controller has not looked (Step.NeedsGate asks it to).
	Gate *Gate
	// LastProgressWrite is when this record's gate progress was last
	// written by the throttle (zero: never; see Step.ProgressWritten).
	LastProgressWrite time.Time
	// Measurements are the checks the controller measured with the gate,
	// those Due said (see analysis.go).
	Measurements []Measurement
}

// Gate is what the gate saw of the current wave's workloads.
type Gate struct {
	// Failed names the first failure; Progressing and Unready say what
	// the others wait for; Health lists the failed and unverified.
	Failed               string
	Progressing, Unready []string
	Health               []v1alpha1.WorkloadHealth
}

// Add counts what HealthOf said of one workload of the wave.
func (g *Gate) Add(t v1alpha1.DeliveryTarget, state, message string) {
	named := fmt.Sprintf("%s %s (%s)", t.Kind, t.Name, message)
	switch state {
	case Failed:
		if g.Failed == "" {
			g.Failed = fmt.Sprintf("%s %s: %s", t.Kind, t.Name, message)
		}
	case Progressing:
		g.Progressing = append(g.Progressing, named)
	case Unready:
		g.Unready = append(g.Unready, named)
	}
	if state == Failed || state == Unverified {
		// The record lists the workloads that decide or do not take part
		// in the gate; the waiting ones are named in its message.
		g.Health = append(g.Health, v1alpha1.WorkloadHealth{Kind: t.Kind, Name: t.Name, State: state, Message: message})
	}
}

// severity orders the states of one workload or pod, the one that holds
// a wave the longest last: a pod judged on several members of a change
// set stands where its worst member does.
var severity = map[string]int{Healthy: 0, Unverified: 1, Unready: 2, Progressing: 3, Failed: 4}

// worse says whether state a holds a wave more than b.
func worse(a, b string) bool { return severity[a] > severity[b] }

// Healthy: every workload of the wave is healthy or unverified.
func (g *Gate) Healthy() bool {
	return g.Failed == "" && len(g.Progressing) == 0 && len(g.Unready) == 0
}

// waiting says what the gate waits for, the first few workloads by name.
func (g *Gate) waiting() string {
	all := append(slices.Clone(g.Unready), g.Progressing...)
	if len(all) > 3 {
		all = append(all[:3], fmt.Sprintf("%d more", len(all)-3))
	}
	return strings.Join(all, ", ")
}

// Step is one transition of a delivery: what to write, then what to tell.
type Step struct {
	// Status is the record's status after the step. It shares with the
	// record whatever the step did not change.
	Status v1alpha1.ConfigDeliveryStatus
	// Write: Status is to be written, with the record's resourceVersion,
	// before anything acts on it (so a stale leader's write fails), and
	// Events and Metrics count only once it is.
	Write bool
	// ProgressWritten: the write is a progress message the throttle let
	// through; the controller keeps the time as the record's next
	// Observation.LastProgressWrite.
	ProgressWritten bool
	// NeedsGate: the step depends on the current wave's gate (the wave of
	// CurrentWave); look again with Observation.Gate filled in.
	NeedsGate bool
	Events    []Event
	Metrics   Metrics
	// Requeue is when to look again (0: when something changes).
	Requeue time.Duration
}

// Event is one Kubernetes Event a step asks the controller to record.
type Event struct {
	// Workloads: recorded on each of these workloads that still exists;
	// none: on the delivered config.
	Workloads []v1alpha1.DeliveryTarget
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type, Reason, Message string
}

// Metrics is what a step adds to the delivery metrics.
type Metrics struct {
	// Waves are the outcomes of the waves the step moved, in order.
	Waves []WaveOutcome
	// Finished is the state a delivery was finished in (Halted included),
	// "" when the step finished none.
	Finished v1alpha1.DeliveryState
}
