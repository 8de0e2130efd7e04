package admission

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/webhookserver"
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
	Policies *configpolicy.Store
}

// Intake implements webhookserver.Handler.
func (h *ValidateConfigPolicies) Intake() webhookserver.Intake[string] {
	return ownKind("ConfigPolicy", "configpolicies", func() client.Object { return &v1alpha1.ConfigPolicy{} })
}

// Review implements webhookserver.Handler.
func (h *ValidateConfigPolicies) Review(ctx context.Context, r *webhookserver.Review[string]) admission.Response {
	cp := r.Object.(*v1alpha1.ConfigPolicy)
	if errs := h.Policies.Check(ctx, cp); len(errs) > 0 {
		return invalid("ConfigPolicy", cp.Name, errs)
	}
	return admission.Allowed("")
}

// ownKind is the scope of the webhooks of configward's own kinds: a
// create or update of one of them, refused as 422 Invalid with every
// problem its validation finds, so a broken object is never stored in
// place of a good one.
func ownKind(kind, resource string, newObject func() client.Object) webhookserver.Intake[string] {
	return webhookserver.Intake[string]{
		Operations: []admissionv1.Operation{admissionv1.Create, admissionv1.Update},
		Unjudged:   "configward does not validate %s here",
		Kind: func(gk schema.GroupKind) (webhookserver.Kind[string], bool) {
			if gk != v1alpha1.GroupVersion.WithKind(kind).GroupKind() {
				return webhookserver.Kind[string]{}, false
			}
			return webhookserver.Kind[string]{Info: kind, Resource: resource, New: newObject}, true
		},
	}
}
