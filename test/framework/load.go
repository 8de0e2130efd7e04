package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/scheme"
)

// Load is admission traffic sent through an API server while a fault
// happens: server-side dry-run creates of Deployments, ConfigMaps and
// Secrets, each of which passes through configward's webhooks. Its
// request loops are bounded in count and time and stop by themselves.
type Load struct {
	ns string
	// Sent and Failed count the requests made and those that failed.
	Sent, Failed atomic.Int64
	errs         sync.Map // error message -> *failures
}

// failures are the requests that failed with one error: how many, and
// when the first and the last of them were sent (wall clock, to set
// beside a spec's steps).
type failures struct {
	n           atomic.Int64
	mu          sync.Mutex
	first, last time.Time
}

func (f *failures) add(sent time.Time) {
	f.n.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first.IsZero() || sent.Before(f.first) {
		f.first = sent
	}
	if sent.After(f.last) {
		f.last = sent
	}
}

// StartLoad sends the load through the API server cfg points at, at
// perSecond, until stop is closed or limit passes (bounded in time, and so
// in count), and reports on done how long it ran.
func StartLoad(ctx context.Context, cfg *rest.Config, ns string, perSecond int, limit time.Duration, stop <-chan struct{}) (*Load, <-chan time.Duration, error) {
	l, c, err := newLoad(cfg, ns, perSecond*2)
	if err != nil {
		return nil, nil, err
	}
	work := make(chan int64, perSecond)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				l.send(ctx, c, i)
			}
		}()
	}
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		deadline := time.After(limit)
		for i := int64(0); ; i++ {
			select {
			case <-stop:
			case <-deadline:
			case <-tick.C:
				select {
				case work <- i:
				default: // the workers are behind: the request is not sent, and not counted
				}
				continue
			}
			break
		}
		close(work)
		wg.Wait()
		done <- time.Since(start)
	}()
	return l, done, nil
}

// StartSparseLoad sends bursts of width requests at once, the next 80 to
// 95 s (at random) after the last, until stop is closed or limit passes.
// The API server opens about width connections to the webhooks for the
// first burst and reuses them for the next, so each connection carries one
// request every 80 to 95 s and sits idle in between, near the API server's
// own 90 s idle timeout: where closing a connection under the API server
// is likeliest to catch a request.
func StartSparseLoad(ctx context.Context, cfg *rest.Config, ns string, width int, limit time.Duration, stop <-chan struct{}) (*Load, <-chan time.Duration, error) {
	l, c, err := newLoad(cfg, ns, width)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		deadline := time.After(limit)
		var next int64
		for {
			var wg sync.WaitGroup
			for range width {
				wg.Add(1)
				go func(i int64) { defer wg.Done(); l.send(ctx, c, i) }(next)
				next++
			}
			wg.Wait()
			select {
			case <-stop:
			case <-deadline:
			case <-time.After(80*time.Second + rand.N(15*time.Second)):
				continue
			}
			break
		}
		done <- time.Since(start)
	}()
	return l, done, nil
}

// newLoad is a load and the client it sends with, allowed burst requests
// at once.
func newLoad(cfg *rest.Config, ns string, burst int) (*Load, client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(burst), burst
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	return &Load{ns: ns}, c, err
}

// send makes the load's request number i: a server-side dry-run create of
// a Deployment, a ConfigMap or a Secret, in turn.
func (l *Load) send(ctx context.Context, c client.Client, i int64) {
	name := "load-" + strconv.FormatInt(i, 10)
	var obj client.Object
	switch i % 3 {
	case 0:
		obj = LoadDeployment(l.ns, name)
	case 1:
		obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: name}, Data: map[string]string{"k": "v"}}
	default:
		obj = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: name}, StringData: map[string]string{"k": "v"}}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sent := time.Now()
	err := c.Create(rctx, obj, client.DryRunAll)
	cancel()
	l.Sent.Add(1)
	if err != nil {
		l.Failed.Add(1)
		f, _ := l.errs.LoadOrStore(err.Error(), &failures{})
		f.(*failures).add(sent)
	}
}

// Failures counts the failed requests whose error matches.
func (l *Load) Failures(match func(msg string) bool) int64 {
	var n int64
	l.errs.Range(func(k, v any) bool {
		if match(k.(string)) {
			n += v.(*failures).n.Load()
		}
		return true
	})
	return n
}

// Summary is the load's figures, and each distinct error with its count
// (the most frequent first, at most five), for the report.
func (l *Load) Summary(took time.Duration) string {
	type counted struct {
		msg         string
		n           int64
		first, last time.Time
	}
	var errs []counted
	l.errs.Range(func(k, v any) bool {
		f := v.(*failures)
		f.mu.Lock()
		errs = append(errs, counted{k.(string), f.n.Load(), f.first, f.last})
		f.mu.Unlock()
		return true
	})
	sort.Slice(errs, func(i, j int) bool { return errs[i].n > errs[j].n })
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests in %v (%.0f/s), %d failed", l.Sent.Load(), took.Round(time.Millisecond),
		float64(l.Sent.Load())/took.Seconds(), l.Failed.Load())
	for i, e := range errs {
		if i == 5 {
			fmt.Fprintf(&b, "\n  ... and %d more distinct errors", len(errs)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %d× (sent %s to %s) %s", e.n, e.first.UTC().Format("15:04:05.000"), e.last.UTC().Format("15:04:05.000"), tail(e.msg, 300))
	}
	return b.String()
}

// CallingWebhook is true for an error the API server reports when it could
// not call a webhook (as opposed to a webhook's denial, or a failure of
// the API server's own storage).
func CallingWebhook(msg string) bool {
	return strings.Contains(msg, "failed calling webhook")
}

// LoadDeployment is a Deployment that mounts the ConfigMap "shared".
func LoadDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}},
				},
			},
		},
	}
}

// WebhookCallFailures is what the API server counts of calls to webhooks
// that failed (rejected for an error calling the webhook, or let through by
// a fail-open webhook), from the /metrics of the API server cfg points at.
func WebhookCallFailures(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !(strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{") ||
			strings.HasPrefix(line, "apiserver_admission_webhook_rejection_count{") && strings.Contains(line, `error_type="calling_webhook_error"`)) {
			continue
		}
		i := strings.LastIndex(line, " ")
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("the API server's metric line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, nil
}
