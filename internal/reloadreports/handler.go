// Package reloadreports takes the reports of the reload agents (the
// `configward agent` sidecars) on a server of its own beside admission: each
// report is authenticated as its pod with a TokenReview, judged against the
// config's content now, and kept on the pod's ConfigReload condition. It
// reviews no AdmissionReview, so it lives apart from internal/admission;
// the webhook process (internal/manager) only composes it.
package reloadreports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/workload"
)

// The webhook takes the reports of reload agents and keeps what they say
// on each pod (the ConfigReload condition), and records an Event on the
// workload when a program rejects a change.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch

var (
	agentReports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_reload_reports_total",
		Help: "Reports of reload agents, by outcome: recorded, unchanged (what the pod said is already on it), asked (an agent asked whether its pod's configs hold one set, before a reload), ignored (about no config the pod reads), refused (see reason), invalid (a body that is not a report, or one sent too slowly or too large: see reason), busy (its pod has a report in flight, or every source together as many as they may: the agent tries again), unavailable (the token could not be reviewed or the pod not written: the agent tries again). reason says why a report was refused, invalid or busy: no-token, not-agent-token, not-pod-token, pod-gone, not-json, too-slow, too-large, pod, all-sources.",
	}, []string{"outcome", "reason"})
	refusedConns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_reload_report_connections_refused_total",
		Help: "Connections to the reload agents' report endpoint closed as soon as they were accepted, because their source (source) or every source together (all-sources) held as many as they may.",
	}, []string{"why"})
	reloadResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_reload_results_total",
		Help: "What pods' programs made of a swap of hot config, as their reload agents report it: applied, rejected, triggered (a signal without a check), seen (a program that watches its files, without a check).",
	}, []string{"result"})
	kubeletLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "configward_reload_kubelet_lag_seconds",
		Help:    "Time from a hot ConfigMap's or Secret's write to the kubelet's swap of it into a pod's volume, as the pod's reload agent reports it (the API server records writes to the second).",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 90, 120, 180, 300},
	})
)

func init() { metrics.Registry.MustRegister(agentReports, refusedConns, reloadResults, kubeletLag) }

// Handler takes reload agents' reports. Each is authenticated with a
// TokenReview of its bearer token, which must be of reload.Audience and
// bound to a pod, before a byte of its body is read: the pod is the
// token's, never the report's, so a pod reports only for itself. Its
// fingerprints are checked against the content of the config now
// (reload.Matches) and only the verdict is kept.
type Handler struct {
	// Reviews creates TokenReviews.
	Reviews client.Client
	// Pods (a cache) and Inventory give the pod and its config; Writer
	// patches the pod's status.
	Pods      client.Reader
	Inventory *inventory.Inventory
	Writer    client.Client
	Events    recorder.EventRecorder
	Kinds     *workload.Registry
	// Keys name content (reload.ContentID) as the config hash does.
	Keys *hashkey.Source
	// Live reads a config from the API server when the cache does not
	// know the content a pod reports: the pod may have it before the
	// cache does.
	Live client.Reader

	// pods are the reports in flight per pod: one at a time.
	pods counts
	// rejections are the pods, configs and contents a ConfigReloadFailed
	// Event was recorded for.
	rejections onceEach
	// live are the recent live reads, per config.
	live liveReads
	// stale are the pods and ports a ServedCertificateStale Event was
	// recorded for in the last hour.
	stale onceEach
}

// maxReport bounds a report's body: a few configs' fingerprints. The
// server caps the body there (http.MaxBytesReader, which also closes a
// connection that sends more) and the handler reads no further.
const maxReport = 64 << 10

// count counts a report by its outcome and reason.
func count(outcome, reason string) { agentReports.WithLabelValues(outcome, reason).Inc() }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a report", http.StatusMethodNotAllowed)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		count("refused", "no-token")
		http.Error(w, "no bearer token", http.StatusUnauthorized)
		return
	}
	// Who sends the report is known before its body is read: a sender
	// without a pod's agent token never gets to hold the connection
	// while it sends one slowly.
	ctx := r.Context()
	pod, status, reason, err := h.podOf(ctx, token)
	if err != nil {
		if status == http.StatusServiceUnavailable {
			count("unavailable", reason)
		} else {
			count("refused", reason)
		}
		ctrl.Log.WithName("reload-reports").Info("report refused", "why", err.Error())
		http.Error(w, err.Error(), status)
		return
	}
	if !h.pods.take(string(pod.UID), 1) {
		count("busy", "pod")
		http.Error(w, "busy: a report of this pod is in flight", http.StatusTooManyRequests)
		return
	}
	defer h.pods.give(string(pod.UID))
	// An agent sends its report at once; one that trickles holds a slot.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyDeadline))
	var rep reload.Report
	dec := json.NewDecoder(io.LimitReader(r.Body, maxReport))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		var tooLarge *http.MaxBytesError
		var timeout interface{ Timeout() bool }
		reason := "not-json"
		switch {
		case errors.As(err, &tooLarge):
			reason = "too-large"
		case errors.As(err, &timeout) && timeout.Timeout():
			reason = "too-slow"
		}
		count("invalid", reason)
		http.Error(w, "not a report: "+err.Error(), http.StatusBadRequest)
		return
	}
	if rep.Ask {
		ans, err := h.answer(ctx, pod, []byte(token), rep)
		if err != nil {
			count("unavailable", "")
			ctrl.Log.WithName("reload-reports").Error(err, "answering an agent", "pod", client.ObjectKeyFromObject(pod))
			http.Error(w, "not answered: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		count(reload.Asked, "")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ans)
		return
	}
	outcome, err := h.record(ctx, pod, []byte(token), rep)
	if err != nil {
		count("unavailable", "")
		ctrl.Log.WithName("reload-reports").Error(err, "recording a report", "pod", client.ObjectKeyFromObject(pod))
		http.Error(w, "not recorded: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	count(outcome, "")
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"outcome":%q}`, outcome)
}

// podOf authenticates token and returns the pod it is bound to, or the
// status and reason of its refusal.
func (h *Handler) podOf(ctx context.Context, token string) (*corev1.Pod, int, string, error) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{reload.Audience}}}
	if err := h.Reviews.Create(ctx, review); err != nil {
		return nil, http.StatusServiceUnavailable, "review", fmt.Errorf("reviewing the token: %w", err)
	}
	st := review.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, reload.Audience) {
		return nil, http.StatusUnauthorized, "not-agent-token", errors.New("the token is not one of a reload agent (audience " + reload.Audience + ")")
	}
	name, uid := first(st.User.Extra["authentication.kubernetes.io/pod-name"]), first(st.User.Extra["authentication.kubernetes.io/pod-uid"])
	parts := strings.Split(st.User.Username, ":")
	if name == "" || uid == "" || len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return nil, http.StatusUnauthorized, "not-pod-token", errors.New("the token is not bound to a pod")
	}
	var pod corev1.Pod
	if err := h.Pods.Get(ctx, types.NamespacedName{Namespace: parts[2], Name: name}, &pod); err != nil || string(pod.UID) != uid {
		return nil, http.StatusForbidden, "pod-gone", fmt.Errorf("pod %s/%s of the token is gone", parts[2], name)
	}
	return &pod, 0, "", nil
}

func first(v authenticationv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// record keeps what rep says of pod on the pod's ConfigReload condition,
// when it changes.
func (h *Handler) record(ctx context.Context, pod *corev1.Pod, token []byte, rep reload.Report) (string, error) {
	consumed := consumedBy(pod)
	fingerprintKey := reload.FingerprintKey(token)
	key := h.Keys.Current().Bytes()
	previous := reload.EntriesOf(pod)
	var reported []string
	for _, part := range rep.Configs {
		reported = append(reported, part.Config)
	}
	// The agent withholds a program's messages where a Secret is among its
	// config; a report that did not is not trusted to have.
	shareable := reload.Shareable(reported)
	var entries []reload.PodEntry
	for _, part := range rep.Configs {
		kind, name, _ := strings.Cut(part.Config, "/")
		if !consumed[part.Config] || !slices.Contains(inventory.ContentKinds(), refs.Kind(kind)) {
			continue // a pod reports on the config it reads, nothing else
		}
		// A channel speaks for its original: what the pod applied is a
		// content of the config its pipeline writes, whichever wave's copy
		// brought it.
		named, err := h.original(ctx, refs.Kind(kind), pod.Namespace, name)
		if err != nil {
			return "", err
		}
		e := reload.PodEntry{Config: kind + "/" + named, Result: part.Result, Message: reload.Cut(part.Message), SwappedAt: part.SwappedAt.UTC(), At: part.At.UTC(),
			Set: reload.Cut(part.Set)}
		if !shareable && e.Message != "" {
			e.Message = reload.Withheld
		}
		kd, at, err := h.contentOf(ctx, refs.Kind(kind), pod.Namespace, name, func(kd map[string]string) bool {
			return reload.Matches(fingerprintKey, part.Keys, part.AllKeys, kd)
		})
		if err != nil {
			return "", err
		}
		if kd != nil {
			e.Content = reload.ContentID(key, pod.Namespace, kind, named, kd)
		}
		newSwap := isNewSwap(previous, e)
		if e.Content != "" && newSwap && !at.IsZero() && e.SwappedAt.After(at) {
			kubeletLag.Observe(e.SwappedAt.Sub(at).Seconds())
		}
		if newSwap || previous[e.Config].Result != e.Result {
			reloadResults.WithLabelValues(e.Result).Inc()
			// One Event per pod and content it rejected, however often
			// its agent says so (a content unknown here is one content).
			if e.Result == reload.Rejected && h.rejections.first(string(pod.UID)+"/"+e.Config+"/"+e.Content, time.Now()) {
				h.rejected(ctx, pod, e)
			}
		}
		entries = append(entries, e)
	}
	certs, err := h.certEntries(ctx, pod, fingerprintKey, rep.Certificates, time.Now().UTC())
	if err != nil {
		return "", err
	}
	var conds []corev1.PodCondition
	if len(entries) > 0 {
		conds = append(conds, reload.Condition(entries))
	}
	if len(certs) > 0 {
		conds = append(conds, reload.CertCondition(certs))
	}
	if len(conds) == 0 {
		return "ignored", nil // nothing the pod reads or serves: nothing to keep
	}
	before := pod.DeepCopy()
	changed := false
	for _, cond := range conds {
		if old := podCondition(pod, cond.Type); old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
			continue
		}
		setPodCondition(pod, cond)
		changed = true
	}
	if !changed {
		return "unchanged", nil
	}
	if err := h.Writer.Status().Patch(ctx, pod, client.StrategicMergeFrom(before)); err != nil {
		return "", fmt.Errorf("writing the pod's conditions: %w", err)
	}
	return "recorded", nil
}

// contentOf returns the key digests of the config's content now, when
// matches says they are what the pod has, and when the content was
// written. The cache is asked first; where it does not match, the API
// server, which the pod's kubelet may have read before the cache caught
// up. Nothing of a value is kept: the digests are compared and dropped.
func (h *Handler) contentOf(ctx context.Context, kind refs.Kind, namespace, name string, matches func(map[string]string) bool) (map[string]string, time.Time, error) {
	o, err := h.Inventory.Get(ctx, kind, namespace, name)
	if err != nil {
		return nil, time.Time{}, err
	}
	if o.Exists && matches(o.KeyDigests) {
		return o.KeyDigests, changedAt(ctx, h.Pods, kind, namespace, name), nil
	}
	if h.Live == nil {
		return nil, time.Time{}, nil
	}
	live, err := h.readLive(ctx, o, kind, namespace, name)
	if err != nil || live.kd == nil || !matches(live.kd) {
		return nil, time.Time{}, err
	}
	return live.kd, live.when, nil
}

// readLive reads a config from the API server: one live read per config
// and cached content in liveEvery, since reports of fingerprints nobody has
// (a pod's agent may send any) would otherwise each cost a GET.
func (h *Handler) readLive(ctx context.Context, cached inventory.Object, kind refs.Kind, namespace, name string) (liveContent, error) {
	return h.live.read(cachedContent(cached), string(kind)+"/"+namespace+"/"+name, time.Now(), func() (liveContent, error) {
		obj, kd, err := inventory.ReadLive(ctx, h.Live, kind, types.NamespacedName{Namespace: namespace, Name: name})
		if err != nil {
			return liveContent{}, client.IgnoreNotFound(err)
		}
		return liveContent{kd: kd, when: writtenAt(obj), note: obj.GetAnnotations()[v1alpha1.ChannelSetAnnotation]}, nil
	})
}

// cachedContent names what the cache holds of a config: its key digests, or
// nothing.
func cachedContent(o inventory.Object) string {
	if !o.Exists {
		return ""
	}
	keys := slices.Sorted(maps.Keys(o.KeyDigests))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + o.KeyDigests[k] + "\n")
	}
	return b.String()
}

// original is the name a report's config stands for: a channel's original,
// or the config itself.
func (h *Handler) original(ctx context.Context, kind refs.Kind, namespace, name string) (string, error) {
	o, err := h.Inventory.Get(ctx, kind, namespace, name)
	if err != nil {
		return "", err
	}
	if of, _, ok := channel.Of(o.Labels, o.Annotations); ok {
		return of, nil
	}
	return name, nil
}

// isNewSwap says e is about a swap previous did not know.
func isNewSwap(previous map[string]reload.PodEntry, e reload.PodEntry) bool {
	p, ok := previous[e.Config]
	return !ok || !p.SwappedAt.Equal(e.SwappedAt)
}

// rejected records a Warning Event on the pod's workload.
func (h *Handler) rejected(ctx context.Context, pod *corev1.Pod, e reload.PodEntry) {
	var regarding client.Object = pod
	if w, ok, _ := h.Kinds.TopWorkloadOf(ctx, h.Pods, pod); ok {
		regarding = w.Obj
	}
	h.Events.Eventf(regarding, pod, corev1.EventTypeWarning, "ConfigReloadFailed", "Reload",
		"pod %s rejected %s: %s; it runs the configuration it had", pod.Name, e.Config, e.Message)
}

// changedAt is when a cached ConfigMap or Secret was last written, to the
// second (its last writer's managed-fields time), zero when unknown.
func changedAt(ctx context.Context, c client.Reader, kind refs.Kind, namespace, name string) time.Time {
	obj := inventory.NewObject(kind)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj); err != nil {
		return time.Time{}
	}
	return writtenAt(obj)
}

// writtenAt is when obj was last written, to the second: the latest time
// of its managed fields.
func writtenAt(obj client.Object) time.Time {
	var at time.Time
	for _, mf := range obj.GetManagedFields() {
		if mf.Time != nil && mf.Time.After(at) {
			at = mf.Time.Time
		}
	}
	return at
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	if old := podCondition(pod, c.Type); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
