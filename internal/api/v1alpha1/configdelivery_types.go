package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigDelivery is one delivery of a content change of a ConfigMap (or
// Secret) to its consumers in waves. configward's controller creates it and
// moves it on in its status; people ask it to promote, halt or resume
// through spec.request, which RBAC can grant apart from the status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cfd,categories=configward
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.spec.config.name`
// +kubebuilder:printcolumn:name="Members",type=string,JSONPath=`.status.memberList`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.config.kind`,priority=1
// +kubebuilder:printcolumn:name="Wave",type=string,JSONPath=`.status.currentWave`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigDelivery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigDeliverySpec   `json:"spec,omitempty"`
	Status ConfigDeliveryStatus `json:"status,omitempty"`
}

// ConfigDeliverySpec says what is delivered, with which settings (copied
// from the ConfigPolicy when the delivery starts, so a policy edit changes
// the next delivery, not this one), and what a person asked for.
type ConfigDeliverySpec struct {
	// Config is the ConfigMap or Secret delivered; for a change set, its
	// first member (by kind, then name), which names the record.
	Config ConfigRef `json:"config"`
	// Members, for a change set (configs that workloads consume together,
	// changed within one batch window), lists every config the delivery
	// delivers as one, Config first: one placement, one gate, one approval
	// and one halt or rollback for all of them, so no workload's template
	// holds one member's new content with another's old. Empty for a
	// delivery of Config alone.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Members []ConfigRef `json:"members,omitempty"`
	// Sequence numbers the deliveries of one config: 1 for its first, one
	// more for each next (the record's name ends with it).
	Sequence int64 `json:"sequence"`
	// Policy is the ConfigPolicy whose delivery settings apply.
	Policy string `json:"policy"`
	// Settings are the policy's delivery settings when it started.
	Settings DeliverySettings `json:"settings"`
	// Hot: the config is hot (its pods reload it in place). Its waves
	// write the config's channels, the copies each group of pods mounts,
	// instead of re-stamping workloads, and each wave's gate is its pods'
	// reload reports.
	// +optional
	Hot bool `json:"hot,omitempty"`
	// ConfigSet, for a delivery of a declared ConfigSet's version, names
	// the set and the version (the set's members are Members).
	// +optional
	ConfigSet *ConfigSetVersion `json:"configSet,omitempty"`
	// Request is what a person asked for last; configward's webhook records
	// who. The controller acts on each request once (status.handledRequest).
	// +optional
	Request *DeliveryRequest `json:"request,omitempty"`
	// BreakGlass: the delivered content was written with a new
	// configward.dev/break-glass reason (change control recorded who).
	// Approvals are skipped; the waves and their checks still apply,
	// unless the same write asked for an immediate delivery.
	// +optional
	BreakGlass *BreakGlassDelivery `json:"breakGlass,omitempty"`
}

// ConfigSetVersion is one version of a ConfigSet: each generation of
// the set is delivered once.
type ConfigSetVersion struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	Generation int64  `json:"generation"`
}

// BreakGlassDelivery is the emergency write a delivery delivers.
type BreakGlassDelivery struct {
	// Reason is the write's configward.dev/break-glass annotation.
	Reason string `json:"reason"`
	// Immediate: the write also asked, with
	// configward.dev/break-glass-delivery: Immediate, for every wave at
	// once, without checks.
	// +optional
	Immediate bool `json:"immediate,omitempty"`
}

// ConfigRef names a ConfigMap or Secret in the delivery's namespace.
type ConfigRef struct {
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	Name string `json:"name"`
	// ResourceVersion is the config's when the delivery started: the
	// write whose content it delivers (or a later one that changed no
	// content). `configward delivery wait` tells from it whether the
	// config's newest write has a delivery yet.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// DeliveryAction is what a person asks a delivery to do.
// +kubebuilder:validation:Enum=Promote;Halt;Resume
type DeliveryAction string

const (
	// ActionPromote starts the next wave of a waiting or halted delivery.
	ActionPromote DeliveryAction = "Promote"
	// ActionHalt stops a delivery: no further workload is re-stamped.
	ActionHalt DeliveryAction = "Halt"
	// ActionResume judges a halted delivery's current wave again, with a
	// new deadline.
	ActionResume DeliveryAction = "Resume"
)

// DeliveryRequest is one request of a person.
type DeliveryRequest struct {
	Action DeliveryAction `json:"action"`
	// ID tells one request from the next (the CLI writes a fresh one).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
	// RequestedBy is the user who wrote the request, set by configward's
	// webhook from the API server's record of the request (never taken
	// from the writer).
	// +optional
	RequestedBy string `json:"requestedBy,omitempty"`
}

// DeliveryState is where a delivery stands.
type DeliveryState string

const (
	// DeliveryProgressing: a wave is rolling or soaking.
	DeliveryProgressing DeliveryState = "Progressing"
	// DeliveryWaitingForApproval: the next wave waits for a promote.
	DeliveryWaitingForApproval DeliveryState = "WaitingForApproval"
	// DeliveryHalted: a wave failed or a person halted it; nothing further
	// is re-stamped until a promote or resume.
	DeliveryHalted DeliveryState = "Halted"
	// DeliverySucceeded: every wave is healthy.
	DeliverySucceeded DeliveryState = "Succeeded"
	// DeliverySuperseded: a newer content of the config started a delivery
	// of its own; this one moves nothing any more.
	DeliverySuperseded DeliveryState = "Superseded"
	// DeliveryCancelled: delivery was turned off for the namespace, or the
	// config was deleted; plain rollouts apply again.
	DeliveryCancelled DeliveryState = "Cancelled"
)

// ConfigDeliveryStatus is the delivery's progress: everything a new leader
// needs to carry it on.
type ConfigDeliveryStatus struct {
	// State of the delivery.
	// +optional
	State DeliveryState `json:"state,omitempty"`
	// Reason is a CamelCase word for the state (why it halted, say).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says the reason in a sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// To is the snapshot of the content delivered.
	// +optional
	To string `json:"to,omitempty"`
	// From is the snapshot most consumers read before: the revision a
	// consumer created during the delivery keeps until the last wave.
	// Empty when no consumer's revision named one (revisions were turned on
	// after they were last stamped): their old content is not kept, and
	// pods created for consumers not yet reached read the new content.
	// +optional
	From string `json:"from,omitempty"`
	// Members, for a change set, is each member's To and From (the first
	// member's are also To and From).
	// +optional
	Members []MemberStatus `json:"members,omitempty"`
	// MemberList, for a change set, names its members, comma-separated, as
	// `kubectl get` shows them (a printer column shows one value of a
	// list, so .spec.members[*].name would show the first alone).
	// +optional
	MemberList string `json:"memberList,omitempty"`
	// CurrentWave is the name of the wave rolling, soaking or waiting.
	// +optional
	CurrentWave string `json:"currentWave,omitempty"`
	// Waves, in order, with their workloads (placed when the delivery
	// started; placement never changes within a delivery).
	// +optional
	Waves []WaveStatus `json:"waves,omitempty"`
	// RolledBack: the failed wave went back to its previous revisions
	// (onFailure: Rollback).
	// +optional
	RolledBack bool `json:"rolledBack,omitempty"`
	// HandledRequest is the id of the last request acted on.
	// +optional
	HandledRequest string `json:"handledRequest,omitempty"`
	// History records each state change: when, what and who.
	// +optional
	History []DeliveryEvent `json:"history,omitempty"`
	// StartedAt and FinishedAt bound the delivery.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Bake is the time after the last wave during which the checks keep
	// running over every consumer (bakeSeconds).
	// +optional
	Bake *BakeStatus `json:"bake,omitempty"`
	// ObservedGeneration is the generation (a person's request bumps it)
	// the status and its conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions say the state in the kstatus convention, for tools that
	// wait (kubectl wait, Flux, Helm, Argo CD): Ready is True once the
	// delivery succeeded; Stalled is True when it halted or ended without
	// succeeding (superseded or cancelled); Reconciling is True exactly
	// when neither is (it rolls, soaks, or waits for approval).
	// delivery.Observe decides them from the state.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types of ConfigDeliveries besides Ready (names.go), in the
// kstatus convention.
const (
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// BakeStatus is the bake after the last wave.
type BakeStatus struct {
	StartedAt metav1.Time `json:"startedAt"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// +optional
	Checks []CheckStatus `json:"checks,omitempty"`
}

// CheckStatus is what one check measured.
type CheckStatus struct {
	Name string `json:"name"`
	// Measurements taken, and how many of them failed.
	Measurements int32 `json:"measurements"`
	Failures     int32 `json:"failures"`
	// LastAt is when the last measurement was taken.
	// +optional
	LastAt *metav1.Time `json:"lastAt,omitempty"`
	// Result of the last measurement: Passed, Failed, NoData or Error.
	// +optional
	Result string `json:"result,omitempty"`
	// Value measured last over the wave's pods, and Control over the
	// rest's ("" where there is no control group).
	// +optional
	Value string `json:"value,omitempty"`
	// +optional
	Control string `json:"control,omitempty"`
	// Message says the last result with its threshold ("0.2 > max 0.01"),
	// or the error.
	// +optional
	Message string `json:"message,omitempty"`
}

// WaveStatus is one wave.
type WaveStatus struct {
	Name string `json:"name"`
	// Channel, for hot config, is the channel the wave's pods mount.
	// +optional
	Channel string `json:"channel,omitempty"`
	// From, for hot config, is the snapshot the wave's channel held when
	// the delivery started: what it keeps until its wave starts, and gets
	// back when its wave is rolled back.
	// +optional
	From string `json:"from,omitempty"`
	// Froms, for a change set of hot config, are the snapshots each
	// member's channel of the wave held when the delivery started, as the
	// configward.dev/config-snapshots annotation writes them
	// ("ConfigMap/a=a-1f2e3d4c5b,ConfigMap/b=..."); each member's channel
	// of the wave is channel.Name(member, wave). Channel and From are then
	// those of the first member.
	// +optional
	Froms string `json:"froms,omitempty"`
	// Approval: the wave waits for a person before it starts.
	// +optional
	Approval bool `json:"approval,omitempty"`
	// Workloads placed in the wave. For hot config: the workloads with
	// pods in the wave when it started (a workload split by podPercent is
	// in several waves).
	// +optional
	Workloads []DeliveryTarget `json:"workloads,omitempty"`
	// StartedAt: written before the wave's first patch.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// HealthySince: every workload of the wave healthy since then (soak).
	// +optional
	HealthySince *metav1.Time `json:"healthySince,omitempty"`
	// CompletedAt: healthy through the soak (or promoted by a person).
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Health says, per workload that is not healthy (or that cannot show
	// health by itself), what the gate waits for.
	// +optional
	Health []WorkloadHealth `json:"health,omitempty"`
	// Checks are the analysis checks measured through the wave's soak.
	// +optional
	Checks []CheckStatus `json:"checks,omitempty"`
}

// MemberStatus is one member of a change set: the snapshot delivered and
// the one most of its consumers read before ("" when none named one).
type MemberStatus struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// +optional
	To string `json:"to,omitempty"`
	// +optional
	From string `json:"from,omitempty"`
}

// DeliveryTarget is one consumer: its kind (Kind, or Kind.group for other
// groups than apps and batch), name, and the snapshot of the delivered
// config its revision read when the delivery started ("" when none).
type DeliveryTarget struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// +optional
	From string `json:"from,omitempty"`
	// Froms, for a change set, are the snapshots of the members its
	// revision read when the delivery started, as the
	// configward.dev/config-snapshots annotation writes them
	// ("ConfigMap/a=a-1f2e3d4c5b,Secret/b=..."); a member it read no
	// snapshot of is left out.
	// +optional
	Froms string `json:"froms,omitempty"`
}

// WorkloadHealth is what the gate sees of one workload.
type WorkloadHealth struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// State: Progressing, Unready, Failed or Unverified (it cannot show
	// health by itself: paused, OnDelete, opted out, a CronJob, or, for hot
	// config, a pod without a reload agent; it neither blocks nor passes
	// the wave on its own). For hot config, Kind is Pod.
	State string `json:"state"`
	// Message says what the gate waits for or saw.
	Message string `json:"message"`
}

// DeliveryEvent is one entry of a delivery's history.
type DeliveryEvent struct {
	Time metav1.Time `json:"time"`
	// Wave the entry is about.
	// +optional
	Wave string `json:"wave,omitempty"`
	// What happened: Started, WaveStarted, WaveHealthy, SoakRestarted,
	// WaveCompleted, Promoted, Resumed, RequestIgnored (a request that
	// does not apply to the delivery's state), CheckFailed, BakeStarted,
	// ApprovalSkipped, or the state the delivery moved to: Halted,
	// Succeeded, Superseded, Cancelled.
	What string `json:"what"`
	// By is the user who asked, for a person's request.
	// +optional
	By string `json:"by,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// What a delivery's history records (DeliveryEvent.What), besides the
// state a delivery moved to when it halted or ended.
const (
	HistoryStarted     = "Started"
	HistoryWaveStarted = "WaveStarted"
	HistoryWaveHealthy = "WaveHealthy"
	// HistorySoakRestarted: a workload of a soaking wave stopped being
	// healthy; the soak starts over once it is.
	HistorySoakRestarted = "SoakRestarted"
	HistoryWaveCompleted = "WaveCompleted"
	HistoryPromoted      = "Promoted"
	HistoryResumed       = "Resumed"
	// HistoryRequestIgnored: a person's request that does not apply to
	// the delivery's state.
	HistoryRequestIgnored = "RequestIgnored"
	// HistoryCheckFailed: a measurement of a check failed (within its
	// failureLimit, or the one that failed the wave).
	HistoryCheckFailed = "CheckFailed"
	// HistoryBakeStarted: the last wave completed and the bake began.
	HistoryBakeStarted = "BakeStarted"
	// HistoryApprovalSkipped: a break-glass write skipped a wave's
	// approval.
	HistoryApprovalSkipped = "ApprovalSkipped"
)

// ConfigDeliveryList is a list of ConfigDeliveries.
//
// +kubebuilder:object:root=true
type ConfigDeliveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigDelivery `json:"items"`
}
