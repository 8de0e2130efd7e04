// Package admission holds configward's webhook handlers: each decodes the
// request once, gathers facts (references, inventory), hands them to the
// deciding code, and writes the response. Handlers hold no rule logic.
package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/workload"
)

// ConfigHashPath is where the config-hash webhook is served.
const ConfigHashPath = "/mutate-config-hash"

// The mutating webhook fails open: without it a write only misses its hash
// (and the rollout controller, which needs the annotation, leaves it alone);
// failing closed would block every workload write whenever configward is down.
//
// +kubebuilder:webhook:path=/mutate-config-hash,mutating=true,failurePolicy=ignore,sideEffects=None,groups="";apps;batch,resources=pods;deployments;statefulsets;daemonsets;replicasets;jobs;cronjobs,verbs=create;update,versions=v1,name=config-hash.configward.dev,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5

var hashesStamped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_config_hash_stamped_total",
	Help: "Pod templates whose configward.dev/config-hash the mutating webhook set or changed, by workload kind.",
}, []string{"kind"})

func init() { metrics.Registry.MustRegister(hashesStamped) }

// ConfigHash stamps configward.dev/config-hash on pod templates.
type ConfigHash struct {
	Inventory *inventory.Inventory
	// Keys hold the installation's key the hash is keyed with.
	Keys    *hashkey.Source
	Decoder admission.Decoder
	// Namespaces (a cache) and Policies give the rollout settings of the
	// ConfigPolicies selecting the namespace.
	Namespaces client.Reader
	Policies   *policystore.Store
	// Effects records the stamped-hash metric only for requests that could
	// be real.
	Effects *Effects
	// Kinds are the workload kinds stamped: the built-in ones (nil) plus
	// declared custom kinds.
	Kinds *workload.Registry
}

// objectFor lets the review handler decode a workload with its review in
// one pass: stamping never needs the object's bytes.
func (h *ConfigHash) objectFor(k metav1.GroupVersionKind) runtime.Object {
	return workloadObjectFor(h.Kinds, k)
}

// Handle implements admission.Handler.
func (h *ConfigHash) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	kind, ok := h.Kinds.Lookup(schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind})
	if !ok {
		// Nothing to stamp; the webhook configuration should not send these.
		return admission.Allowed(fmt.Sprintf("%s is not a workload kind", req.Kind))
	}
	obj, _ := h.Kinds.New(kind.GroupKind())
	if err := h.Decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: cannot decode %s %s/%s: %w", kind.Kind, req.Namespace, req.Name, err))
	}
	if ref, ok := h.Kinds.TemplateRef(obj); ok {
		return templateRefAnswer(req, kind, obj, ref)
	}
	if workload.RolloutsDisabled(obj) {
		return admission.Allowed("rollouts disabled by " + v1alpha1.RolloutAnnotation)
	}
	if err := h.Kinds.PodSpecError(obj); err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("[config-hash] %s %s/%s: %v, so no config hash is stamped and it will not roll when its config changes. Fix the pod template.",
			kind.Kind, req.Namespace, objectName(req, obj), err))
	}
	if kind.Kind == "Pod" && kind.Group == "" && req.Operation == admissionv1.Update {
		// A Pod's hash records the config it started with; a later update
		// (a label, an image) does not restart it with the config of now.
		return admission.Allowed("a Pod keeps the config hash it was created with")
	}
	if workload.Controlled(obj) {
		// Its owner's template carries the hash it was made from. Changing
		// an owned template would break the owner's bookkeeping: a
		// Deployment finds its ReplicaSets by comparing templates.
		return admission.Allowed("controlled by " + metav1.GetControllerOf(obj).Kind + "; its owner carries the config hash")
	}
	ns, err := policystore.LookupNamespace(ctx, h.Namespaces, req.Namespace)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("configward could not read namespace %s (%v); no config hash stamped", req.Namespace, err))
	}
	enabled, includeSecrets := h.Policies.Current().Rollouts(ns)
	if !enabled {
		return admission.Allowed("rollouts disabled by ConfigPolicy")
	}
	spec, _ := h.Kinds.PodSpec(obj)
	hash, counted, err := h.Inventory.TemplateHash(ctx, h.Keys.Current().Bytes(), req.Namespace, spec, includeSecrets)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"configward could not compute the config hash of %s %s/%s (%v); it will not roll when its config changes until it is applied again",
			kind.Kind, req.Namespace, objectName(req, obj), err))
	}
	annotations, _ := h.Kinds.TemplateAnnotations(obj)
	current, stamped := annotations[v1alpha1.ConfigHashAnnotation]
	if counted == 0 {
		if !stamped {
			return admission.Allowed("")
		}
		// No rollout-mode config any more: a stale hash would only mislead.
		return h.patched(req, kind, obj, "", jsonpatch.Operation{Operation: "remove", Path: h.Kinds.AnnotationKeyPatchPath(kind.GroupKind(), v1alpha1.ConfigHashAnnotation)})
	}
	if current == hash {
		return admission.Allowed("")
	}
	var warnings []string
	if req.Operation == admissionv1.Update && h.writerChangedHash(kind, req.OldObject, current) {
		// The hash always describes the config as it is now; a writer that
		// sets another one (kubectl rollout undo copies an old revision's
		// template) gets the current one, and is told why.
		warnings = append(warnings, fmt.Sprintf("[config-hash] %s %s/%s: the config hash was reset to the current config's. "+
			"A rollback does not bring back old ConfigMap or Secret content; change the config itself to go back.",
			kind.Kind, req.Namespace, objectName(req, obj)))
	}
	return h.patched(req, kind, obj, hash, h.addHash(kind, obj, annotations, hash)).WithWarnings(warnings...)
}

// addHash is the JSON patch operation that sets the hash. A JSON patch
// cannot add a key to a map that is not there: without annotations it adds
// the map, and without template metadata (possible in a custom kind's
// template, never in a typed one) the metadata.
func (h *ConfigHash) addHash(kind workload.Kind, obj runtime.Object, annotations map[string]string, hash string) jsonpatch.Operation {
	gk := kind.GroupKind()
	switch {
	case annotations != nil:
		return jsonpatch.Operation{Operation: "add", Path: h.Kinds.AnnotationKeyPatchPath(gk, v1alpha1.ConfigHashAnnotation), Value: hash}
	case h.Kinds.TemplateMetadataPresent(obj):
		return jsonpatch.Operation{Operation: "add", Path: h.Kinds.AnnotationPatchPath(gk), Value: map[string]string{v1alpha1.ConfigHashAnnotation: hash}}
	default:
		return jsonpatch.Operation{Operation: "add", Path: "/" + strings.Join(h.Kinds.PodTemplatePath(gk), "/"),
			Value: map[string]any{"annotations": map[string]string{v1alpha1.ConfigHashAnnotation: hash}}}
	}
}

// templateRefAnswer answers for a workload that takes its pod template
// from another object (an Argo Rollout's spec.workloadRef). It is never
// stamped: Argo refuses a Rollout whose own template is not empty once
// workloadRef is set. A referenced Deployment is a workload of its own,
// stamped and rolled as usual, and Argo follows its changes; anything else
// (a ReplicaSet, a PodTemplate) configward cannot roll through, and the
// writer is told so.
func templateRefAnswer(req admission.Request, kind workload.Kind, obj client.Object, ref workload.TemplateRef) admission.Response {
	target := ref.Kind + "/" + ref.Name
	if ref.GroupKind() == (schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
		return admission.Allowed(fmt.Sprintf("takes its pod template from %s, which carries the config hash", target))
	}
	why := fmt.Sprintf("configward does not stamp %ss", ref.Kind)
	if ref.GroupKind() == (schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}) {
		why = "configward rolls a referenced template only through a Deployment (a ReplicaSet never replaces its pods)"
	}
	return admission.Allowed("").WithWarnings(fmt.Sprintf(
		"[config-hash] %s %s/%s takes its pod template from %s (%s): %s, so this %s will not roll when its config changes. "+
			"Reference a Deployment, or put the template in the %s.",
		kind.Kind, req.Namespace, objectName(req, obj), target, ref.Path, why, kind.Kind, kind.Kind))
}

// writerChangedHash reports whether an update sets a config hash other than
// the stored one: a rollback, a copied manifest, or configward's own
// controller when this replica's cache is behind its (the controller
// notices that its hash did not stick and tries again).
func (h *ConfigHash) writerChangedHash(kind workload.Kind, oldRaw runtime.RawExtension, written string) bool {
	old, _ := h.Kinds.New(kind.GroupKind())
	if !present(oldRaw) || h.Decoder.DecodeRaw(oldRaw, old) != nil {
		return false
	}
	previous, _ := h.Kinds.TemplateAnnotation(old, v1alpha1.ConfigHashAnnotation)
	return written != "" && written != previous
}

// patched answers with op, which leaves hash ("" for none) on obj's
// template.
func (h *ConfigHash) patched(req admission.Request, kind workload.Kind, obj client.Object, hash string, op jsonpatch.Operation) admission.Response {
	// The metric waits, where callers are not authenticated, for the
	// object as this patch leaves it.
	stamped := obj.DeepCopyObject().(client.Object)
	if hash == "" {
		h.Kinds.RemoveTemplateAnnotation(stamped, v1alpha1.ConfigHashAnnotation)
	} else {
		h.Kinds.SetTemplateAnnotation(stamped, v1alpha1.ConfigHashAnnotation, hash)
	}
	h.Effects.Record(req, stamped, func(client.Object) { hashesStamped.WithLabelValues(kind.Kind).Inc() })
	return admission.Patched("", op)
}

func objectName(req admission.Request, obj metav1.Object) string {
	if req.Name != "" {
		return req.Name
	}
	if obj.GetName() != "" {
		return obj.GetName()
	}
	return obj.GetGenerateName() + "*"
}
