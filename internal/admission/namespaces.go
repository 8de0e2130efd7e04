package admission

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/webhookserver"
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
	Recorder
	// ChangeControl and Policies give a namespace's change-control settings
	// as the change-control webhook computes them.
	ChangeControl func(*corev1.Namespace) changecontrol.Settings
	Policies      *configpolicy.Store
}

// Intake implements webhookserver.Handler.
func (h *RecordNamespaceChanges) Intake() webhookserver.Intake[string] {
	return webhookserver.Intake[string]{
		Operations: []admissionv1.Operation{admissionv1.Update},
		Unjudged:   "configward records no changes of %s",
		Kind: func(gk schema.GroupKind) (webhookserver.Kind[string], bool) {
			if gk != (schema.GroupKind{Kind: "Namespace"}) {
				return webhookserver.Kind[string]{}, false
			}
			return webhookserver.Kind[string]{Info: gk.Kind, Resource: "namespaces", New: func() client.Object { return &corev1.Namespace{} }}, true
		},
	}
}

// Review implements webhookserver.Handler.
func (h *RecordNamespaceChanges) Review(_ context.Context, r *webhookserver.Review[string]) admission.Response {
	req := r.Request
	ns := r.Object.(*corev1.Namespace)
	o, err := r.OldObject()
	if err != nil {
		return webhookserver.Undecodable(err)
	}
	old := o.(*corev1.Namespace)
	active := h.Policies.Current()
	before, after := active.ChangeControl(h.ChangeControl, old).Governed, active.ChangeControl(h.ChangeControl, ns).Governed
	cc := active.ChangeControl(h.ChangeControl, ns)
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
	h.Effects.Record(req, ns, func(ref client.Object) {
		changeControlTransitions.WithLabelValues(change).Inc()
		for _, n := range notes {
			if h.Events != nil {
				h.Events.Eventf(ref, nil, corev1.EventTypeWarning, "ChangeControl", "Relabel", "%s", n)
			}
		}
	})
	return resp
}
