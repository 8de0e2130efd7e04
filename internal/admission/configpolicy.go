package admission

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/policystore"
)

// ValidateConfigPoliciesPath is where ConfigPolicies are checked.
const ValidateConfigPoliciesPath = "/validate-configpolicies"

// Fails closed: a policy that does not compile must never be stored, or the
// policy in force and the policy users read would differ.
//
// +kubebuilder:webhook:path=/validate-configpolicies,mutating=false,failurePolicy=fail,sideEffects=None,groups=configward.dev,resources=configpolicies,verbs=create;update,versions=v1alpha1,name=configpolicies.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5
//
// +kubebuilder:rbac:groups=configward.dev,resources=configpolicies,verbs=get;list;watch

// ValidateConfigPolicies refuses a ConfigPolicy with Rego that does not
// compile (with the line), an unknown rule id, or an invalid selector.
type ValidateConfigPolicies struct {
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (h *ValidateConfigPolicies) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var cp v1alpha1.ConfigPolicy
	if err := h.Decoder.DecodeRaw(req.Object, &cp); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the ConfigPolicy in this request cannot be decoded: %w", err))
	}
	if _, errs := policystore.Validate(ctx, &cp); len(errs) > 0 {
		return invalid("ConfigPolicy", cp.Name, errs)
	}
	return admission.Allowed("")
}
