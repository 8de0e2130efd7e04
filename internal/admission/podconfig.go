package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/webhookserver"
)

// PodConfigPath is where pods are pointed at their revision's config.
const PodConfigPath = "/mutate-pod-config"

// The Pod path sees only pods whose template names config snapshots or asks
// for the reload agent: the webhook configurations match on the annotations
// (a matchCondition), so the pods of other workloads never reach it. It
// fails open: while
// configward is down, a pod of a revision starts on the originals' live
// bytes rather than not at all, and the controller says so for every pod
// that did (ConfigRevisionNotPinned). A later mutating webhook that changes
// what the pod consumes has it pinned again.
//
// +kubebuilder:webhook:path=/mutate-pod-config,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=pod-config.configward.dev,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5
//
// The same path serves a second webhook, for the namespaces where delivery
// is on (their HotChannelsLabel), which takes the pods the first one does
// not (PodChannelsMatchCondition): hot config there is pointed at its
// wave's channels (Channels).
//
// +kubebuilder:webhook:path=/mutate-pod-config,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=pod-channels.configward.dev,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5

// PodConfigMatchCondition is the CEL matchCondition every installation puts
// on the Pod path (controller-gen's markers cannot express one): only the
// pods whose template names config snapshots or asks for the reload agent
// (to reload hot config, or to check a served certificate: AsksForAgent)
// are sent to it.
const PodConfigMatchCondition = `has(object.metadata.annotations) && ('` + v1alpha1.ConfigSnapshotsAnnotation + `' in object.metadata.annotations || '` +
	v1alpha1.ReloadAgentAnnotation + `' in object.metadata.annotations || '` + v1alpha1.ServingCertAnnotation + `' in object.metadata.annotations)`

var podReviews = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_revision_pod_reviews_total",
	Help: "Pod creations the Pod path judged, by result: pinned (pointed at its revision's snapshots), waiting (refused until a snapshot is written), unnamed (no snapshots to pin). Dry-runs are counted too.",
}, []string{"result"})

var agentInjections = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_reload_agent_injections_total",
	Help: "Pod creations that asked for the reload agent, by result: injected, skipped (the pod mounts no hot config as a directory, its annotations do not parse, or the agent is there already). Dry-runs are counted too.",
}, []string{"result"})

var channelReviews = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_channel_pod_reviews_total",
	Help: "Pod creations in namespaces where delivery is on whose hot config the Pod path looked at, by result: pointed (at the channels of the pod's wave), none (no hot config to point). Dry-runs are counted too.",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(podReviews, agentInjections, channelReviews) }

// PodConfig rewrites, at a pod's creation, its references to the ConfigMaps
// and Secrets its revision read into references to their snapshots, named
// by the pod's own configward.dev/config-snapshots annotation (inherited
// from its template): the pod alone decides, so no cache lag can give it
// other bytes. A snapshot not written yet refuses the pod; its controller
// creates it again.
type PodConfig struct {
	Inventory *inventory.Inventory
	// Agent injects the reload agent where a pod asks for it (nil: never).
	Agent *ReloadAgent
	// Channels point hot config at its wave's channels where delivery is
	// on (nil: never).
	Channels *Channels
	// Namespaces (a cache) say where configward cannot write snapshots.
	Namespaces client.Reader
	// Pending is how long a pod waits for a snapshot not written yet
	// before it is refused (0: PendingSnapshotWait).
	Pending time.Duration
}

// PendingSnapshotWait is how long the Pod path waits for a snapshot its
// controller is writing: the webhook names a new workload's snapshots the
// moment it is created, and its first pods follow within a second, often
// before the write; refused, each would leave a FailedCreate Warning on
// the normal path. It stays well inside the webhook's 5 s timeout.
const PendingSnapshotWait = 2 * time.Second

// pendingPoll is how often the cache is asked while a pod waits.
const pendingPoll = 50 * time.Millisecond

// Intake implements webhookserver.Handler.
func (h *PodConfig) Intake() webhookserver.Intake[string] {
	return webhookserver.Intake[string]{
		Operations: []admissionv1.Operation{admissionv1.Create},
		Unjudged:   "configward pins no config of %s",
		Kind: func(gk schema.GroupKind) (webhookserver.Kind[string], bool) {
			if gk != (schema.GroupKind{Kind: "Pod"}) {
				return webhookserver.Kind[string]{}, false
			}
			return webhookserver.Kind[string]{Info: "Pod", Resource: "pods", New: func() client.Object { return &corev1.Pod{} }, OnePassVersion: "v1"}, true
		},
	}
}

// Review implements webhookserver.Handler.
func (h *PodConfig) Review(ctx context.Context, r *webhookserver.Review[string]) admission.Response {
	pod := r.Object.(*corev1.Pod)
	if h.Channels != nil {
		refused, err := h.Channels.named(ctx, pod, string(r.Request.UID))
		if err != nil {
			return admission.Errored(500, fmt.Errorf("configward: looking up the waves of Pod %s/%s: %w", r.Namespace, r.Name(), err))
		}
		if refused != "" {
			return admission.Denied(refused)
		}
	}
	ops, denied, why := h.pin(ctx, r, pod)
	if denied != nil {
		return *denied
	}
	var pointed map[revision.Source]string
	if h.Channels != nil {
		var channelled []jsonpatch.Operation
		var note string
		var err error
		channelled, pointed, note, err = h.Channels.point(ctx, h.Inventory, pod, r.Request.UserInfo.Username, string(r.Request.UID))
		if err != nil {
			return admission.Errored(500, fmt.Errorf("configward: pointing the hot config of Pod %s/%s at its channels: %w", r.Namespace, r.Name(), err))
		}
		if note != "" {
			ops, why = append(ops, channelled...), why+"; "+note
		}
	}
	if AsksForAgent(pod.Annotations) && h.Agent != nil {
		inject, note, err := h.Agent.inject(ctx, h.Inventory, pod, pointed)
		if err != nil {
			return admission.Errored(500, fmt.Errorf("configward: injecting the reload agent into Pod %s/%s: %w", r.Namespace, r.Name(), err))
		}
		agentInjections.WithLabelValues(map[bool]string{true: "injected", false: "skipped"}[len(inject) > 0]).Inc()
		ops, why = append(ops, inject...), why+"; "+note
	}
	if len(ops) == 0 {
		return admission.Allowed(why)
	}
	return admission.Patched(why, ops...)
}

// pin points the pod's references at the snapshots its revision names, or
// refuses it while one is not written (denied).
func (h *PodConfig) pin(ctx context.Context, r *webhookserver.Review[string], pod *corev1.Pod) ([]jsonpatch.Operation, *admission.Response, string) {
	value, ok := pod.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
	if !ok || value == "" {
		if AsksForAgent(pod.Annotations) {
			// Pods sent for their channels alone (pod-channels) are no
			// revision's: configward_channel_pod_reviews_total counts them.
			podReviews.WithLabelValues("unnamed").Inc()
		}
		return nil, nil, "no config snapshots named"
	}
	snaps, err := revision.Decode(value)
	if err != nil {
		d := admission.Denied(fmt.Sprintf("[config-revision] Pod %s/%s: its %s annotation is not one configward wrote (%v), so its config cannot be pinned. "+
			"Remove the annotation from the pod template; configward stamps it again.", r.Namespace, r.Name(), v1alpha1.ConfigSnapshotsAnnotation, err))
		return nil, &d, ""
	}
	src, err := h.unwritten(ctx, r.Namespace, snaps)
	if err != nil {
		d := admission.Errored(500, fmt.Errorf("configward: looking up the snapshots of Pod %s/%s: %w", r.Namespace, r.Name(), err))
		return nil, &d, ""
	}
	if src != nil {
		podReviews.WithLabelValues("waiting").Inc()
		if why := h.blocked(ctx, r.Namespace); why != "" {
			d := admission.Denied(fmt.Sprintf("[config-revision] snapshot %s of %s %s/%s cannot be written: configward cannot write snapshots in namespace %s (%s). "+
				"Pod %s/%s must read exactly its revision's config, so it is refused; configward takes the snapshot out of its workload's template, "+
				"and the pods of the next revision start on the original. See the Events of the workload and the RevisionsReady condition of its ConfigPolicy.",
				snaps[*src], src.Kind, r.Namespace, src.Name, r.Namespace, why, r.Namespace, r.Name()))
			return nil, &d, ""
		}
		d := admission.Denied(fmt.Sprintf("[config-revision] snapshot %s of %s %s/%s is not written yet: Pod %s/%s must read exactly its revision's config, "+
			"so it waits for configward's controller to write it (the pod's controller retries within seconds). If the refusal repeats, see the Events of the workload.",
			snaps[*src], src.Kind, r.Namespace, src.Name, r.Namespace, r.Name()))
		return nil, &d, ""
	}
	ops, _ := revision.PodPatch(&pod.Spec, snaps)
	podReviews.WithLabelValues("pinned").Inc()
	if len(ops) == 0 {
		return nil, nil, "its references name no snapshotted config"
	}
	return ops, nil, "pointed at its revision's config snapshots"
}

// unwritten returns a source of snaps whose snapshot is not written,
// after waiting up to Pending for the controller to write it; nil when all
// are.
func (h *PodConfig) unwritten(ctx context.Context, namespace string, snaps revision.Snapshots) (*revision.Source, error) {
	wait := h.Pending
	if wait == 0 {
		wait = PendingSnapshotWait
	}
	deadline := time.Now().Add(wait)
	for {
		var missing *revision.Source
		for _, src := range snaps.Sorted() {
			written, err := h.Inventory.SnapshotWritten(ctx, namespace, src, snaps[src])
			if err != nil {
				return nil, err
			}
			if !written {
				missing = &src
				break
			}
		}
		// Where writes are blocked, nothing will come: no wait.
		if missing == nil || time.Now().After(deadline) || h.blocked(ctx, namespace) != "" {
			return missing, nil
		}
		select {
		case <-ctx.Done():
			return missing, nil
		case <-time.After(pendingPoll):
		}
	}
}

// blocked says why snapshots cannot be written in namespace, "" when they
// can (or the namespace is unknown).
func (h *PodConfig) blocked(ctx context.Context, namespace string) string {
	if h.Namespaces == nil {
		return ""
	}
	ns, err := configpolicy.LookupNamespace(ctx, h.Namespaces, namespace)
	if err != nil || ns == nil {
		return ""
	}
	return ns.Annotations[v1alpha1.SnapshotsBlockedAnnotation]
}
