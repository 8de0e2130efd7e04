package admission

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/webhookserver"
)

// ValidateConfigChangesPath is where change control is served.
const ValidateConfigChangesPath = "/validate-config-changes"

// Change control sees every create, update and delete of a ConfigMap or
// Secret: a create is how governed config deleted by any route would come
// back with other content. It sees ConfigSchemas too: a schema is what
// keeps bad values out of governed config, so loosening or deleting one is
// a change like a change to the config it governs; and ConfigSets: a set's
// version is what moves its members. It fails closed (the
// generated configuration, and in the Helm chart the copies scoped to the
// namespaces configward labels as governed): if taking the webhook down let
// anyone edit governed config, the control would be a suggestion.
// Kubernetes' own controllers are let through by identity inside the
// handler, and the Helm chart also skips them with matchConditions before
// any network hop, so namespace deletion and garbage collection do not
// depend on configward being up. It records Events, never for dry-runs.
//
// +kubebuilder:webhook:path=/validate-config-changes,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=configmaps;secrets,verbs=create;update;delete,versions=v1,name=changes.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-config-changes,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=configward.dev,resources=configschemas;configsets,verbs=create;update;delete,versions=v1alpha1,name=schema-changes.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch

var breakGlassEdits = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_break_glass_total",
	Help: "Changes of governed ConfigMaps, Secrets and ConfigSchemas let through with configward.dev/break-glass (creates and updates) or configward.dev/break-glass-delete (deletes), by kind and operation. Dry-runs are not counted.",
}, []string{"kind", "operation"})

func init() { metrics.Registry.MustRegister(breakGlassEdits) }

// ValidateConfigChanges enforces out-of-pipeline-edit and
// config-in-use-delete on updates and deletes of ConfigMaps and Secrets.
type ValidateConfigChanges struct {
	// Inventory answers which workloads consume an object; its cache must
	// index every workload kind, Pods included.
	Inventory *inventory.Inventory
	// Cache reads Namespaces.
	Cache client.Reader
	// Live reads the API server directly. It is used on one path only: the
	// consumers the cache names for a delete are each confirmed to still
	// exist (see consumers).
	Live client.Reader
	Recorder
	// ChangeControl returns the change-control settings of a namespace
	// from the webhook's flags (nil when the namespace is not in the cache);
	// the pipeline identities of the ConfigPolicies selecting it are added.
	ChangeControl func(ns *corev1.Namespace) changecontrol.Settings
	// Policies are the ConfigPolicies in force.
	Policies *configpolicy.Store
	// Schemas say which labels select a ConfigSchema: changing one is a
	// change of governing metadata.
	Schemas *configschema.Store
}

// configKinds is the scope of the webhooks that read ConfigMaps and
// Secrets; Info names the kind.
func configKinds(unjudged string, ops []admissionv1.Operation, kinds ...string) webhookserver.Intake[string] {
	return webhookserver.Intake[string]{
		Operations: ops,
		Unjudged:   unjudged,
		Kind: func(gk schema.GroupKind) (webhookserver.Kind[string], bool) {
			if gk.Group != "" || !slices.Contains(kinds, gk.Kind) {
				return webhookserver.Kind[string]{}, false
			}
			if gk.Kind == "Secret" {
				return webhookserver.Kind[string]{Info: gk.Kind, Resource: "secrets", New: func() client.Object { return &corev1.Secret{} }}, true
			}
			return webhookserver.Kind[string]{Info: gk.Kind, Resource: "configmaps", New: func() client.Object { return &corev1.ConfigMap{} }}, true
		},
	}
}

// Intake implements webhookserver.Handler.
func (h *ValidateConfigChanges) Intake() webhookserver.Intake[string] {
	scope := configKinds("configward has no change-control rules for %s",
		[]admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}, "ConfigMap", "Secret")
	config := scope.Kind
	schemaKind := v1alpha1.GroupVersion.WithKind("ConfigSchema").GroupKind()
	setKind := v1alpha1.GroupVersion.WithKind("ConfigSet").GroupKind()
	scope.Kind = func(gk schema.GroupKind) (webhookserver.Kind[string], bool) {
		switch gk {
		case schemaKind:
			return webhookserver.Kind[string]{Info: gk.Kind, Resource: "configschemas", New: func() client.Object { return &v1alpha1.ConfigSchema{} }}, true
		case setKind:
			return webhookserver.Kind[string]{Info: gk.Kind, Resource: "configsets", New: func() client.Object { return &v1alpha1.ConfigSet{} }}, true
		}
		return config(gk)
	}
	return scope
}

// Review implements webhookserver.Handler.
func (h *ValidateConfigChanges) Review(ctx context.Context, rv *webhookserver.Review[string]) admission.Response {
	req, kind := rv.Request, rv.Kind.Info
	if why, ok := changecontrol.KubernetesWriter(req.UserInfo); ok {
		// Never blocked, and so never made to wait on a lookup it does not
		// need: a cache or API error must not stop garbage collection or
		// namespace deletion.
		return admission.Allowed(why)
	}
	schemaLabels, err := h.Schemas.LabelKeys(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: looking up ConfigSchemas: %w", err))
	}
	r := changecontrol.Request{Operation: string(req.Operation), User: req.UserInfo, Kind: kind, Namespace: req.Namespace}
	var old client.Object
	if req.Operation != admissionv1.Create {
		if old, err = rv.OldObject(); err != nil {
			return webhookserver.Undecodable(err)
		}
		if r.Old, err = contentOf(old, schemaLabels); err != nil {
			return webhookserver.Undecodable(err)
		}
	}
	obj := old
	if rv.Object != nil {
		obj = rv.Object
		if r.New, err = contentOf(obj, schemaLabels); err != nil {
			return webhookserver.Undecodable(err)
		}
	}
	if r.Name = obj.GetName(); r.Name == "" {
		r.Name = req.Name
	}
	ns, err := configpolicy.LookupNamespace(ctx, h.Cache, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: %w", err))
	}
	r.NamespaceTerminating = ns != nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating)
	active := h.Policies.Current()
	p := active.For(ns)
	if p.Revisions && (kind == string(refs.ConfigMap) || p.RevisionSecrets) {
		r.Snapshotted = true
	}
	config := kind == string(refs.ConfigMap) || kind == string(refs.Secret)
	if p.Delivery != nil && config {
		r.ChannelWaves = p.Delivery.Waves
	}
	cc := active.ChangeControl(h.ChangeControl, ns)
	settings := active.Rules(ns)
	if req.Operation == admissionv1.Delete && config && settings.ActionFor(rules.Finding{Rule: rules.ConfigInUseDelete}) != rules.Off {
		if r.Consumers, err = h.consumers(ctx, kind, req.Namespace, r.Name); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: looking up the consumers of %s %s/%s: %w", kind, req.Namespace, r.Name, err))
		}
	}
	v := changecontrol.Decide(cc, r)
	if v.Exempt != "" {
		return admission.Allowed(v.Exempt)
	}
	if v.Refused != "" {
		return admission.Denied(v.Refused)
	}
	// Exemptions count from the stored object: an edit, and a create, cannot
	// exempt itself.
	var exemptions map[string]string
	if old != nil {
		exemptions = old.GetAnnotations()
	}
	out := rules.Apply(settings, v.Findings, exemptions, rules.Options{})
	resp := respond(out, req, obj, h.Recorder, true)
	if v.BreakGlass != "" && len(out.Denied) == 0 {
		h.breakGlass(&resp, obj, req, v, ptr.Deref(req.DryRun, false))
	}
	return resp
}

// consumers lists the live workloads that reference a ConfigMap or Secret.
// The cache answers first; only when it names consumers are they confirmed
// with the API server, since a pipeline that deletes a Deployment and then
// its ConfigMap can be faster than the cache.
func (h *ValidateConfigChanges) consumers(ctx context.Context, kind, namespace, name string) ([]string, error) {
	cached, err := h.Inventory.Consumers(ctx, h.Inventory.WatchedKinds(), refs.Kind(kind), namespace, name)
	if err != nil {
		return nil, err
	}
	live := changecontrol.Live(h.Inventory.Registry(), cached)
	if len(live) == 0 {
		return nil, nil
	}
	return h.confirm(ctx, live)
}

// breakGlass answers a break-glass change: allowed, and recorded four ways
// so the emergency edit is found again when the pipeline next deploys.
func (h *ValidateConfigChanges) breakGlass(resp *admission.Response, obj client.Object, req admission.Request, v changecontrol.Verdict, dryRun bool) {
	what := fmt.Sprintf("%s %s/%s", req.Kind.Kind, req.Namespace, obj.GetName())
	var note string
	switch req.Operation {
	case admissionv1.Delete:
		note = fmt.Sprintf("break-glass by %s: deleted %s outside the pipeline, reason %q", req.UserInfo.Username, what, v.BreakGlass)
	case admissionv1.Create:
		note = fmt.Sprintf("break-glass by %s: created %s outside the pipeline, reason %q", req.UserInfo.Username, what, v.BreakGlass)
	case admissionv1.Update:
		if len(v.Changed) == 0 {
			note = fmt.Sprintf("break-glass by %s: set a new break-glass reason on %s, reason %q", req.UserInfo.Username, what, v.BreakGlass)
			break
		}
		fallthrough
	default:
		note = fmt.Sprintf("break-glass by %s: changed %s of %s outside the pipeline, reason %q", req.UserInfo.Username, strings.Join(v.Changed, ", "), what, v.BreakGlass)
	}
	if req.Operation != admissionv1.Delete && obj.GetAnnotations()[v1alpha1.BreakGlassDeliveryAnnotation] == v1alpha1.BreakGlassImmediate {
		note += "; immediate delivery asked for (" + v1alpha1.BreakGlassDeliveryAnnotation + ": " + v1alpha1.BreakGlassImmediate + ")"
	}
	resp.Warnings = append(resp.Warnings, rules.Warning(rules.Finding{Rule: rules.OutOfPipelineEdit,
		Message: note + ". Recorded; bring the change into version control or the next deployment undoes it."}))
	if dryRun {
		return
	}
	if resp.AuditAnnotations == nil {
		resp.AuditAnnotations = map[string]string{}
	}
	resp.AuditAnnotations["break-glass"] = note
	h.Effects.Record(req, obj, func(ref client.Object) {
		breakGlassEdits.WithLabelValues(req.Kind.Kind, string(req.Operation)).Inc()
		if h.Events != nil {
			h.Events.Eventf(ref, nil, corev1.EventTypeWarning, "BreakGlass", string(req.Operation), "%s", note)
		}
	})
}

// contentOf takes what change control compares of a ConfigMap, Secret,
// ConfigSchema or ConfigSet.
func contentOf(obj client.Object, schemaLabels []string) (*changecontrol.Content, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return changecontrol.FromConfigMap(o, schemaLabels), nil
	case *v1alpha1.ConfigSchema:
		return changecontrol.FromConfigSchema(o)
	case *v1alpha1.ConfigSet:
		return changecontrol.FromConfigSet(o)
	}
	return changecontrol.FromSecret(obj.(*corev1.Secret)), nil
}

// confirm re-reads consumers from the API server and returns the live ones.
func (h *ValidateConfigChanges) confirm(ctx context.Context, consumers []client.Object) ([]string, error) {
	reg := h.Inventory.Registry()
	var current []client.Object
	for _, c := range consumers {
		t, _ := reg.TypeOf(c)
		fresh := t.New()
		err := h.Live.Get(ctx, client.ObjectKeyFromObject(c), fresh)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		current = append(current, fresh)
	}
	return changecontrol.Names(reg, changecontrol.Live(reg, current)), nil
}
