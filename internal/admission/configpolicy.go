package admission

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configset"
	"github.com/configward/configward/internal/refs"
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
// policy declares, Rego that clashes with theirs). It warns about one that
// would turn delivery on without revisions.secrets (or revisions.secrets
// off under delivery) in a namespace where a ConfigSet lists a Secret: the
// set's members could no longer move together, and the controller stalls
// the set's next version. A warning, not a refusal: ConfigSets are written
// by whoever may edit a namespace, and a tenant's set must not veto the
// platform's policy.
type ValidateConfigPolicies struct {
	Policies *configpolicy.Store
	// Namespaces reads Namespaces from the cache; Live lists ConfigSets
	// from the API server (nil: the ConfigSet check is off).
	Namespaces, Live client.Reader
}

// setsShown bounds the sets a refusal names.
const setsShown = 5

// Intake implements webhookserver.Handler.
func (h *ValidateConfigPolicies) Intake() webhookserver.Intake[string] {
	return ownKind("ConfigPolicy", "configpolicies", func() client.Object { return &v1alpha1.ConfigPolicy{} })
}

// Review implements webhookserver.Handler.
func (h *ValidateConfigPolicies) Review(ctx context.Context, r *webhookserver.Review[string]) admission.Response {
	cp := r.Object.(*v1alpha1.ConfigPolicy)
	next, errs := h.Policies.Check(ctx, cp)
	if len(errs) > 0 {
		return invalid("ConfigPolicy", cp.Name, errs)
	}
	if h.Live == nil {
		return admission.Allowed("")
	}
	stranded, err := h.strandedSecrets(ctx, next)
	if err != nil {
		// Policies are judged from memory while this replica's API server
		// is away (another API server may be calling); the controller
		// stalls a set that came apart anyway.
		return admission.Allowed("").WithWarnings("[config-set] ConfigPolicy " + cp.Name + ": spec.revisions.secrets: configward could not read the ConfigSets to check this policy against their Secret members (" + err.Error() + "); a set it leaves without revisions.secrets stalls at its next version")
	}
	if len(stranded) > 0 {
		if len(stranded) > setsShown {
			stranded = append(stranded[:setsShown], fmt.Sprintf("and %d more", len(stranded)-setsShown))
		}
		return admission.Allowed("").WithWarnings("[config-set] ConfigPolicy " + cp.Name + ": spec.revisions.secrets: with this policy, delivery keeps no Secret's content where ConfigSets list Secrets, so their members cannot move together and the next version of those sets stalls: " +
			strings.Join(stranded, "; ") + " (turn revisions.secrets on, or have the Secrets taken out of those sets)")
	}
	return admission.Allowed("")
}

// strandedSecrets names the ConfigSets' Secret members that the policies
// in force keep deliverable (delivery off, or revisions.secrets on) and
// next would not: delivery on and Secrets' content not kept. A set that is
// stranded already is not this write's doing.
func (h *ValidateConfigPolicies) strandedSecrets(ctx context.Context, next *configpolicy.Active) ([]string, error) {
	var sets v1alpha1.ConfigSetList
	if err := h.Live.List(ctx, &sets); err != nil {
		return nil, fmt.Errorf("reading the ConfigSets: %w", err)
	}
	stranded := func(p configpolicy.NamespacePolicy) bool { return p.Delivery != nil && !p.RevisionSecrets }
	now := h.Policies.Current()
	var out []string
	for i := range sets.Items {
		set := &sets.Items[i]
		var secrets []string
		for _, m := range configset.Members(set) {
			if m.Kind == refs.Secret {
				secrets = append(secrets, m.String())
			}
		}
		if len(secrets) == 0 {
			continue
		}
		ns, err := configpolicy.LookupNamespace(ctx, h.Namespaces, set.Namespace)
		if err != nil {
			return nil, err
		}
		if stranded(next.For(ns)) && !stranded(now.For(ns)) {
			out = append(out, fmt.Sprintf("ConfigSet %s/%s lists %s", set.Namespace, set.Name, strings.Join(secrets, ", ")))
		}
	}
	return out, nil
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
