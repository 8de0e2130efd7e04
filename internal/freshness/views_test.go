package freshness

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// flaky is a ListerWatcher whose first failures calls fail as err does,
// and whose watches are fakes the test drives.
type flaky struct {
	failures int
	err      error
	calls    int
	watches  chan *watch.FakeWatcher
}

func (f *flaky) List(metav1.ListOptions) (runtime.Object, error) {
	f.calls++
	if f.calls <= f.failures {
		return nil, f.err
	}
	return &corev1.ConfigMapList{}, nil
}

func (f *flaky) Watch(metav1.ListOptions) (watch.Interface, error) {
	f.calls++
	if f.calls <= f.failures {
		return nil, f.err
	}
	w := watch.NewFake()
	f.watches <- w
	return w, nil
}

func TestViewIsStaleUntilAWatchHasBeenOpenForSettle(t *testing.T) {
	v := New()
	clock := time.Now()
	v.now = func() time.Time { return clock }
	lw := &flaky{watches: make(chan *watch.FakeWatcher, 1)}
	observed := v.Observe("ConfigMap", lw)
	if len(v.Stale("ConfigMap")) == 0 {
		t.Fatal("a kind with no watch yet is current")
	}
	if len(v.Stale("ConfigSchema")) > 0 {
		t.Fatal("a kind the process does not watch is stale")
	}
	w, err := observed.(toolscache.ListerWatcherWithContext).WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fake := <-lw.watches
	if len(v.Stale("ConfigMap")) == 0 {
		t.Fatal("a watch opened this instant makes the view current before its events arrived")
	}
	clock = clock.Add(Settle)
	if stale := v.Stale("ConfigMap", "ConfigSchema"); len(stale) > 0 {
		t.Fatalf("%v stale with a watch open for %v", stale, Settle)
	}
	go fake.Add(&corev1.ConfigMap{})
	<-w.ResultChan()
	if s := v.States()[0]; !s.Open || !s.LastEvent.Equal(clock) {
		t.Fatalf("after an event: %+v", s)
	}

	// The API server goes: the watch ends.
	clock = clock.Add(time.Minute)
	fake.Stop()
	for range w.ResultChan() {
	}
	if stale := v.Stale("ConfigMap"); len(stale) != 1 || stale[0].Kind != "ConfigMap" || !stale[0].Since.Equal(clock) {
		t.Fatalf("after the watch ended: %v, want ConfigMap since %v", stale, clock)
	}
}

func TestBrokenWatchesAreTriedAgainSoonNotWithClientGosLongBackoff(t *testing.T) {
	for name, err := range map[string]error{
		"connection refused": &netOpError{syscall.ECONNREFUSED},
		"503":                apierrors.NewServiceUnavailable("starting"),
		"429":                apierrors.NewTooManyRequests("busy", 1),
	} {
		t.Run(name, func(t *testing.T) {
			lw := &flaky{failures: 4, err: err, watches: make(chan *watch.FakeWatcher, 1)}
			observed := New().Observe("ConfigMap", lw)
			start := time.Now()
			if _, err := observed.(toolscache.ListerWatcherWithContext).WatchWithContext(context.Background(), metav1.ListOptions{}); err != nil {
				t.Fatalf("the watch was not tried again: %v", err)
			}
			// 4 waits of at most 250 ms, 500 ms, 1 s and 1 s.
			if took := time.Since(start); took > 3*time.Second || lw.calls != 5 {
				t.Fatalf("%d calls in %v", lw.calls, took)
			}
		})
	}
	gone := apierrors.NewResourceExpired("too old resource version")
	lw := &flaky{failures: 1, err: gone, watches: make(chan *watch.FakeWatcher, 1)}
	if _, err := New().Observe("ConfigMap", lw).(toolscache.ListerWatcherWithContext).WatchWithContext(context.Background(), metav1.ListOptions{}); !errors.Is(err, gone) && !apierrors.IsResourceExpired(err) {
		t.Fatalf("an error for the reflector to handle (a relist) was not returned to it: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lw = &flaky{failures: 1000, err: &netOpError{syscall.ECONNREFUSED}}
	if _, err := New().Observe("ConfigMap", lw).(toolscache.ListerWatcherWithContext).ListWithContext(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("a stopped informer's list went on")
	}
}

// switchable is a ListerWatcher whose lists fail while down is set.
type switchable struct {
	down atomic.Bool
}

func (l *switchable) List(metav1.ListOptions) (runtime.Object, error) {
	if l.down.Load() {
		return nil, apierrors.NewServiceUnavailable("etcd is down")
	}
	return &corev1.ConfigMapList{}, nil
}

func (l *switchable) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

func TestGateJudgesDuringAnOutageWaitsAfterItAndThenRefuses(t *testing.T) {
	v := New()
	api := &switchable{}
	api.down.Store(true)
	observed := v.Observe("ConfigPolicy", api)
	g := &Gate{Views: v, Kinds: []string{"ConfigPolicy"}, Wait: 300 * time.Millisecond}

	if err := g.Check(context.Background()); err != nil {
		t.Fatalf("while the API server lists no ConfigPolicies, a stale view must judge: %v", err)
	}
	if err := g.Ready(context.Background()); err != nil {
		t.Fatalf("not ready during an outage: %v", err)
	}

	api.down.Store(false)
	time.Sleep(2 * askEvery) // the gate has asked again
	start := time.Now()
	err := g.Check(context.Background())
	if err == nil || time.Since(start) < g.Wait {
		t.Fatalf("with the API server listing ConfigPolicies and the view stale, the review was judged (err %v after %v)", err, time.Since(start))
	}
	if err := g.Ready(context.Background()); err == nil {
		t.Fatal("ready with a view stale for longer than Wait while the API server lists the kind")
	}

	// The watch comes back while a review waits.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = observed.(toolscache.ListerWatcherWithContext).WatchWithContext(context.Background(), metav1.ListOptions{})
	}()
	g.Wait = Settle + time.Second
	if err := g.Check(context.Background()); err != nil {
		t.Fatalf("the view came back within the wait, yet: %v", err)
	}
	if err := g.Ready(context.Background()); err != nil {
		t.Fatalf("not ready with a current view: %v", err)
	}
}

// An API server that serves lists and watches but does not report ready
// (it is starting) holds no review: they are judged from the view as it
// was, as during the outage.
func TestGateHoldsNoReviewWhileTheAPIServerIsNotReady(t *testing.T) {
	v := New()
	api := &switchable{}
	v.Observe("ConfigPolicy", api)
	var ready atomic.Bool
	g := &Gate{Views: v, Kinds: []string{"ConfigPolicy"}, Wait: 2 * time.Second,
		APIServerReady: func(context.Context) bool { return ready.Load() }}
	start := time.Now()
	if err := g.Check(context.Background()); err != nil || time.Since(start) > time.Second {
		t.Fatalf("a starting API server held a review %v (err %v)", time.Since(start), err)
	}
	ready.Store(true)
	time.Sleep(2 * askEvery) // the gate has asked again
	start = time.Now()
	if err := g.Check(context.Background()); err == nil || time.Since(start) < g.Wait {
		t.Fatalf("once ready, serving ConfigPolicies with the view stale, the review was judged (err %v after %v)", err, time.Since(start))
	}
}

// hanging is an API server that takes connections and never answers.
type hanging struct{}

func (hanging) ListWithContext(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (h hanging) List(o metav1.ListOptions) (runtime.Object, error) {
	return h.ListWithContext(context.Background(), o)
}
func (hanging) WatchWithContext(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (h hanging) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return h.WatchWithContext(context.Background(), o)
}

func TestGateHoldsNoReviewLongerThanOneAskOfAHangingAPIServer(t *testing.T) {
	v := New()
	v.Observe("ConfigPolicy", hanging{})
	g := &Gate{Views: v, Kinds: []string{"ConfigPolicy"}, Wait: 3 * time.Second}
	start := time.Now()
	errs := make(chan error, 50)
	for range 50 {
		go func() { errs <- g.Check(context.Background()) }()
	}
	for range 50 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > askTimeout+askEvery+200*time.Millisecond {
		t.Fatalf("50 reviews took %v to be judged from memory while the API server hung", took)
	}
}

// netOpError is a dial's error, as client-go returns it wrapped.
type netOpError struct{ errno syscall.Errno }

func (e *netOpError) Error() string   { return "dial tcp 127.0.0.1:6443: " + e.errno.Error() }
func (e *netOpError) Unwrap() error   { return e.errno }
func (e *netOpError) Timeout() bool   { return false }
func (e *netOpError) Temporary() bool { return false }
