package admission

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configset"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
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
		if configset.Hot(o.Mode) {
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

// ValidateConfigSetMembersPath is where writes of ConfigSet members are
// checked.
const ValidateConfigSetMembersPath = "/validate-configset-members"

// Fails open, and only for writes of a ConfigMap or Secret that carries a
// set version (the chart's matchCondition keeps every other write away
// before any network hop): an outage of configward must not block config
// writes, and the controller stalls a set whose members came apart anyway
// (configset.Judge). This is the early, clear refusal.
//
// +kubebuilder:webhook:path=/validate-configset-members,mutating=false,failurePolicy=ignore,sideEffects=None,groups="",resources=configmaps;secrets,verbs=create;update,versions=v1,name=configset-members.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5

// ConfigSetMembersMatchCondition keeps every write away from the member
// webhook but those of config that carries a set version.
const ConfigSetMembersMatchCondition = "has(object.metadata.annotations) && '" + v1alpha1.ConfigSetVersionAnnotation + "' in object.metadata.annotations"

// ValidateConfigSetMembers refuses a write of a ConfigSet's member that
// gives it another reload mode than the set's other members have: a
// ConfigMap made hot while the others roll their workloads (or the
// reverse) could not move with them. A write that leaves the member's mode
// as it was is let through, so a set that came apart before can still be
// mended one member at a time.
type ValidateConfigSetMembers struct {
	Inventory *inventory.Inventory
	// Live reads the namespace's ConfigSets from the API server, as
	// ValidateConfigSets does.
	Live client.Reader
}

// Intake implements webhookserver.Handler.
func (h *ValidateConfigSetMembers) Intake() webhookserver.Intake[string] {
	return configKinds("configward has no ConfigSet rules for %s", []admissionv1.Operation{admissionv1.Create, admissionv1.Update}, "ConfigMap", "Secret")
}

// Review implements webhookserver.Handler.
func (h *ValidateConfigSetMembers) Review(ctx context.Context, r *webhookserver.Review[string]) admission.Response {
	annotations := r.Object.GetAnnotations()
	if _, member := annotations[v1alpha1.ConfigSetVersionAnnotation]; !member {
		return admission.Allowed("")
	}
	mode, _ := inventory.ModeOf(annotations)
	if r.Operation == admissionv1.Update {
		old, err := r.OldObject()
		if err != nil {
			return admission.Errored(400, err)
		}
		if was, _ := inventory.ModeOf(old.GetAnnotations()); configset.Hot(was) == configset.Hot(mode) {
			return admission.Allowed("")
		}
	}
	src := revision.Source{Kind: refs.Kind(r.Kind.Info), Name: r.Object.GetName()}
	var sets v1alpha1.ConfigSetList
	if err := h.Live.List(ctx, &sets, client.InNamespace(r.Namespace)); err != nil {
		// An answer with an error refuses whatever the failure policy says:
		// config writes must not wait on configward's API server.
		return admission.Allowed("").WithWarnings(fmt.Sprintf("[config-set] %s %s/%s: configward could not read the ConfigSets of %s to check this write (%v); if it gives a set's member another %s than the others, that set stalls", src.Kind, r.Namespace, src.Name, r.Namespace, err, v1alpha1.ReloadAnnotation))
	}
	var problems []string
	for i := range sets.Items {
		set := &sets.Items[i]
		if !configset.Lists(set, src) {
			continue
		}
		var apart []string
		for _, m := range configset.Members(set) {
			if m == src {
				continue
			}
			o, err := h.Inventory.Get(ctx, m.Kind, r.Namespace, m.Name)
			if err != nil {
				return admission.Allowed("").WithWarnings(fmt.Sprintf("[config-set] %s %s/%s: configward could not read ConfigSet %s's members to check this write (%v); if it gives this member another %s than the others, the set stalls", src.Kind, r.Namespace, src.Name, set.Name, err, v1alpha1.ReloadAnnotation))
			}
			if o.Exists && configset.Hot(o.Mode) != configset.Hot(mode) {
				apart = append(apart, m.String())
			}
		}
		if len(apart) > 0 {
			problems = append(problems, fmt.Sprintf("ConfigSet %s's members share their reload mode, and this write %s while %s %s (give them one metadata.annotations[%s], or take %s out of the set first)",
				set.Name, describeMode(mode), strings.Join(apart, ", "), describeOthers(mode), v1alpha1.ReloadAnnotation, src))
		}
	}
	if len(problems) > 0 {
		return admission.Denied(fmt.Sprintf("[config-set] %s %s/%s: %s.", src.Kind, r.Namespace, src.Name, strings.Join(problems, "; ")))
	}
	return admission.Allowed("")
}

// describeMode says what a write of mode makes of a member.
func describeMode(mode inventory.Mode) string {
	if configset.Hot(mode) {
		return "makes it reload in place (hot)"
	}
	return "makes it roll its workloads"
}

// describeOthers says what the other members do, they being of the other
// mode than mode.
func describeOthers(mode inventory.Mode) string {
	if configset.Hot(mode) {
		return "roll their workloads"
	}
	return "reload in place (hot)"
}
