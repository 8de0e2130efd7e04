package admission

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/webhookserver"
)

// Paths of the schema webhooks.
const (
	ValidateConfigMapsPath    = "/validate-configmaps"
	ValidateConfigSchemasPath = "/validate-configschemas"
)

// Both fail closed: a schema is the guard that keeps a broken value from
// reaching every pod that hot-reloads it. The Helm chart scopes the
// fail-closed ConfigMap webhook to namespaces that hold a ConfigSchema
// (configward labels them) and lets a copy for the others fail open, so an
// outage never blocks ConfigMap writes where no schema could refuse them.
// Findings allowed through are recorded as Events, never for dry-runs.
//
// +kubebuilder:webhook:path=/validate-configmaps,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=configmaps,verbs=create;update,versions=v1,name=configmaps.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-configschemas,mutating=false,failurePolicy=fail,sideEffects=None,groups=configward.dev,resources=configschemas,verbs=create;update,versions=v1alpha1,name=configschemas.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5
//
// +kubebuilder:rbac:groups=configward.dev,resources=configschemas,verbs=get;list;watch

// ValidateConfigMaps enforces rule config-schema.
type ValidateConfigMaps struct {
	Schemas *configschema.Store
	// Policies and Namespaces give config-schema's action in the namespace
	// and whether a ConfigMap may exempt itself.
	Policies   *configpolicy.Store
	Namespaces client.Reader
	Recorder
}

// Intake implements webhookserver.Handler.
func (h *ValidateConfigMaps) Intake() webhookserver.Intake[string] {
	return configKinds("configward has no schema rules for %s", []admissionv1.Operation{admissionv1.Create, admissionv1.Update}, "ConfigMap")
}

// Review implements webhookserver.Handler.
func (h *ValidateConfigMaps) Review(ctx context.Context, r *webhookserver.Review[string]) admission.Response {
	cm := r.Object.(*corev1.ConfigMap)
	if cm.Namespace == "" {
		cm.Namespace = r.Namespace
	}
	governing, missing, err := h.Schemas.For(ctx, cm)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: looking up ConfigSchemas: %w", err))
	}
	findings := configschema.Findings(cm, governing, missing)
	left, err := h.schemasLeft(ctx, r, governing)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: looking up ConfigSchemas: %w", err))
	}
	leaving, notes := configschema.Leaving(cm, left)
	findings = append(findings, leaving...)
	if len(findings) == 0 && len(notes) == 0 {
		return admission.Allowed("")
	}
	ns, err := configpolicy.LookupNamespace(ctx, h.Namespaces, r.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: %w", err))
	}
	out := rules.Apply(h.Policies.Current().Rules(ns), findings, cm.Annotations, rules.Options{Unchanged: valuesUnchanged(r, cm)})
	resp := respond(out, r.Request, cm, h.Recorder, true)
	if resp.Allowed {
		h.recordLeaving(&resp, r.Request, cm, notes)
	}
	return resp
}

// schemasLeft are the schemas that governed the stored ConfigMap and do not
// govern the one written.
func (h *ValidateConfigMaps) schemasLeft(ctx context.Context, r *webhookserver.Review[string], governing []configschema.Governing) ([]configschema.Governing, error) {
	if r.Operation != admissionv1.Update {
		return nil, nil
	}
	o, err := r.OldObject()
	if err != nil {
		return nil, err
	}
	old := o.(*corev1.ConfigMap)
	if old.Namespace == "" {
		old.Namespace = r.Namespace
	}
	before, _, err := h.Schemas.For(ctx, old)
	if err != nil {
		return nil, err
	}
	var left []configschema.Governing
	for _, g := range before {
		if !slices.ContainsFunc(governing, func(now configschema.Governing) bool { return now.Name == g.Name }) {
			left = append(left, g)
		}
	}
	return left, nil
}

// recordLeaving tells the user, and records in an Event, that a ConfigMap
// left schemas: what they kept out can now be written.
func (h *ValidateConfigMaps) recordLeaving(resp *admission.Response, req admission.Request, cm *corev1.ConfigMap, notes []string) {
	for _, note := range notes {
		resp.Warnings = append(resp.Warnings, rules.Warning(rules.Finding{Rule: rules.ConfigSchema, Message: note}))
	}
	if len(notes) == 0 || ptr.Deref(req.DryRun, false) {
		return
	}
	h.Effects.Record(req, cm, func(ref client.Object) {
		if h.Events != nil {
			for _, note := range notes {
				h.Events.Eventf(ref, nil, corev1.EventTypeWarning, "LeftConfigSchema", string(req.Operation), "%s", note)
			}
		}
	})
}

// valuesUnchanged reports whether an update leaves the ConfigMap's values
// as they were. A ConfigMap that broke a schema added after it must stay
// writable for everything but its values (the garbage collector removing a
// dangling owner reference, a controller removing its finalizer); its
// findings then come back as warnings.
func valuesUnchanged(r *webhookserver.Review[string], cm *corev1.ConfigMap) bool {
	if r.Operation != admissionv1.Update {
		return false
	}
	o, err := r.OldObject()
	if err != nil {
		return false
	}
	old := o.(*corev1.ConfigMap)
	return maps.Equal(old.Data, cm.Data) && maps.EqualFunc(old.BinaryData, cm.BinaryData, bytes.Equal)
}

// ValidateConfigSchemas rejects schemas that do not compile, with the
// compiler's message, so a broken schema never replaces a good one.
type ValidateConfigSchemas struct{}

// Intake implements webhookserver.Handler.
func (h *ValidateConfigSchemas) Intake() webhookserver.Intake[string] {
	return ownKind("ConfigSchema", "configschemas", func() client.Object { return &v1alpha1.ConfigSchema{} })
}

// Review implements webhookserver.Handler.
func (h *ValidateConfigSchemas) Review(_ context.Context, r *webhookserver.Review[string]) admission.Response {
	cs := r.Object.(*v1alpha1.ConfigSchema)
	if cs.Namespace == "" {
		cs.Namespace = r.Namespace
	}
	if _, errs := configschema.Validate(cs); len(errs) > 0 {
		return invalid("ConfigSchema", cs.Name, errs)
	}
	return admission.Allowed("")
}
