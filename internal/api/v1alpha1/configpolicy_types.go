package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigPolicy sets, for the namespaces it selects, the action of each
// rule, who the deployment pipeline is, the rollout settings, which rules
// objects may exempt themselves from, and custom rules in Rego. Where
// several policies select a namespace, the strictest action wins and the
// pipeline identities are combined. A generation that does not compile is
// refused at admission; one that gets stored anyway (while the webhook was
// not enforcing) leaves the last good generation in force.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cfp,categories=configward
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.activeHash`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigPolicySpec   `json:"spec,omitempty"`
	Status ConfigPolicyStatus `json:"status,omitempty"`
}

// Action is what happens to a request a rule finds a problem with.
// +kubebuilder:validation:Enum=Deny;Warn;Audit;Off
type Action string

// ConfigPolicySpec is one policy.
type ConfigPolicySpec struct {
	// NamespaceSelector selects the namespaces the policy governs; empty
	// selects every namespace configward's webhooks see.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Rules sets built-in and custom rules by id.
	// +optional
	Rules map[string]RuleSettings `json:"rules,omitempty"`
	// Pipeline lists the identities that may change and delete governed
	// ConfigMaps and Secrets (rule out-of-pipeline-edit). Change control is
	// off in a namespace no policy names a pipeline for.
	// +optional
	Pipeline PipelineIdentities `json:"pipeline,omitempty"`
	// Rollouts sets config-hash rollouts.
	// +optional
	Rollouts RolloutSettings `json:"rollouts,omitempty"`
	// Revisions gives config history: every content of rollout-mode config
	// a workload's template names is kept as an immutable snapshot, pods
	// read their revision's snapshots, and a rollback brings its config
	// back.
	// +optional
	Revisions RevisionSettings `json:"revisions,omitempty"`
	// Delivery delivers content changes of shared config in waves, gated
	// on health. Needs spec.revisions.enabled in the same policy.
	// +optional
	Delivery *DeliverySettings `json:"delivery,omitempty"`
	// CustomRules are rules in Rego, following the contract of
	// policies/README.md.
	// +optional
	// +listType=map
	// +listMapKey=id
	CustomRules []CustomRule `json:"customRules,omitempty"`
}

// RuleSettings configures one rule.
type RuleSettings struct {
	// Action of the rule's findings; empty keeps the rule's default.
	// +optional
	Action Action `json:"action,omitempty"`
	// AllowExemption lets an object exempt itself from the rule with the
	// annotation configward.dev/exempt.<rule-id>: "<reason>"; its findings
	// are then audited instead.
	// +optional
	AllowExemption bool `json:"allowExemption,omitempty"`
}

// PipelineIdentities are the identities of the deployment pipeline.
type PipelineIdentities struct {
	// +optional
	// +listType=set
	Users []string `json:"users,omitempty"`
	// +optional
	// +listType=set
	Groups []string `json:"groups,omitempty"`
	// ServiceAccounts as namespace/name.
	// +optional
	// +listType=set
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
}

// RolloutSettings configures config-hash rollouts.
type RolloutSettings struct {
	// Disabled turns config-hash rollouts off: no hash is stamped and no
	// workload is rolled. Where policies disagree, rollouts stay on.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// ExcludeSecrets leaves Secrets out of the hash, so a Secret change does
	// not roll workloads (for Secrets the application re-reads itself).
	// +optional
	ExcludeSecrets bool `json:"excludeSecrets,omitempty"`
	// Flapping says when a ConfigMap or Secret changes content too often
	// for its changes to roll its consumers: a writer whose output differs
	// on every refresh (a template with a random salt, a generator that
	// re-mints), or two controllers fighting over one object. Past the
	// threshold configward stops rolling the object's consumers, takes no
	// snapshot of it and starts no delivery for it, records a
	// ConfigFlapping Event naming its writer, and resumes once the object
	// has been stable for a window. Unset: more than 3 changes in 10m.
	// Where policies disagree, the fewest changes and the longest window
	// win.
	// +optional
	Flapping *FlappingSettings `json:"flapping,omitempty"`
}

// FlappingSettings is the threshold past which an object's content
// changes stop rolling its consumers.
type FlappingSettings struct {
	// Changes is how many content changes within Window are still rolled;
	// one more makes the object flapping.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Changes int32 `json:"changes,omitempty"`
	// Window is the span changes are counted over, and how long the object
	// must stay unchanged before its consumers roll again (a Go duration,
	// 10s to 24h).
	// +optional
	// +kubebuilder:default="10m"
	Window metav1.Duration `json:"window,omitempty"`
}

// RevisionSettings configures config revisions. Where several policies
// select a namespace, revisions are on when any of them turns them on, and
// Secrets are copied when any of them that turns revisions on says so.
type RevisionSettings struct {
	// Enabled keeps an immutable snapshot of each content of the
	// rollout-mode ConfigMaps that workloads in the selected namespaces
	// consume, and points each pod at its revision's snapshots. Needs
	// rollouts (a policy cannot turn both revisions on and rollouts off).
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Secrets snapshots Secrets too: configward's controller then reads
	// Secret values (from the API server, never cached) to copy them.
	// Needs Enabled, and Secrets in the config hash (not
	// rollouts.excludeSecrets).
	// +optional
	Secrets bool `json:"secrets,omitempty"`
}

// CustomRule is one rule written in Rego.
type CustomRule struct {
	// ID is the rule id its findings carry, as used in rules and in
	// configward.dev/exempt.<id>.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	ID string `json:"id"`
	// Action is the default action of the rule's findings.
	// +optional
	// +kubebuilder:default=Warn
	Action Action `json:"action,omitempty"`
	// Rego is the module (v1 syntax). Its package must be
	// configward.custom.<id with - as _>, and it defines the set findings.
	// +kubebuilder:validation:MinLength=1
	Rego string `json:"rego"`
}

// ConfigPolicyStatus reports which generation is in force.
type ConfigPolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when this generation compiled and is in
	// force, False with the error when not (the last good generation stays
	// in force).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ActiveHash identifies the generation in force (sha256 of its spec).
	// +optional
	ActiveHash string `json:"activeHash,omitempty"`
}

// ConfigPolicyList is a list of ConfigPolicies.
//
// +kubebuilder:object:root=true
type ConfigPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigPolicy `json:"items"`
}
