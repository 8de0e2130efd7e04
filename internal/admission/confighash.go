// Package admission holds configward's webhook handlers: each starts from a
// review the adapter of webhookserver has checked and decoded, gathers facts
// (references, inventory), hands them to the deciding code, and writes the
// response. Handlers hold no rule logic.
package admission

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/webhookserver"
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
	Keys *hashkey.Source
	// Namespaces (a cache) and Policies give the rollout settings of the
	// ConfigPolicies selecting the namespace.
	Namespaces client.Reader
	Policies   *configpolicy.Store
	// Effects records the stamped-hash metric only for requests that could
	// be real.
	Effects *effects.Ledger
	// Kinds are the workload kinds stamped: the built-in ones plus declared
	// custom kinds.
	Kinds *workload.Registry
}

// Scope implements webhookserver.Handler: stamping never needs the
// object's bytes.
func (h *ConfigHash) Scope() webhookserver.Scope[*workload.Type] {
	// Nothing to stamp on other kinds; the webhook configuration does not
	// send them.
	return workloadScope(h.Kinds, "%s is not a workload kind", nil)
}

// Review implements webhookserver.Handler.
func (h *ConfigHash) Review(ctx context.Context, r *webhookserver.Review[*workload.Type]) admission.Response {
	w := r.Kind.Info.Wrap(r.Object)
	kind := w.Type.Kind.Kind
	if ref, ok := w.TemplateRef(); ok {
		return templateRefAnswer(r, w, ref)
	}
	if w.RolloutsDisabled() {
		return admission.Allowed("rollouts disabled by " + v1alpha1.RolloutAnnotation)
	}
	spec, err := w.PodSpec()
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("[config-hash] %s %s/%s: %v, so no config hash is stamped and it will not roll when its config changes. Fix the pod template.",
			kind, r.Namespace, r.Name(), err))
	}
	if w.Type.OwnTemplate && r.Operation == admissionv1.Update {
		// A Pod's hash records the config it started with; a later update
		// (a label, an image) does not restart it with the config of now.
		return admission.Allowed("a Pod keeps the config hash it was created with")
	}
	if w.Controlled() {
		// Its owner's template carries the hash it was made from. Changing
		// an owned template would break the owner's bookkeeping: a
		// Deployment finds its ReplicaSets by comparing templates.
		return admission.Allowed("controlled by " + controllerKind(w) + "; its owner carries the config hash")
	}
	ns, err := configpolicy.LookupNamespace(ctx, h.Namespaces, r.Namespace)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("configward could not read namespace %s (%v); no config hash stamped", r.Namespace, err))
	}
	enabled, includeSecrets := h.Policies.Current().Rollouts(ns)
	if !enabled {
		return admission.Allowed("rollouts disabled by ConfigPolicy")
	}
	hash, counted, err := h.Inventory.TemplateHash(ctx, h.Keys.Current().Bytes(), r.Namespace, spec, includeSecrets)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"configward could not compute the config hash of %s %s/%s (%v); it will not roll when its config changes until it is applied again",
			kind, r.Namespace, r.Name(), err))
	}
	current, stamped := w.ConfigHash()
	if counted == 0 {
		if !stamped {
			return admission.Allowed("")
		}
		// No rollout-mode config any more: a stale hash would only mislead.
		return h.patched(r, w, "", jsonpatch.Operation{Operation: "remove", Path: w.Type.AnnotationKeyPatchPath(v1alpha1.ConfigHashAnnotation)})
	}
	if current == hash {
		return admission.Allowed("")
	}
	var warnings []string
	if r.Operation == admissionv1.Update && writerChangedHash(r, current) {
		// The hash always describes the config as it is now; a writer that
		// sets another one (kubectl rollout undo copies an old revision's
		// template) gets the current one, and is told why.
		warnings = append(warnings, fmt.Sprintf("[config-hash] %s %s/%s: the config hash was reset to the current config's. "+
			"A rollback does not bring back old ConfigMap or Secret content; change the config itself to go back.",
			kind, r.Namespace, r.Name()))
	}
	return h.patched(r, w, hash, addHash(w, hash)).WithWarnings(warnings...)
}

// addHash is the JSON patch operation that sets the hash. A JSON patch
// cannot add a key to a map that is not there: without annotations it adds
// the map, and without template metadata (possible in a custom kind's
// template, never in a typed one) the metadata.
func addHash(w workload.Object, hash string) jsonpatch.Operation {
	switch {
	case w.TemplateAnnotations() != nil:
		return jsonpatch.Operation{Operation: "add", Path: w.Type.AnnotationKeyPatchPath(v1alpha1.ConfigHashAnnotation), Value: hash}
	case w.TemplateMetadataPresent():
		return jsonpatch.Operation{Operation: "add", Path: w.Type.AnnotationPatchPath(), Value: map[string]string{v1alpha1.ConfigHashAnnotation: hash}}
	default:
		return jsonpatch.Operation{Operation: "add", Path: "/" + strings.Join(w.Type.PodTemplatePath(), "/"),
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
func templateRefAnswer(r *webhookserver.Review[*workload.Type], w workload.Object, ref workload.TemplateRef) admission.Response {
	target := ref.Kind + "/" + ref.Name
	rolls, why := ref.RolledThrough()
	if rolls {
		return admission.Allowed(fmt.Sprintf("takes its pod template from %s, which carries the config hash", target))
	}
	kind := w.Type.Kind.Kind
	return admission.Allowed("").WithWarnings(fmt.Sprintf(
		"[config-hash] %s %s/%s takes its pod template from %s (%s): %s, so this %s will not roll when its config changes. "+
			"Reference a Deployment, or put the template in the %s.",
		kind, r.Namespace, r.Name(), target, ref.Path, why, kind, kind))
}

// writerChangedHash reports whether an update sets a config hash other than
// the stored one: a rollback, a copied manifest, or configward's own
// controller when this replica's cache is behind its (the controller
// notices that its hash did not stick and tries again).
func writerChangedHash(r *webhookserver.Review[*workload.Type], written string) bool {
	old, err := r.OldObject()
	if err != nil {
		return false
	}
	previous, _ := r.Kind.Info.Wrap(old).ConfigHash()
	return written != "" && written != previous
}

// patched answers with op, which leaves hash ("" for none) on w's
// template.
func (h *ConfigHash) patched(r *webhookserver.Review[*workload.Type], w workload.Object, hash string, op jsonpatch.Operation) admission.Response {
	// The metric waits, where callers are not authenticated, for the
	// object as this patch leaves it.
	stamped := w.Type.Wrap(w.Obj.DeepCopyObject().(client.Object))
	if hash == "" {
		stamped.RemoveTemplateAnnotation(v1alpha1.ConfigHashAnnotation)
	} else {
		stamped.SetTemplateAnnotation(v1alpha1.ConfigHashAnnotation, hash)
	}
	h.Effects.Record(r.Request, stamped.Obj, func(client.Object) { hashesStamped.WithLabelValues(w.Type.Kind.Kind).Inc() })
	return admission.Patched("", op)
}

// controllerKind is the kind of the object that controls w.
func controllerKind(w workload.Object) string {
	return metav1.GetControllerOf(w.Obj).Kind
}
