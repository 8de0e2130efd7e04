// Package certrestarts evicts the pods that go on presenting a stale
// certificate (their reload agent reports a leaf older than the one they
// mount) past a grace, where their template carries
// configward.dev/on-stale-cert: Restart. It evicts through the Eviction
// API, so PodDisruptionBudgets hold; one pod of a workload at a time, and
// only while the workload's other pods are ready and the replacement of
// the last pod it evicted is there; never more than a rate across the
// cluster. Bare pods are never evicted: nothing would replace them.
package certrestarts

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/controller"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/workload"
)

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

var evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_stale_certificate_evictions_total",
	Help: "Evictions of pods presenting a stale certificate (configward.dev/on-stale-cert: Restart), by result: evicted, refused (a PodDisruptionBudget, or the API server, said no: tried again with backoff), failed.",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(evictions) }

// Options configure the controller.
type Options struct {
	// Grace is how long a pod may present a stale certificate first.
	Grace time.Duration
	// PerMinute bounds evictions across the cluster; 0 evicts none.
	PerMinute float64
	Kinds     *workload.Registry
}

// Setup registers the controller, which reconciles namespaces.
func Setup(mgr ctrl.Manager, opts Options) error {
	r := &restarts{client: mgr.GetClient(), opts: opts, events: mgr.GetEventRecorder("configward-certificates"),
		pace: rate.NewLimiter(rate.Limit(opts.PerMinute/60), 1), last: map[types.UID]evicted{}, refused: map[types.UID]backoff{}}
	return ctrl.NewControllerManagedBy(mgr).Named("stale-certificates").
		Watches(&corev1.Pod{}, controller.NamespaceOf(nil)).
		Complete(r)
}

type restarts struct {
	client client.Client
	opts   Options
	events recorder.EventRecorder
	pace   *rate.Limiter

	mu sync.Mutex
	// last is the latest eviction of each workload: the next waits for
	// its replacement.
	last map[types.UID]evicted
	// refused are the pods whose eviction was refused, with when to try
	// again.
	refused map[types.UID]backoff
}

type evicted struct {
	pod types.UID
	at  time.Time
	// pods is how many live pods the workload had then: the next eviction
	// waits until it has as many again, all ready.
	pods int
}

type backoff struct {
	next time.Time
	wait time.Duration
}

// Bounds of the backoff after a refused eviction.
const (
	firstRetry = 10 * time.Second
	maxRetry   = 5 * time.Minute
	// lookAgain is how soon a workload that must wait (a pod not ready, a
	// replacement not there yet) is looked at again, beside pod events.
	lookAgain = 10 * time.Second
)

func (r *restarts) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if r.opts.PerMinute <= 0 {
		return reconcile.Result{}, nil
	}
	pods, rss, jobs, err := drift.PodsAndOwners(ctx, r.client, client.InNamespace(req.Name))
	if err != nil {
		return reconcile.Result{}, err
	}
	now := time.Now()
	var again time.Duration
	soon := func(d time.Duration) {
		if d > 0 && (again == 0 || d < again) {
			again = d
		}
	}
	for uid, live := range drift.LivePods(pods, drift.OwnersOf(rss, jobs)) {
		r.mu.Lock()
		last, had := r.last[uid]
		r.mu.Unlock()
		d := decide(live, r.opts.Grace, now, last, had)
		if d.Pod == nil {
			if d.Wait > 0 {
				ctrl.LoggerFrom(ctx).V(1).Info("no pod evicted for a stale certificate yet", "workload", uid, "why", d.Why, "again", d.Wait.String())
			}
			soon(d.Wait)
			continue
		}
		if wait := r.backingOff(d.Pod.UID, now); wait > 0 {
			soon(wait)
			continue
		}
		if res := r.pace.Reserve(); res.Delay() > 0 {
			res.Cancel()
			soon(res.Delay())
			continue
		}
		soon(r.evict(ctx, uid, d, len(live), now))
	}
	r.forget(now)
	return reconcile.Result{RequeueAfter: again}, nil
}

// forget drops what is kept of evictions long done and refusals long
// past, so pods and workloads that are gone are not remembered forever.
func (r *restarts) forget(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, e := range r.last {
		if now.Sub(e.at) > time.Hour {
			delete(r.last, uid)
		}
	}
	for uid, b := range r.refused {
		if now.Sub(b.next) > 2*maxRetry {
			delete(r.refused, uid)
		}
	}
}

// decision is what to do with one workload's pods now.
type decision struct {
	// Pod is the pod to evict now; nil for none.
	Pod *corev1.Pod
	// Stale is its port presenting a stale leaf longest.
	Stale reload.CertEntry
	// Wait is when to look again (0: only on a change); Why says why
	// nothing is evicted now.
	Wait time.Duration
	Why  string
}

// decide picks the pod of a workload (its live pods) to evict now: one
// that asks for it and has presented a stale certificate for grace, while
// no pod of the workload is terminating or not ready and the replacement
// of the last pod evicted (last, when had) is there.
func decide(pods []*corev1.Pod, grace time.Duration, now time.Time, last evicted, had bool) decision {
	var out decision
	var candidates []*corev1.Pod
	stale := map[types.UID]reload.CertEntry{}
	for _, p := range pods {
		if p.Annotations[v1alpha1.OnStaleCertAnnotation] != v1alpha1.OnStaleCertRestart || p.DeletionTimestamp != nil {
			continue
		}
		for _, e := range reload.CertEntriesOf(p) {
			if e.Result != reload.CertStale {
				continue
			}
			if left := grace - e.StaleFor(now); left > 0 {
				if out.Wait == 0 || left < out.Wait {
					out.Wait = left
				}
				continue
			}
			if s, ok := stale[p.UID]; !ok || e.Since.Before(s.Since) {
				stale[p.UID] = e
			}
		}
		if _, ok := stale[p.UID]; ok {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		out.Why = "no pod has presented a stale certificate for the grace"
		return out
	}
	out.Wait = lookAgain
	if had && (slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.UID == last.pod }) || len(pods) < last.pods) {
		out.Why = "the replacement of the pod evicted last is not there yet"
		return out
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			out.Why = "pod " + p.Name + " is terminating"
			return out
		}
	}
	// The longest stale first; by name between equals.
	slices.SortFunc(candidates, func(a, b *corev1.Pod) int {
		if c := stale[a.UID].Since.Compare(stale[b.UID].Since); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	pick := candidates[0]
	for _, p := range pods {
		if p.UID != pick.UID && !ready(p) {
			out.Why = "pod " + p.Name + " is not ready"
			return out
		}
	}
	return decision{Pod: pick, Stale: stale[pick.UID]}
}

func ready(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// backingOff is how long a pod whose eviction was refused waits still.
func (r *restarts) backingOff(pod types.UID, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.refused[pod]
	if !ok || !now.Before(b.next) {
		return 0
	}
	return b.next.Sub(now)
}

// evict evicts d.Pod, the workload's (uid), and returns when to look again.
func (r *restarts) evict(ctx context.Context, uid types.UID, d decision, pods int, now time.Time) time.Duration {
	p := d.Pod
	podUID := p.UID
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		// This pod, not one that took its name since (a StatefulSet's).
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &podUID}}}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	err := r.client.SubResource("eviction").Create(ctx, target, eviction)
	regarding := r.regarding(ctx, p)
	what := fmt.Sprintf("port %d presented certificate serial %s since %s while the pod mounts serial %s from %s",
		d.Stale.Port, d.Stale.Presented.Serial, d.Stale.Since.UTC().Format(time.RFC3339), d.Stale.Mounted.Serial, reload.CertSource(d.Stale.Secret, d.Stale.Certificate))
	switch {
	case err == nil:
		evictions.WithLabelValues("evicted").Inc()
		r.mu.Lock()
		r.last[uid] = evicted{pod: p.UID, pods: pods, at: now}
		delete(r.refused, p.UID)
		r.mu.Unlock()
		r.events.Eventf(regarding, p, corev1.EventTypeNormal, "StaleCertificateEvicted", "Evict",
			"evicted pod %s: %s (%s: Restart)", p.Name, what, v1alpha1.OnStaleCertAnnotation)
		return lookAgain
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return lookAgain // gone, or another pod by that name now
	}
	ctrl.LoggerFrom(ctx).Info("a pod presenting a stale certificate was not evicted", "pod", client.ObjectKeyFromObject(p), "error", err.Error())
	result := "failed"
	if apierrors.IsTooManyRequests(err) {
		result = "refused" // a PodDisruptionBudget
	}
	evictions.WithLabelValues(result).Inc()
	r.mu.Lock()
	b := r.refused[p.UID]
	b.wait = min(max(2*b.wait, firstRetry), maxRetry)
	b.next = now.Add(b.wait)
	r.refused[p.UID] = b
	first := b.wait == firstRetry
	r.mu.Unlock()
	if first {
		r.events.Eventf(regarding, p, corev1.EventTypeWarning, "StaleCertificateEvictionRefused", "Evict",
			"pod %s not evicted (%v); tried again with backoff: %s", p.Name, err, what)
	}
	return b.wait
}

// regarding is the pod's top-level workload, or the pod.
func (r *restarts) regarding(ctx context.Context, p *corev1.Pod) client.Object {
	if w, ok, _ := r.opts.Kinds.TopWorkloadOf(ctx, r.client, p); ok {
		return w.Obj
	}
	return p
}
