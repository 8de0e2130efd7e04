package v1alpha1

// The analysis of a delivery: the checks that gate its waves (Prometheus
// queries, webhooks) and where their credentials may be sent.

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Analysis is the checks of a delivery and where their queries go.
type Analysis struct {
	// Prometheus is the Prometheus-compatible API the query checks ask;
	// unset: the one configured in the chart (analysis.prometheus).
	// +optional
	Prometheus *PrometheusSource `json:"prometheus,omitempty"`
	// Checks in order; every one must pass.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=name
	Checks []AnalysisCheck `json:"checks"`
}

// PrometheusSource is a Prometheus-compatible HTTP API (Prometheus,
// Thanos, Mimir, VictoriaMetrics).
type PrometheusSource struct {
	// Address is its base URL, http or https.
	// +kubebuilder:validation:Pattern=`^https?://[^?#]+$`
	// +kubebuilder:validation:MaxLength=2048
	Address string `json:"address"`
	// SecretRef names a Secret in configward's own namespace (the only
	// Secrets configward's controller reads for this), labelled
	// configward.dev/analysis-credentials: "true" and annotated
	// configward.dev/analysis-addresses with where its credentials may be
	// sent, with the credentials: key token (a bearer token) or keys
	// username and password (basic auth), and optionally ca.crt (PEM roots
	// that replace the system's for https).
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// SecretReference names a Secret in configward's namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// AnalysisCheck is one check: a query with bounds, or a webhook.
// +kubebuilder:validation:XValidation:rule="has(self.query) != has(self.webhook)",message="a check has either a query or a webhook"
// +kubebuilder:validation:XValidation:rule="!has(self.query) || has(self.max) || has(self.min)",message="a query check needs max, min or both"
// +kubebuilder:validation:XValidation:rule="!has(self.compareTo) || has(self.query)",message="compareTo applies to query checks"
type AnalysisCheck struct {
	// Name of the check, as the record and `configward status` show it.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Query is a PromQL instant query that gives one number, a Go
	// template over the group measured: {{ .Pods }} and {{ .Workloads }}
	// (regular expressions matching exactly their names, for =~),
	// {{ .Namespace }}, {{ .Config }}, {{ .Kind }}, {{ .Delivery }},
	// {{ .Wave }} ("bake" during the bake) and {{ .Group }} ("wave" or
	// "rest").
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query,omitempty"`
	// Max: the value must not be above it (with compareTo: not above the
	// rest's value plus tolerance).
	// +optional
	Max *float64 `json:"max,omitempty"`
	// Min: the value must not be below it (with compareTo: not below the
	// rest's value minus tolerance).
	// +optional
	Min *float64 `json:"min,omitempty"`
	// Interval between two measurements; the first is taken one interval
	// after the wave is healthy.
	// +optional
	// +kubebuilder:default="30s"
	Interval metav1.Duration `json:"interval,omitempty"`
	// FailureLimit is how many failed measurements the check allows; one
	// more fails the wave.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailureLimit int32 `json:"failureLimit,omitempty"`
	// CompareTo: rest measures the same query over the consumers the
	// delivery has not reached yet, over the same window, and judges the
	// wave against them instead of against max and min alone: the natural
	// control group a wave leaves behind. Where no consumer is left (the
	// last wave, the bake) or the rest has no data, max and min apply as
	// they are.
	// +optional
	// +kubebuilder:validation:Enum=rest
	CompareTo string `json:"compareTo,omitempty"`
	// Tolerance is how far the wave may be worse than the rest.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Tolerance *float64 `json:"tolerance,omitempty"`
	// Webhook is called with the delivery, the wave and its workloads and
	// pods; its answer passes or fails the wave.
	// +optional
	Webhook *WebhookCheck `json:"webhook,omitempty"`
	// OnNoData: what a query without data (no series, or NaN such as 0/0)
	// means: Inconclusive halts the delivery for a person to promote or
	// resume; Fail counts a failed measurement.
	// +optional
	// +kubebuilder:default=Inconclusive
	OnNoData Inconclusive `json:"onNoData,omitempty"`
	// OnError: what an unreachable Prometheus or webhook, or a query
	// error, means, as onNoData.
	// +optional
	// +kubebuilder:default=Inconclusive
	OnError Inconclusive `json:"onError,omitempty"`
}

// Inconclusive is what a measurement that says nothing means.
// +kubebuilder:validation:Enum=Fail;Inconclusive
type Inconclusive string

const (
	InconclusiveFail = Inconclusive("Fail")
	InconclusiveWait = Inconclusive("Inconclusive")
)

// CompareToRest: the control group is the consumers not yet reached.
const CompareToRest = "rest"

// WebhookCheck is a check a team's own service answers.
type WebhookCheck struct {
	// URL configward POSTs the check to (JSON: delivery, namespace,
	// config, check, wave, workloads, pods); a 2xx answer
	// {"pass": true|false, "message": "..."} decides. No user info, query
	// string or fragment: the URL is copied into records and Events, and
	// a token belongs in the Secret secretRef names.
	// +kubebuilder:validation:Pattern=`^https?://[^?#]+$`
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// SecretRef names a Secret in configward's own namespace, labelled and
	// annotated as the Prometheus' secretRef is, whose key token is sent
	// as a bearer token.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
	// TimeoutSeconds per attempt; configward tries three times, after a
	// connection error, a timeout or a 5xx answer.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// CABundle (PEM) replaces the system roots for an https URL.
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`
}
