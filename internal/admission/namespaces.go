package admission

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/rules"
)

// RecordNamespaceChangesPath is where namespace relabelling is recorded.
const RecordNamespaceChangesPath = "/record-namespaces"

// Relabelling a namespace can take it out of change control (a label a
// ConfigPolicy or the change-control selector matches on, the ignore label
// where the installation honours one), and removing a label configward
// maintains makes its webhooks fail open there. Either is allowed, as
// namespace labels are the cluster administrator's, but never unrecorded.
// The webhook only records, so it fails open.
//
// +kubebuilder:webhook:path=/record-namespaces,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups="",resources=namespaces,verbs=update,versions=v1,name=namespaces.record.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5

var changeControlTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_change_control_transitions_total",
	Help: "Namespaces relabelled into (entered) or out of (left) change control, and labels configward maintains on namespaces changed by someone else (label-changed). Dry-runs are not counted.",
}, []string{"change"})

func init() { metrics.Registry.MustRegister(changeControlTransitions) }

// RecordNamespaceChanges records a namespace entering or leaving change
// control, and changes to configward's namespace labels by anyone but
// configward: an Event on the namespace, an audit annotation, a metric and a
// warning to the user. It never refuses.
type RecordNamespaceChanges struct {
	Decoder admission.Decoder
	Recorder
	// ChangeControl and Policies give a namespace's change-control settings
	// as the change-control webhook computes them.
	ChangeControl func(*corev1.Namespace) changecontrol.Settings
	Policies      *policystore.Store
}

// Handle implements admission.Handler.
func (h *RecordNamespaceChanges) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != "" || req.Kind.Kind != "Namespace" || req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var old, ns corev1.Namespace
	if err := h.Decoder.DecodeRaw(req.OldObject, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the old Namespace in this request cannot be decoded: %w", err))
	}
	if err := h.Decoder.DecodeRaw(req.Object, &ns); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the Namespace in this request cannot be decoded: %w", err))
	}
	active := h.Policies.Current()
	before, after := active.ChangeControl(h.ChangeControl, &old).Governed, active.ChangeControl(h.ChangeControl, &ns).Governed
	cc := active.ChangeControl(h.ChangeControl, &ns)
	var notes []string
	var change string
	switch {
	case before && !after:
		change = "left"
		notes = append(notes, fmt.Sprintf("namespace %s left change control: changed by %s; its ConfigMaps and Secrets may now be changed by anyone with RBAC", ns.Name, req.UserInfo.Username))
	case !before && after:
		change = "entered"
		notes = append(notes, fmt.Sprintf("namespace %s entered change control: changed by %s; only the pipeline may change its ConfigMaps and Secrets now", ns.Name, req.UserInfo.Username))
	}
	if !cc.Configward.Includes(req.UserInfo) {
		for _, key := range []string{v1alpha1.ChangeControlLabel, v1alpha1.ConfigSchemasLabel} {
			if old.Labels[key] != ns.Labels[key] {
				notes = append(notes, fmt.Sprintf("%s changed label %s of namespace %s from %q to %q: configward maintains it and puts it back; while it is wrong, configward's webhooks fail open there",
					req.UserInfo.Username, key, ns.Name, old.Labels[key], ns.Labels[key]))
				if change == "" {
					change = "label-changed"
				}
			}
		}
	}
	if len(notes) == 0 {
		return admission.Allowed("")
	}
	resp := admission.Allowed("")
	for _, n := range notes {
		resp.Warnings = append(resp.Warnings, rules.Warning(rules.Finding{Rule: rules.OutOfPipelineEdit, Message: n}))
	}
	if ptr.Deref(req.DryRun, false) {
		return resp
	}
	resp.AuditAnnotations = map[string]string{"change-control": notes[0]}
	h.Effects.Record(req, &ns, func(ref client.Object) {
		changeControlTransitions.WithLabelValues(change).Inc()
		for _, n := range notes {
			if h.Events != nil {
				h.Events.Eventf(ref, nil, corev1.EventTypeWarning, "ChangeControl", "Relabel", "%s", n)
			}
		}
	})
	return resp
}
