package admission

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configset"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/webhookserver"
)

// ValidateConfigSetsPath is where ConfigSets are checked.
const ValidateConfigSetsPath = "/validate-configsets"

// Fails closed: a pipeline writes its set and can retry, and a set stored
// against these checks would only stall (the controller judges the same
// facts again, configset.Judge, and stalls the newer of two sets that
// claim one config, whichever replica let it in).
//
// +kubebuilder:webhook:path=/validate-configsets,mutating=false,failurePolicy=fail,sideEffects=None,groups=configward.dev,resources=configsets,verbs=create;update,versions=v1alpha1,name=configsets.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5
//
// +kubebuilder:rbac:groups=configward.dev,resources=configsets,verbs=get;list;watch

// ValidateConfigSets refuses a ConfigSet that lists a config another set
// already lists (read from the API server, so two replicas' caches cannot
// both miss the other), whose existing members do not share a reload mode,
// or, where delivery is on, that lists a Secret whose content is not kept
// (revisions.secrets off): its members could not move together.
type ValidateConfigSets struct {
	Inventory  *inventory.Inventory
	Namespaces client.Reader
	Policies   *configpolicy.Store
	// Live reads the namespace's ConfigSets from the API server.
	Live client.Reader
}

// Intake implements webhookserver.Handler.
func (h *ValidateConfigSets) Intake() webhookserver.Intake[string] {
	return ownKind("ConfigSet", "configsets", func() client.Object { return &v1alpha1.ConfigSet{} })
}

// Review implements webhookserver.Handler.
func (h *ValidateConfigSets) Review(ctx context.Context, r *webhookserver.Review[string]) admission.Response {
	set := r.Object.(*v1alpha1.ConfigSet)
	name := fmt.Sprintf("ConfigSet %s/%s", r.Namespace, set.Name)
	var others v1alpha1.ConfigSetList
	if err := h.Live.List(ctx, &others, client.InNamespace(r.Namespace)); err != nil {
		return admission.Errored(500, fmt.Errorf("reading the ConfigSets of %s: %w", r.Namespace, err))
	}
	var problems []string
	for _, m := range configset.Members(set) {
		for i := range others.Items {
			if o := &others.Items[i]; o.Name != set.Name && configset.Lists(o, m) {
				problems = append(problems, fmt.Sprintf("%s is a member of ConfigSet %s: a config belongs to one set (take it out of one of them)", m, o.Name))
			}
		}
	}
	policy, err := h.Policies.For(ctx, h.Namespaces, r.Namespace)
	if err != nil {
		return admission.Errored(500, err)
	}
	var hot, cold []string
	for _, m := range configset.Members(set) {
		o, err := h.Inventory.Get(ctx, m.Kind, r.Namespace, m.Name)
		if err != nil {
			return admission.Errored(500, err)
		}
		if !o.Exists {
			continue // the pipeline writes it next; the set waits for it
		}
		if o.Mode == inventory.Hot {
			hot = append(hot, m.String())
		} else {
			cold = append(cold, m.String())
		}
		if policy.Delivery != nil && m.Kind == refs.Secret && !policy.RevisionSecrets {
			problems = append(problems, fmt.Sprintf("%s: delivery keeps a Secret's content only with revisions.secrets in the namespace's ConfigPolicy (%s), so it cannot move with the others (turn revisions.secrets on there, or leave the Secret out)", m, policy.DeliveryPolicy))
		}
	}
	if len(hot) > 0 && len(cold) > 0 {
		problems = append(problems, fmt.Sprintf("members share their reload mode: %s reload in place (hot) and %s roll their workloads (give them one %s, or make them two sets)", strings.Join(hot, ", "), strings.Join(cold, ", "), v1alpha1.ReloadAnnotation))
	}
	if len(problems) > 0 {
		return admission.Denied(fmt.Sprintf("[config-set] %s: %s.", name, strings.Join(problems, "; ")))
	}
	return admission.Allowed("")
}
