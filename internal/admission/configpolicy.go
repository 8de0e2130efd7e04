package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
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
// compile (with the line), an unknown rule id, an invalid selector, or one
// that cannot be in force with the other policies (a custom rule id another
// policy declares, Rego that clashes with theirs).
type ValidateConfigPolicies struct {
	Decoder  admission.Decoder
	Policies *policystore.Store
}

// Handle implements admission.Handler.
func (h *ValidateConfigPolicies) Handle(ctx context.Context, req admission.Request) admission.Response {
	var cp v1alpha1.ConfigPolicy
	return validateObject(req, h.Decoder, "ConfigPolicy", &cp, func() field.ErrorList {
		return h.Policies.Check(ctx, &cp)
	})
}
