package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigSchema declares what the ConfigMaps it governs must contain. A
// ConfigMap that breaks it is rejected at admission (rule config-schema), so
// a typo never reaches the pods that hot-reload it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cfs,categories=configward
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Governed",type=integer,JSONPath=`.status.governedConfigMaps`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.violatingConfigMaps`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigSchema struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigSchemaSpec   `json:"spec"`
	Status ConfigSchemaStatus `json:"status,omitempty"`
}

// ConfigSchemaSpec says which ConfigMaps are governed and what each key holds.
// A ConfigMap is governed when its name is listed, when the selector matches
// its labels, or when it names this schema in its configward.dev/schema
// annotation.
type ConfigSchemaSpec struct {
	// ConfigMapNames lists governed ConfigMaps of this namespace by name.
	// +optional
	// +listType=set
	ConfigMapNames []string `json:"configMapNames,omitempty"`

	// Selector selects governed ConfigMaps of this namespace by label.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Keys declares the keys (by name or pattern), their format and schema.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	Keys []KeySchema `json:"keys"`

	// AllowUndeclaredKeys lets a governed ConfigMap carry keys no entry of
	// keys matches. Off by default: an unexpected key is usually a typo.
	// +optional
	AllowUndeclaredKeys bool `json:"allowUndeclaredKeys,omitempty"`
}

// KeySchema governs one key, or every key matching a pattern.
type KeySchema struct {
	// Name of the key. Exactly one of name and pattern is set.
	// +optional
	Name string `json:"name,omitempty"`

	// Pattern is a regular expression (RE2) the whole key must match.
	// +optional
	Pattern string `json:"pattern,omitempty"`

	// Format of the value.
	// +kubebuilder:validation:Enum=json;yaml;toml;properties;ini;env;text
	Format string `json:"format"`

	// Required keys must be present (only with name).
	// +optional
	Required bool `json:"required,omitempty"`

	// Schema is a JSON Schema (draft 2020-12) for the parsed value. For
	// text, the value is the string itself, so maxLength and pattern apply.
	// Properties, ini and env values parse to objects of strings.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Schema *apiextensionsv1.JSON `json:"schema,omitempty"`
}

// ConfigSchemaStatus reports whether the schema is in force and what the
// governed ConfigMaps look like against it.
type ConfigSchemaStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True when this generation compiled and is in
	// force, False with the compiler's message when it did not (the last
	// good generation then stays in force).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// The two counts default to 0 in the CRD: the controller's status patch
	// leaves out a count that stays at 0 (nothing changed), so without the
	// default a schema governing nothing, or nothing broken, would show
	// blank GOVERNED and VIOLATIONS columns in kubectl get configschemas.

	// GovernedConfigMaps counts the ConfigMaps this schema governs.
	// +optional
	// +kubebuilder:default=0
	GovernedConfigMaps int32 `json:"governedConfigMaps"`

	// ViolatingConfigMaps counts governed ConfigMaps that break the schema
	// (they were stored before it, or while it was not enforced).
	// +optional
	// +kubebuilder:default=0
	ViolatingConfigMaps int32 `json:"violatingConfigMaps"`

	// Violations lists the first few violating ConfigMaps and their first error.
	// +optional
	// +listType=atomic
	Violations []ConfigMapViolation `json:"violations,omitempty"`
}

// ConfigMapViolation is one ConfigMap that breaks the schema.
type ConfigMapViolation struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// ConfigSchemaList is a list of ConfigSchemas.
//
// +kubebuilder:object:root=true
type ConfigSchemaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigSchema `json:"items"`
}
