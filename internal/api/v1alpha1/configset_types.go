package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigSet declares configs that must change together: a pipeline writes
// it with its members, each member carrying the set's version in its
// configward.dev/config-set-version annotation. Where delivery is on, the
// set's changes are delivered by one ConfigDelivery once every member
// carries the version (never a part of them), and the set's conditions say
// when that delivery is done, for pipelines and GitOps tools to wait on.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cfset,categories=configward
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Delivery",type=string,JSONPath=`.status.delivery`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigSetSpec   `json:"spec"`
	Status ConfigSetStatus `json:"status,omitempty"`
}

// ConfigSetSpec names the members and the version they must all carry.
type ConfigSetSpec struct {
	// Members are ConfigMaps and Secrets of the set's namespace. A config
	// is a member of one set at most.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	Members []ConfigSetMember `json:"members"`
	// Version is what every member carries in its
	// configward.dev/config-set-version annotation once it holds this
	// version's content: a release, a commit, a date.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.+]*[A-Za-z0-9])?$`
	Version string `json:"version"`
	// TimeoutSeconds: a version whose members do not all carry it this
	// long after the set was written with it stops, nothing of it
	// delivered; a new version starts over.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// ConfigSetMember is one config of a set.
type ConfigSetMember struct {
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ConfigSetStatus says where the set's version stands.
type ConfigSetStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Version is the version the status describes (spec.version when it
	// was observed).
	// +optional
	Version string `json:"version,omitempty"`
	// WaitingSince is when the set was first seen with this version: its
	// timeout counts from then.
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
	// WaitingFor are the members that do not carry the version yet (or do
	// not exist).
	// +optional
	WaitingFor []ConfigSetMember `json:"waitingFor,omitempty"`
	// Delivery is the ConfigDelivery that delivers this version.
	// +optional
	Delivery string `json:"delivery,omitempty"`
	// Conditions in the kstatus convention: Ready once the version is
	// delivered (or, where delivery is off, once every member carries
	// it); Stalled when it timed out, a member is claimed by another set,
	// or its delivery halted or was cancelled; Reconciling exactly when
	// neither.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConfigSetList is a list of ConfigSets.
//
// +kubebuilder:object:root=true
type ConfigSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigSet `json:"items"`
}
