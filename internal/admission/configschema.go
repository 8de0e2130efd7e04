package admission

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/schemastore"
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
	Schemas *schemastore.Store
	Decoder admission.Decoder
	// Policies and Namespaces give config-schema's action in the namespace
	// and whether a ConfigMap may exempt itself.
	Policies   *policystore.Store
	Namespaces client.Reader
	Recorder
}

// Handle implements admission.Handler.
func (h *ValidateConfigMaps) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "ConfigMap" || req.Kind.Group != "" {
		return admission.Allowed(fmt.Sprintf("configward has no schema rules for %s", req.Kind))
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if len(req.Object.Raw) == 0 {
		return admission.Denied("configward: malformed admission request: no ConfigMap in the request")
	}
	var cm corev1.ConfigMap
	if err := h.Decoder.DecodeRaw(req.Object, &cm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the ConfigMap in this request cannot be decoded: %w", err))
	}
	if cm.Namespace == "" {
		cm.Namespace = req.Namespace
	}
	governing, missing, err := h.Schemas.For(ctx, &cm)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: looking up ConfigSchemas: %w", err))
	}
	findings := schemastore.Findings(&cm, governing, missing)
	if len(findings) == 0 {
		return admission.Allowed("")
	}
	ns, err := policystore.LookupNamespace(ctx, h.Namespaces, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: %w", err))
	}
	out := rules.Apply(h.Policies.Current().Settings(ns), findings, cm.Annotations, rules.Options{Unchanged: h.valuesUnchanged(req, &cm)})
	return respond(out, req, &cm, h.Recorder, true)
}

// valuesUnchanged reports whether an update leaves the ConfigMap's values
// as they were. A ConfigMap that broke a schema added after it must stay
// writable for everything but its values (the garbage collector removing a
// dangling owner reference, a controller removing its finalizer); its
// findings then come back as warnings.
func (h *ValidateConfigMaps) valuesUnchanged(req admission.Request, cm *corev1.ConfigMap) bool {
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return false
	}
	var old corev1.ConfigMap
	if h.Decoder.DecodeRaw(req.OldObject, &old) != nil {
		return false
	}
	return maps.Equal(old.Data, cm.Data) && maps.EqualFunc(old.BinaryData, cm.BinaryData, bytes.Equal)
}

// ValidateConfigSchemas rejects schemas that do not compile, with the
// compiler's message, so a broken schema never replaces a good one.
type ValidateConfigSchemas struct {
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (h *ValidateConfigSchemas) Handle(_ context.Context, req admission.Request) admission.Response {
	var cs v1alpha1.ConfigSchema
	return validateObject(req, h.Decoder, "ConfigSchema", &cs, func() field.ErrorList {
		if cs.Namespace == "" {
			cs.Namespace = req.Namespace
		}
		_, errs := schemastore.Validate(&cs)
		return errs
	})
}
