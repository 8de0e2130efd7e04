// Package admission holds configward's webhook handlers: each decodes the
// request once, gathers facts (references, inventory), hands them to the
// deciding code, and writes the response. Handlers hold no rule logic.
package admission

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/workload"
)

const (
	// ConfigHashAnnotation on a pod template holds the hash of the config the
	// pods consume; a change to it is what rolls the workload.
	ConfigHashAnnotation = "configward.dev/config-hash"
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
	Decoder   admission.Decoder
	// Namespaces (a cache) and Policies give the rollout settings of the
	// ConfigPolicies selecting the namespace.
	Namespaces client.Reader
	Policies   *policystore.Store
}

// Handle implements admission.Handler.
func (h *ConfigHash) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	kind, ok := workload.Lookup(req.Kind.Kind)
	if !ok || kind.Group != req.Kind.Group {
		// Nothing to stamp; the webhook configuration should not send these.
		return admission.Allowed(fmt.Sprintf("%s is not a workload kind", req.Kind))
	}
	obj, _ := workload.New(kind.Kind)
	if err := h.Decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: cannot decode %s %s/%s: %w", kind.Kind, req.Namespace, req.Name, err))
	}
	if workload.RolloutsDisabled(obj) {
		return admission.Allowed("rollouts disabled by " + workload.RolloutAnnotation)
	}
	if kind.Kind == "Pod" && metav1.GetControllerOf(obj) != nil {
		// Its controller's template already carries the hash it was made from.
		return admission.Allowed("pod created by a controller")
	}
	ns, err := policystore.LookupNamespace(ctx, h.Namespaces, req.Namespace)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("configward could not read namespace %s (%v); no config hash stamped", req.Namespace, err))
	}
	enabled, includeSecrets := h.Policies.Current().Rollouts(ns)
	if !enabled {
		return admission.Allowed("rollouts disabled by ConfigPolicy")
	}
	spec, _ := workload.PodSpec(obj)
	hash, counted, err := h.Inventory.TemplateHash(ctx, req.Namespace, spec, includeSecrets)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"configward could not compute the config hash of %s %s/%s (%v); it will not roll when its config changes until it is applied again",
			kind.Kind, req.Namespace, objectName(req, obj), err))
	}
	annotations, _ := workload.TemplateAnnotations(obj)
	current, stamped := annotations[ConfigHashAnnotation]
	if counted == 0 {
		if !stamped {
			return admission.Allowed("")
		}
		// No rollout-mode config any more: a stale hash would only mislead.
		return patched(req, kind, jsonpatch.Operation{Operation: "remove", Path: workload.AnnotationKeyPatchPath(kind.Kind, ConfigHashAnnotation)})
	}
	if current == hash {
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Update && h.writerIsAhead(kind.Kind, req.OldObject, current, hash) {
		return admission.Allowed("config hash set by the writer")
	}
	if annotations == nil {
		// A JSON patch cannot add a key to a map that is not there.
		return patched(req, kind, jsonpatch.Operation{Operation: "add", Path: workload.AnnotationPatchPath(kind.Kind), Value: map[string]string{ConfigHashAnnotation: hash}})
	}
	return patched(req, kind, jsonpatch.Operation{Operation: "add", Path: workload.AnnotationKeyPatchPath(kind.Kind, ConfigHashAnnotation), Value: hash})
}

// writerIsAhead guards against a webhook replica whose cache lags behind the
// rollout controller's: the controller moves the hash from old to new, and
// this replica, still computing old, must not move it back (that would roll
// the workload twice). When the write itself changes the hash away from the
// value this replica computes, the writer knows newer content; let it be.
func (h *ConfigHash) writerIsAhead(kind string, oldRaw runtime.RawExtension, current, computed string) bool {
	old, _ := workload.New(kind)
	if len(oldRaw.Raw) == 0 || h.Decoder.DecodeRaw(oldRaw, old) != nil {
		return false
	}
	oldAnnotations, _ := workload.TemplateAnnotations(old)
	previous := oldAnnotations[ConfigHashAnnotation]
	return current != previous && computed == previous
}

func patched(req admission.Request, kind workload.Kind, op jsonpatch.Operation) admission.Response {
	if req.DryRun == nil || !*req.DryRun {
		hashesStamped.WithLabelValues(kind.Kind).Inc()
	}
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
