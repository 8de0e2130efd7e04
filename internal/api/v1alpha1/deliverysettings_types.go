package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a ConfigPolicy says about delivery in waves; a ConfigDelivery keeps
// a copy of the settings it started with (configdelivery_types.go).

// DeliverySettings deliver a content change of shared config to its
// consumers in waves, each gated on the health of the workloads it rolled.
// Delivery needs revisions: a consumer whose wave has not come keeps its
// pinned revision, and that is only possible where the old content is kept.
// Where several policies select a namespace, the delivery settings of the
// first of them by name that has any apply there.
type DeliverySettings struct {
	// Waves in order; a consumer belongs to the first wave that selects
	// it. A wave with neither selector nor percent takes every consumer
	// left; consumers no wave selects go to the last wave.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	Waves []Wave `json:"waves"`
	// ProgressDeadlineSeconds: a wave not healthy this long after its
	// first patch halts the delivery.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`
	// SoakSeconds: a healthy wave stays healthy this long before the next
	// starts.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	SoakSeconds *int32 `json:"soakSeconds,omitempty"`
	// OnFailure: Halt leaves every workload where it is; Rollback also
	// takes the failed wave back to the revisions it ran before.
	// +optional
	// +kubebuilder:default=Halt
	OnFailure FailurePolicy `json:"onFailure,omitempty"`
	// PropagationSeconds is how long a wave of hot config waits, after it
	// wrote its channels, for pods without a reload agent (which cannot say
	// when the kubelet swapped the new content in) before it judges their
	// readiness and restarts: the kubelet's longest propagation, its sync
	// period (1 minute by default) plus its cache's delay.
	// +optional
	// +kubebuilder:default=120
	// +kubebuilder:validation:Minimum=0
	PropagationSeconds *int32 `json:"propagationSeconds,omitempty"`
	// Analysis gates each wave, once it is healthy, on what the
	// application says: checks that query a Prometheus-compatible API over
	// the wave's pods (alone, or against the consumers not reached yet),
	// or call a webhook. They run through the wave's soak; a wave completes
	// once its soak is over and each check has been measured and passed.
	// +optional
	Analysis *Analysis `json:"analysis,omitempty"`
	// BakeSeconds: after the last wave completes, the checks keep running
	// this long over every consumer before the delivery succeeds. A
	// failure then fails the whole delivery: Halt stops it, Rollback also
	// takes every wave back to what it ran before. 0 or unset: no bake.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	BakeSeconds *int32 `json:"bakeSeconds,omitempty"`
}

// FailurePolicy is what a failed wave does.
// +kubebuilder:validation:Enum=Halt;Rollback
type FailurePolicy string

const (
	FailureHalt     FailurePolicy = "Halt"
	FailureRollback FailurePolicy = "Rollback"
)

// Wave is one group of consumers.
type Wave struct {
	// Name of the wave, as status and `configward status` show it.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Selector picks workloads by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Percent takes this share of the consumers not yet placed, rounded
	// up, at least one.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent,omitempty"`
	// Approval makes the wave wait, once the wave before it is healthy and
	// soaked, for a person's `configward delivery promote`.
	// +optional
	Approval bool `json:"approval,omitempty"`
	// PodPercent, for hot config only, takes this share of the pods of
	// each workload the wave takes (rounded up, at least one pod); their
	// other pods belong to the waves after it. A pod's share is decided
	// once, when it is created, and kept for its life. Restart-based
	// deliveries place whole workloads (one template), so they ignore it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	PodPercent *int32 `json:"podPercent,omitempty"`
}
