package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/policy"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/refs"
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
	Events     recorder.EventRecorder
}

// Handle implements admission.Handler.
func (h *ValidateWorkloads) Handle(ctx context.Context, req admission.Request) admission.Response {
	kind, resp, ok := h.checkRequest(req)
	if !ok {
		return resp
	}
	obj, _ := workload.New(kind.Kind)
	if err := h.Decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the %s in this request cannot be decoded: %w", kind.Kind, err))
	}
	if req.SubResource == "" && workload.ControlledByWorkload(obj) {
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
	value, err := input.Value(version)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: %s %s/%s: %w", kind.Kind, req.Namespace, name, err))
	}
	start := time.Now()
	findings, err := version.Eval(ctx, value)
	evaluationSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: evaluating rules for %s %s/%s: %w", kind.Kind, req.Namespace, name, err))
	}
	settings := active.Settings(ns)
	notes := settings.Exempt(findings, obj.GetAnnotations())
	d := settings.Decide(findings)
	unchanged := req.Operation == admissionv1.Update && h.podSpecUnchanged(kind.Kind, req, obj)
	if unchanged {
		// The request does not change what the pods consume: a rollout
		// re-stamp, a scale, a label. Refusing it would not fix a problem
		// that was admitted before (or before the rule existed) and would
		// only block the workload; say what is wrong instead.
		d.Warned = append(d.Warned, d.Denied...)
		d.Denied = nil
	}
	dryRun := ptr.Deref(req.DryRun, false)
	// Findings are recorded when the pod spec is written: the same findings
	// on every scale or rollout re-stamp would bury the Events that matter
	// and count one problem many times.
	if !dryRun && !unchanged {
		record(h.Events, obj, d)
	}
	resp = respond(d, dryRun)
	resp.Warnings = append(resp.Warnings, notes...)
	return resp
}

func (h *ValidateWorkloads) podSpecUnchanged(kind string, req admission.Request, obj client.Object) bool {
	old, _ := workload.New(kind)
	if len(req.OldObject.Raw) == 0 || h.Decoder.DecodeRaw(req.OldObject, old) != nil {
		return false
	}
	oldSpec, _ := workload.PodSpec(old)
	newSpec, _ := workload.PodSpec(obj)
	return equality.Semantic.DeepEqual(oldSpec, newSpec)
}

// checkRequest refuses malformed requests outright (they must never be
// allowed by accident) and lets through, with a reason, requests this
// webhook has no rules for.
func (h *ValidateWorkloads) checkRequest(req admission.Request) (workload.Kind, admission.Response, bool) {
	if req.Resource.Resource == "" {
		return workload.Kind{}, admission.Denied("configward: malformed admission request: the resource is not set"), false
	}
	kind, known := workload.Lookup(req.Kind.Kind)
	if !known || kind.Group != req.Kind.Group {
		return kind, admission.Allowed(fmt.Sprintf("configward has no workload rules for %s", req.Kind)), false
	}
	if req.Resource.Resource != kind.Resource || req.Resource.Group != kind.Group {
		return kind, admission.Denied(fmt.Sprintf("configward: malformed admission request: kind %s does not match resource %s",
			req.Kind, req.Resource)), false
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return kind, admission.Allowed(""), false
	}
	if req.SubResource != "" && !(kind.Kind == "Pod" && req.SubResource == "ephemeralcontainers") {
		return kind, admission.Allowed(""), false
	}
	if len(req.Object.Raw) == 0 {
		return kind, admission.Denied(fmt.Sprintf("configward: malformed admission request: %s %s has no object", req.Operation, req.Kind.Kind)), false
	}
	return kind, admission.Response{}, true
}

// input gathers the facts the rules need from the inventory; no API call
// is made.
func (h *ValidateWorkloads) input(ctx context.Context, req admission.Request, kind workload.Kind, obj client.Object, name string) (policy.Input, error) {
	return policy.WorkloadInput(policy.Request{
		Operation: string(req.Operation), Username: req.UserInfo.Username, Groups: req.UserInfo.Groups,
		DryRun: ptr.Deref(req.DryRun, false), Kind: kind.Kind, Namespace: req.Namespace, Name: name,
		SubResource: req.SubResource,
	}, obj, req.Object.Raw, req.OldObject.Raw, func(k refs.Kind, n string) (policy.Target, error) {
		o, err := h.Inventory.Get(ctx, k, req.Namespace, n)
		if err != nil {
			return policy.Target{}, err
		}
		return policy.Target{Known: true, Exists: o.Exists, Keys: policy.SortedKeys(o.KeyDigests), Reload: string(o.Mode), Immutable: o.Immutable}, nil
	})
}

func respond(d policy.Decision, dryRun bool) admission.Response {
	var resp admission.Response
	if len(d.Denied) > 0 {
		lines := make([]string, len(d.Denied))
		for i, f := range d.Denied {
			lines[i] = line(f)
		}
		resp = admission.Denied(strings.Join(lines, "\n"))
	} else {
		resp = admission.Allowed("")
	}
	for _, f := range d.Warned {
		resp.Warnings = append(resp.Warnings, policy.Warning(f))
	}
	if len(d.Audited) > 0 && !dryRun {
		resp.AuditAnnotations = map[string]string{}
		for _, f := range d.Audited {
			l := line(f)
			if f.Exemption != "" {
				l += " (" + actionNote(f, policy.Audit) + ")"
			}
			if prev, ok := resp.AuditAnnotations[f.Rule]; ok {
				resp.AuditAnnotations[f.Rule] = prev + "\n" + l
			} else {
				resp.AuditAnnotations[f.Rule] = l
			}
		}
	}
	return resp
}

func line(f policy.Finding) string { return policy.Line(f) }

// record counts every finding and leaves an Event on the object for those
// the request was allowed with, so the detail survives after kubectl's
// output scrolls away.
func record(events recorder.EventRecorder, obj client.Object, d policy.Decision) {
	for action, fs := range map[policy.Action][]policy.Finding{policy.Deny: d.Denied, policy.Warn: d.Warned, policy.Audit: d.Audited} {
		for _, f := range fs {
			decisions.WithLabelValues(f.Rule, string(action)).Inc()
			if f.Exemption != "" {
				exemptionsUsed.WithLabelValues(f.Rule).Inc()
			}
			if action != policy.Deny && events != nil && obj.GetName() != "" {
				events.Eventf(obj, nil, corev1.EventTypeWarning, reason(f.Rule), "Admit", "%s (%s)", line(f), actionNote(f, action))
			}
		}
	}
}

// actionNote says what was done with a finding, and why when exempted.
func actionNote(f policy.Finding, action policy.Action) string {
	if f.Exemption != "" {
		return fmt.Sprintf("%s: exempted by %s%s: %q", action, policy.ExemptAnnotationPrefix, f.Rule, f.Exemption)
	}
	return string(action)
}

// reason turns a rule id into an Event reason ("secret-in-env" ->
// "SecretInEnv"), the CamelCase form Events use.
func reason(rule string) string {
	var b strings.Builder
	for _, part := range strings.Split(rule, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
