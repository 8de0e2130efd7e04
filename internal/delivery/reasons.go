package delivery

// What a delivery says of itself: the reasons of its states, the Events
// its steps record, the outcomes its metrics count.

import (
	"time"
)

// Reasons a delivery's status gives for its state.
const (
	ReasonStarted                  = "Started"
	ReasonWaveStarted              = "WaveStarted"
	ReasonApprovalRequired         = "ApprovalRequired"
	ReasonAllWavesHealthy          = "AllWavesHealthy"
	ReasonWaveFailed               = "WaveFailed"
	ReasonWaveUnhealthy            = "WaveUnhealthy"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonHaltedByUser             = "HaltedByUser"
	// ReasonNotDelivered: delivery was turned off for the namespace, or
	// the config is gone or no longer rollout-mode (Cancelled).
	ReasonNotDelivered = "NotDelivered"
	// ReasonNewerContent: a newer content of the config has a delivery of
	// its own (Superseded).
	ReasonNewerContent = "NewerContent"
	// ReasonSnapshotsBlocked: the snapshot of the delivered content cannot
	// be written (a quota, RBAC or an admission webhook refuses it), so no
	// wave can take it (Halted before the first wave).
	ReasonSnapshotsBlocked = "SnapshotsBlocked"
)

// Reasons of the Kubernetes Events a delivery's steps record. They go on
// the delivered config, except EventWorkloadHalted.
const (
	EventStarted            = "DeliveryStarted"
	EventWaveStarted        = "DeliveryWaveStarted"
	EventWaitingForApproval = "DeliveryWaitingForApproval"
	EventHalted             = "DeliveryHalted"
	EventSucceeded          = "DeliverySucceeded"
	// EventEnded: superseded or cancelled.
	EventEnded = "DeliveryEnded"
	// EventWorkloadHalted goes on each workload of the wave that failed:
	// their owners look there first.
	EventWorkloadHalted = "ConfigDeliveryHalted"
)

// EventReasons are the reasons of every Event a delivery's steps record.
func EventReasons() []string {
	return []string{EventStarted, EventWaveStarted, EventWaitingForApproval, EventHalted, EventSucceeded, EventEnded, EventWorkloadHalted}
}

// WaveOutcome is what became of a wave, as the label of the waves metric
// says it.
type WaveOutcome string

const (
	WaveOutcomeStarted WaveOutcome = "started"
	// WaveOutcomeCompleted: healthy through its soak, or promoted.
	WaveOutcomeCompleted WaveOutcome = "completed"
	WaveOutcomeFailed    WaveOutcome = "failed"
)

const (
	// gatePoll is how often a wave's gate is looked at while it waits:
	// workload status changes wake the controller sooner, pod restarts
	// only with this.
	gatePoll = 2 * time.Second
	// waitingPoll is how often a delivery that waits for a person is
	// looked at; the person's request wakes it sooner.
	waitingPoll = 30 * time.Second
	// soon asks for the next look right after a step's write, so the
	// delivery moves on without waiting for the watch to bring it back.
	soon = time.Millisecond
	// progressWrites is the least time between two writes of a gate's
	// progress message.
	progressWrites = 10 * time.Second
	// historyKept is how many history entries a record keeps, the newest.
	historyKept = 50
)
