package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/scheme"
)

const (
	// perSecond is the rate: requests sent to the API server, each
	// of which passes through configward's webhooks. The cluster adds its
	// own on top (the ReplicaSets and pods of each rollout).
	perSecond = 100
	// workers send the requests; enough that a slow answer (a webhook
	// timeout is 5 s) does not hold the rate back.
	workers = 64
	// swapEvery is how often the ConfigPolicy changes.
	swapEvery = 30 * time.Second
)

// kind is a kind of request in the mix.
type kind int

const (
	// schemaWrite creates, updates (with valid or invalid content) or
	// deletes a ConfigMap the ConfigSchema governs.
	schemaWrite kind = iota
	// workloadWrite creates, updates (image and env) or deletes a
	// Deployment.
	workloadWrite
	// configChange changes the data of a ConfigMap or Secret two
	// Deployments consume, so the controller rolls them.
	configChange
	// policySwap replaces the ConfigPolicy's spec with the other variant.
	policySwap
	kinds
)

var kindNames = [kinds]string{"governed ConfigMap", "Deployment", "consumed config", "ConfigPolicy swap"}

// kindOf is the kind of the i-th request: of every 50, 46 governed
// ConfigMaps, 3 Deployments and 1 config change. Every Deployment write
// and every change of consumed config makes the cluster replace pods
// (several more writes, each through the webhooks, and the scheduler and
// kwok's work), so their share is what keeps the cluster's own load within
// a 2-core machine beside the 100 requests/s; at this mix about nine pods
// a second are replaced (six Deployment writes and three rollouts by the
// controller).
func kindOf(i int64) kind {
	switch n := i % 50; {
	case n < 46:
		return schemaWrite
	case n < 49:
		return workloadWrite
	default:
		return configChange
	}
}

// expect is what configward should answer a request.
type expect int

const (
	// allow: the request must succeed.
	allow expect = iota
	// deny: the request must be denied by the named rule.
	deny
	// either: allowed, or denied by the named rule, depending on the
	// ConfigPolicy variant in force when it arrives.
	either
)

// tally counts the requests of one kind.
type tally struct {
	sent, allowed, denied, failed atomic.Int64
}

// slot is one name of a pool: its writes are serialized, so the traffic
// always knows whether the object exists.
type slot struct {
	sync.Mutex
	visits int
	exists bool
}

// pool is a bounded set of names, visited round robin.
type pool struct {
	next  atomic.Int64
	slots []slot
	// object is an empty object of name i, to look it up.
	object func(i int) client.Object
}

func newPool(n int, object func(i int) client.Object) *pool {
	return &pool{slots: make([]slot, n), object: object}
}

// traffic is the soak's load and what came of it.
type traffic struct {
	c                        client.Client
	tallies                  [kinds]tally
	skipped                  atomic.Int64
	errors                   errorLog
	warnings                 *warningCounter
	schemaCMs, deploys, cfgs *pool
}

func newTraffic() *traffic {
	t := &traffic{
		warnings: &warningCounter{counts: map[string]int{}},
		schemaCMs: newPool(schemaConfigs, func(k int) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: schemasNS, Name: schemaCMName(k)}}
		}),
		deploys: newPool(deployments, func(j int) client.Object {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: workloadsNS, Name: deploymentName(j)}}
		}),
		// Consumed config always exists.
		cfgs: newPool(2*configs, nil),
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2*perSecond, 2*perSecond
	cfg.WarningHandlerWithContext = t.warnings
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	t.c = c
	return t
}

// run sends requests at perSecond until stop is closed or d passes, swaps
// the ConfigPolicy every swapEvery meanwhile, and reports on done when
// every request has been answered.
func (t *traffic) run(ctx context.Context, d time.Duration, stop <-chan struct{}) <-chan struct{} {
	work := make(chan int64, perSecond)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				t.send(ctx, kindOf(i))
			}
		})
	}
	wg.Go(func() { t.swapPolicies(ctx, d, stop) })
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second / perSecond)
		defer tick.Stop()
		start := time.Now()
		deadline := time.After(d)
		var i int64
		for {
			select {
			case <-stop:
			case <-deadline:
			case <-tick.C:
				// What is due by now, not one per tick: a busy machine
				// delivers ticks late and drops some.
				for due := int64(time.Since(start) * perSecond / time.Second); i < due; i++ {
					select {
					case work <- i:
					default: // every worker is busy: not sent, counted apart
						t.skipped.Add(1)
					}
				}
				continue
			}
			break
		}
		close(work)
		wg.Wait()
		close(done)
	}()
	return done
}

// send makes one request of kind k on the next name of its pool and
// records what came of it.
func (t *traffic) send(ctx context.Context, k kind) {
	p, write := t.deploys, writer(t.workloadOp)
	switch k {
	case schemaWrite:
		p, write = t.schemaCMs, t.schemaOp
	case configChange:
		p, write = t.cfgs, t.configOp
	}
	i := int((p.next.Add(1) - 1) % int64(len(p.slots)))
	s := &p.slots[i]
	s.Lock()
	defer s.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	want, rule, err := write(rctx, i, s.visits, &s.exists)
	s.visits++
	if t.record(k, err, want, rule) && p.object != nil {
		// A failed create or delete may still have happened.
		s.exists = t.present(ctx, p.object(i))
	}
}

// present says whether obj exists. When the API server cannot say, it
// guesses yes: the next write will tell.
func (t *traffic) present(ctx context.Context, obj client.Object) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return !apierrors.IsNotFound(t.c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
}

// record counts a request by what was expected of it. A denial counts as
// expected only when it comes from the rule expected to deny; anything
// else (an error calling a webhook, a timeout, a 5xx, a denial by another
// rule, an invalid ConfigMap let through) is a failure. It says whether
// the request failed.
func (t *traffic) record(k kind, err error, want expect, rule string) (failed bool) {
	tl := &t.tallies[k]
	tl.sent.Add(1)
	switch {
	case err == nil && want != deny:
		tl.allowed.Add(1)
		return false
	case err == nil:
		t.errors.add(kindNames[k] + ": allowed, but rule " + rule + " should have denied it")
	case want != allow && strings.Contains(err.Error(), "denied the request: ["+rule+"]"):
		tl.denied.Add(1)
		return false
	default:
		t.errors.add(kindNames[k] + ": " + err.Error())
	}
	tl.failed.Add(1)
	return true
}

// A writer makes the request of visit v to name i of a pool, keeps
// *exists up to date, and says what configward should answer.
type writer func(ctx context.Context, i, v int, exists *bool) (expect, string, error)

// schemaOp creates a governed ConfigMap, updates it, or (every tenth
// visit) deletes it; every fifth visit writes content that breaks the
// ConfigSchema, which must be denied.
func (t *traffic) schemaOp(ctx context.Context, k, v int, exists *bool) (expect, string, error) {
	cm := schemaConfigMap(k, v)
	want := allow
	if invalid(v) {
		want = deny
	}
	switch {
	case !*exists:
		err := t.c.Create(ctx, cm)
		*exists = err == nil
		return want, "config-schema", err
	case v%10 == 9:
		err := t.c.Delete(ctx, cm)
		*exists = err != nil
		return allow, "", err
	default:
		return want, "config-schema", t.patch(ctx, cm, map[string]any{"data": cm.Data})
	}
}

// workloadOp creates a Deployment, updates its image and env, or (every
// eighth visit) deletes it. Every fourth visit sets the :canary image the
// ConfigPolicy warns of or denies, depending on the variant in force.
func (t *traffic) workloadOp(ctx context.Context, j, v int, exists *bool) (expect, string, error) {
	d := deployment(j, v)
	switch {
	case !*exists:
		err := t.c.Create(ctx, d)
		*exists = err == nil
		return allow, "", err
	case v%8 == 7:
		err := t.c.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground))
		*exists = err != nil
		return allow, "", err
	case v%4 == 2:
		c := container(j, v)
		c.Image = canaryImage
		return either, canaryRule, t.patch(ctx, d, podSpecPatch(c))
	default:
		return allow, "", t.patch(ctx, d, podSpecPatch(container(j, v)))
	}
}

func podSpecPatch(c corev1.Container) map[string]any {
	return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []corev1.Container{c}}}}}
}

// configOp changes consumed ConfigMap i/2 (even i) or Secret i/2 (odd i).
func (t *traffic) configOp(ctx context.Context, i, v int, _ *bool) (expect, string, error) {
	rev := fmt.Sprint(v + 1)
	if i%2 == 0 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: workloadsNS, Name: configMapName(i / 2)}}
		return allow, "", t.patch(ctx, cm, map[string]any{"data": map[string]string{"rev": rev}})
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: workloadsNS, Name: secretName(i / 2)}}
	return allow, "", t.patch(ctx, s, map[string]any{"stringData": map[string]string{"token": "t-" + rev}})
}

// patch merge-patches obj: no resourceVersion, so the controller's writes
// to the same objects never make the soak's fail with a conflict.
func (t *traffic) patch(ctx context.Context, obj client.Object, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	Expect(err).NotTo(HaveOccurred())
	return t.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw))
}

// swapPolicies replaces the ConfigPolicy's spec with the other variant
// every swapEvery: each swap is a new generation the webhook compiles and
// puts in force, the old one dropped.
func (t *traffic) swapPolicies(ctx context.Context, d time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(swapEvery)
	defer tick.Stop()
	deadline := time.After(d)
	for deny := false; ; deny = !deny {
		select {
		case <-stop:
			return
		case <-deadline:
			return
		case <-tick.C:
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var p v1alpha1.ConfigPolicy
			if err := t.c.Get(ctx, client.ObjectKey{Name: policyName}, &p); err != nil {
				return err
			}
			p.Spec = policySpec(deny)
			return t.c.Update(ctx, &p)
		})
		t.record(policySwap, err, allow, "")
	}
}

// errorLog keeps the distinct failures, at most maxErrors of them, with a
// count each.
type errorLog struct {
	mu     sync.Mutex
	counts map[string]int
	other  int
}

const maxErrors = 20

func (l *errorLog) add(msg string) {
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	if _, ok := l.counts[msg]; !ok && len(l.counts) >= maxErrors {
		l.other++
		return
	}
	l.counts[msg]++
}

func (l *errorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []string
	for msg, n := range l.counts {
		lines = append(lines, fmt.Sprintf("  %6d  %s", n, msg))
	}
	sort.Strings(lines)
	if l.other > 0 {
		lines = append(lines, fmt.Sprintf("  %6d  (other messages)", l.other))
	}
	return strings.Join(lines, "\n")
}

// warningCounter counts the admission warnings the traffic got, by the
// rule id they start with ("[secret-in-env] ..."); it stands in for
// client-go's warning logger, which would print each of them.
type warningCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *warningCounter) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	rule := "other"
	if strings.HasPrefix(text, "[") {
		if end := strings.Index(text, "]"); end > 0 {
			rule = text[1:end]
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[rule]++
}

func (w *warningCounter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for rule, n := range w.counts {
		parts = append(parts, fmt.Sprintf("%s %d", rule, n))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
