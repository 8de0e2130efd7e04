package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/slimobject"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/internal/workloadrules"
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
		Name: "configward_policy_evaluation_seconds",
		Help: "Time to evaluate every rule for one admission request.",
		// The built-in rules take microseconds as Go; custom Rego rules,
		// hundreds of microseconds and up to their budget.
		Buckets: []float64{5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3, 250e-3},
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
	Policies   *configpolicy.Store
	Namespaces client.Reader
	Recorder
	// Kinds are the workload kinds judged: the built-in ones plus declared
	// custom kinds.
	Kinds *workload.Registry
}

// workloadIntake is the intake of the webhooks that read workloads: the
// kinds of reg, built-in ones decoded in one pass with their review unless
// keepBytes says the objects' bytes are needed.
func workloadIntake(reg *workload.Registry, unjudged string, keepBytes func() bool) webhookserver.Intake[*workload.Type] {
	return webhookserver.Intake[*workload.Type]{
		Operations: []admissionv1.Operation{admissionv1.Create, admissionv1.Update},
		Unjudged:   unjudged,
		KeepBytes:  keepBytes,
		Kind: func(gk schema.GroupKind) (webhookserver.Kind[*workload.Type], bool) {
			t, ok := reg.Type(gk)
			if !ok {
				return webhookserver.Kind[*workload.Type]{}, false
			}
			k := webhookserver.Kind[*workload.Type]{Info: t, Resource: t.Resource, New: t.New, Subresources: t.JudgedSubresources}
			if !t.Custom() {
				k.OnePassVersion = t.Version
			}
			return k, true
		},
	}
}

// Intake implements webhookserver.Handler. Custom rules read the object as
// the API server sent it, so while they are in force the review keeps its
// bytes.
func (h *ValidateWorkloads) Intake() webhookserver.Intake[*workload.Type] {
	return workloadIntake(h.Kinds, "configward has no workload rules for %s", func() bool {
		return h.Policies != nil && h.Policies.Current().Version.WantsObjects
	})
}

// Review implements webhookserver.Handler.
func (h *ValidateWorkloads) Review(ctx context.Context, r *webhookserver.Review[*workload.Type]) admission.Response {
	w := r.Kind.Info.Wrap(r.Object)
	kind, name := w.Type.Kind.Kind, r.Name()
	spec, err := w.PodSpec()
	if err != nil {
		// A template the rules cannot read must not pass unjudged.
		return admission.Denied(fmt.Sprintf("configward: %s %s/%s: %v, so its pod template cannot be judged (its CRD's schema does not check it). Fix the template and apply again.",
			kind, r.Namespace, name, err))
	}
	if r.SubResource == "" {
		// `kubectl debug` (the ephemeralcontainers subresource) adds to
		// the spec, so it is judged whoever owns the Pod.
		if why, owned := workloadrules.JudgedAsOwned(h.Kinds, w, r.UserInfo.Username); owned {
			return admission.Allowed(why)
		}
	}
	// Found at the pod's creation instead, a bad annotation would leave the
	// pod without its agent, and nobody would read why.
	if err := ParseServingCertAnnotations(w.TemplateAnnotations()); err != nil {
		return admission.Denied(fmt.Sprintf("[serving-cert] %s %s/%s: %v. Fix the annotation and apply again.", kind, r.Namespace, name, err))
	}
	if err := parseAgentAnnotations(w.TemplateAnnotations()); err != nil {
		return admission.Denied(fmt.Sprintf("[reload-agent] %s %s/%s: %v. Fix the annotation and apply again.", kind, r.Namespace, name, err))
	}
	if _, err := servingCerts(ctx, h.Inventory, r.Namespace, w.TemplateAnnotations(), spec); err != nil {
		// Which Secret each port presents is read from the template's
		// volumes: a template that says it wrong is told now, not by a
		// pod without its check.
		return admission.Denied(fmt.Sprintf("[serving-cert] %s %s/%s: %s: %v. Fix the annotation and apply again.", kind, r.Namespace, name, v1alpha1.ServingCertAnnotation, err))
	}
	ns, err := configpolicy.LookupNamespace(ctx, h.Namespaces, r.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: %w", err))
	}
	if refused := namesChannel(h.Policies.Current().For(ns), w, spec); refused != "" {
		return admission.Denied(fmt.Sprintf("[config-delivery] %s %s/%s: %s", kind, r.Namespace, name, refused))
	}
	unchanged := r.Operation == admissionv1.Update && h.podSpecUnchanged(r, spec)
	j, err := workloadrules.Judge(ctx, h.Policies.Current(), workloadrules.Subject{
		Workload: w, Spec: spec, Namespace: ns, Unchanged: unchanged,
		Request: ruleinput.Request{
			Operation: string(r.Operation), Username: r.UserInfo.Username, Groups: r.UserInfo.Groups,
			DryRun: ptr.Deref(r.DryRun, false), Kind: kind, Namespace: r.Namespace, Name: name,
			SubResource: r.SubResource,
		},
		Targets: h.Inventory.Targets(ctx, r.Namespace),
		Objects: func() ([]byte, []byte, error) {
			// Their bytes are kept while custom rules are in force; a
			// request read slim just before they came into force is
			// refused with ErrNoBytes, to be sent again.
			object, err := webhookserver.RawJSON(r.Request.Object)
			if err != nil {
				return nil, nil, err
			}
			old, err := webhookserver.RawJSON(r.Request.OldObject)
			return object, old, err
		},
	})
	if err != nil {
		code := http.StatusInternalServerError
		// ErrNoBytes is no fault of the request's: it is sent again.
		if errors.Is(err, workloadrules.ErrObject) && !errors.Is(err, webhookserver.ErrNoBytes) {
			code = http.StatusBadRequest
		}
		return admission.Errored(int32(code), fmt.Errorf("configward: %s %s/%s: %w", kind, r.Namespace, name, err))
	}
	evaluationSeconds.Observe(j.Evaluation.Seconds())
	// Findings are recorded when the pod spec is written: the same findings
	// on every scale or rollout re-stamp would bury the Events that matter
	// and count one problem many times.
	return respond(j.Outcome, r.Request, w.Obj, h.Recorder, !unchanged)
}

// podSpecUnchanged reports whether an update leaves the pod spec as it was,
// the whole of it: what the slim decoding passed over (resources, probes)
// is compared too.
func (h *ValidateWorkloads) podSpecUnchanged(r *webhookserver.Review[*workload.Type], spec *corev1.PodSpec) bool {
	old, err := r.OldObject()
	if err != nil {
		return false
	}
	oldSpec, err := r.Kind.Info.Wrap(old).PodSpec()
	if err != nil || !equality.Semantic.DeepEqual(oldSpec, spec) {
		return false
	}
	oldPassed, passed := r.PassedOver()
	return slimobject.SamePodSpecs(oldSpec, spec, oldPassed, passed)
}

// namesChannel refuses a workload's template that names a channel of its
// namespace's waves: only configward points a pod at a channel, when the
// Pod path places each new pod in its wave. Pods are judged there, before
// configward's own rewrite, which names channels by design; here a pod has
// been rewritten already, so only templates are.
func namesChannel(p configpolicy.NamespacePolicy, w workload.Object, spec *corev1.PodSpec) string {
	if p.Delivery == nil || w.Type.Kind.Kind == "Pod" {
		return ""
	}
	for _, r := range refs.FromPodSpec(spec) {
		if wave, ok := channel.Named(r.Name, p.Delivery.Waves); ok {
			return fmt.Sprintf("its template names %s %s (%s), configward's channel of hot config for wave %s: only configward points a pod at a channel, "+
				"when it places each new pod in its wave. Name the original %s instead.", r.Kind, r.Name, r.Via, wave, r.Kind)
		}
	}
	return ""
}
