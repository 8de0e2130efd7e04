package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
)

// ValidateWorkloadsPath is where the workload rules are served.
const ValidateWorkloadsPath = "/validate-workloads"

// The validating webhook fails closed on its narrow scope (workload kinds):
// a rule that cannot be checked must not be bypassed by taking the webhook
// down. It records Events for allowed requests, never for dry-runs.
//
// +kubebuilder:webhook:path=/validate-workloads,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="";apps;batch,resources=pods;pods/ephemeralcontainers;deployments;statefulsets;daemonsets;replicasets;jobs;cronjobs,verbs=create;update,versions=v1,name=validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5
//
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_policy_decisions_total",
		Help: "Findings of configward's rules (workload rules and config-schema) at admission, by rule and the action taken (Deny, Warn, Audit). Dry-runs are not counted.",
	}, []string{"rule", "action"})
	evaluationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "configward_policy_evaluation_seconds",
		Help:    "Time to evaluate every rule for one admission request.",
		Buckets: []float64{50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3, 250e-3},
	})
)

var exemptionsUsed = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_exemptions_total",
	Help: "Findings audited instead of enforced because the object carries configward.dev/exempt.<rule-id> with a reason and its ConfigPolicy allows it, by rule. Dry-runs are not counted.",
}, []string{"rule"})

func init() { metrics.Registry.MustRegister(decisions, evaluationSeconds, exemptionsUsed) }

// ValidateWorkloads runs the workload rules on Pods and the workload kinds.
type ValidateWorkloads struct {
	Inventory *inventory.Inventory
	// Policies are the rules and ConfigPolicies in force; Namespaces (a
	// cache) says which policies select the request's namespace.
	Policies   *policystore.Store
	Namespaces client.Reader
	Decoder    admission.Decoder
	Recorder
	// Kinds are the workload kinds judged: the built-in ones (nil) plus
	// declared custom kinds.
	Kinds *workload.Registry
}

// objectFor lets the review handler decode a workload with its review in
// one pass, unless custom rules are in force: they read the object as the
// API server sent it, so the review keeps its bytes.
func (h *ValidateWorkloads) objectFor(k metav1.GroupVersionKind) runtime.Object {
	if h.Policies != nil && h.Policies.Current().Version.WantsObjects {
		return nil
	}
	return workloadObjectFor(h.Kinds, k)
}

// workloadObjectFor is a new object of a built-in workload kind, nil for
// another. A declared custom kind is nil too: its review is decoded the
// general way, keeping the object's bytes, and the handler decodes them
// into an Unstructured (the one-pass decode needs a Go type).
func workloadObjectFor(reg *workload.Registry, k metav1.GroupVersionKind) runtime.Object {
	gk := schema.GroupKind{Group: k.Group, Kind: k.Kind}
	kind, ok := reg.Lookup(gk)
	if !ok || reg.Custom(gk) || k.Version != kind.Version {
		return nil
	}
	obj, _ := reg.New(gk)
	return obj
}

// Handle implements admission.Handler.
func (h *ValidateWorkloads) Handle(ctx context.Context, req admission.Request) admission.Response {
	kind, resp, ok := h.checkRequest(req)
	if !ok {
		return resp
	}
	obj, _ := h.Kinds.New(kind.GroupKind())
	if err := h.Decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the %s in this request cannot be decoded: %w", kind.Kind, err))
	}
	if err := h.Kinds.PodSpecError(obj); err != nil {
		// A template the rules cannot read must not pass unjudged.
		return admission.Denied(fmt.Sprintf("configward: %s %s/%s: %v, so its pod template cannot be judged (its CRD's schema does not check it). Fix the template and apply again.",
			kind.Kind, req.Namespace, objectName(req, obj), err))
	}
	if req.SubResource == "" && h.Kinds.ControlledByWorkload(obj) {
		// The rules ran on the workload that owns it (a Deployment's
		// ReplicaSets, any workload's Pods); refusing what it creates would
		// only stop an admitted workload from scaling, and judging it again
		// would record every finding once more. `kubectl debug` (the
		// ephemeralcontainers subresource) adds to the spec, so it is judged.
		return admission.Allowed("created by a " + metav1.GetControllerOf(obj).Kind + ", which was judged")
	}
	name := objectName(req, obj)
	input, err := h.input(ctx, req, kind, obj, name)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: gathering facts for %s %s/%s: %w", kind.Kind, req.Namespace, name, err))
	}
	ns, err := policystore.LookupNamespace(ctx, h.Namespaces, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: %w", err))
	}
	// One consistent set of rules and settings for the whole request.
	active := h.Policies.Current()
	version := active.Version
	if enabled, _ := active.Rollouts(ns); !enabled {
		// A ConfigPolicy that turns rollouts off here leaves rollout-mode
		// config mounted with subPath no way to arrive, as the workload's
		// own opt-out does.
		input.Workload.RolloutDisabled = true
	}
	if version.WantsObjects {
		// Custom rules read the objects; one decoded with its review
		// (objectFor) is encoded again for them.
		if input.Object, err = rawJSON(req.Object); err == nil {
			input.OldObject, err = rawJSON(req.OldObject)
		}
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: %s %s/%s: %w", kind.Kind, req.Namespace, name, err))
		}
	}
	value, err := input.Value(version.WantsObjects)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: %s %s/%s: %w", kind.Kind, req.Namespace, name, err))
	}
	start := time.Now()
	findings, err := version.Eval(ctx, value)
	evaluationSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: evaluating rules for %s %s/%s: %w", kind.Kind, req.Namespace, name, err))
	}
	unchanged := req.Operation == admissionv1.Update && h.podSpecUnchanged(kind, req, obj)
	out := rules.Apply(active.Settings(ns), findings, obj.GetAnnotations(), rules.Options{Unchanged: unchanged})
	// Findings are recorded when the pod spec is written: the same findings
	// on every scale or rollout re-stamp would bury the Events that matter
	// and count one problem many times.
	return respond(out, req, obj, h.Recorder, !unchanged)
}

func (h *ValidateWorkloads) podSpecUnchanged(kind workload.Kind, req admission.Request, obj client.Object) bool {
	old, _ := h.Kinds.New(kind.GroupKind())
	if !present(req.OldObject) || h.Decoder.DecodeRaw(req.OldObject, old) != nil {
		return false
	}
	oldSpec, _ := h.Kinds.PodSpec(old)
	newSpec, _ := h.Kinds.PodSpec(obj)
	return equality.Semantic.DeepEqual(oldSpec, newSpec)
}

// checkRequest refuses malformed requests outright (they must never be
// allowed by accident) and lets through, with a reason, requests this
// webhook has no rules for.
func (h *ValidateWorkloads) checkRequest(req admission.Request) (workload.Kind, admission.Response, bool) {
	if req.Resource.Resource == "" {
		return workload.Kind{}, admission.Denied("configward: malformed admission request: the resource is not set"), false
	}
	kind, known := h.Kinds.Lookup(schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind})
	if !known {
		return kind, admission.Allowed(fmt.Sprintf("configward has no workload rules for %s", req.Kind)), false
	}
	if req.Resource.Resource != kind.Resource || req.Resource.Group != kind.Group {
		return kind, malformed(req, "the kind does not match the resource"), false
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return kind, admission.Allowed(""), false
	}
	if req.SubResource != "" && !(kind.Kind == "Pod" && kind.Group == "" && req.SubResource == "ephemeralcontainers") {
		return kind, admission.Allowed(""), false
	}
	if !present(req.Object) {
		return kind, admission.Denied(fmt.Sprintf("configward: malformed admission request: %s %s has no object", req.Operation, req.Kind.Kind)), false
	}
	return kind, admission.Response{}, true
}

// input gathers the facts the rules need from the inventory; no API call
// is made.
func (h *ValidateWorkloads) input(ctx context.Context, req admission.Request, kind workload.Kind, obj client.Object, name string) (ruleinput.Input, error) {
	return ruleinput.WorkloadInputOf(ruleinput.Request{
		Operation: string(req.Operation), Username: req.UserInfo.Username, Groups: req.UserInfo.Groups,
		DryRun: ptr.Deref(req.DryRun, false), Kind: kind.Kind, Namespace: req.Namespace, Name: name,
		SubResource: req.SubResource,
	}, h.Kinds, obj, req.Object.Raw, req.OldObject.Raw, h.Inventory.Targets(ctx, req.Namespace))
}
