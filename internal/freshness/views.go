// Package freshness tells how current a process's view of the cluster is.
//
// configward's webhook judges from informers: memory kept current by a
// watch per kind. While a watch is broken (its API server restarting, etcd
// restarting, the network between them) the memory is what it was, and
// client-go says nothing: its reflector retries with a backoff that grows
// to 30 s, so a replica could go on judging with an old ConfigPolicy for
// tens of seconds after its API server was back. Views watches the watches:
// every informer's ListerWatcher is wrapped, so that each kind's open
// watches and last event or bookmark are known, and a broken watch is tried
// again at a short, capped interval instead of client-go's long one.
package freshness

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// Settle is how long a watch must have been open, after a break of Gap or
// more, before the view it feeds counts as current again: the events a
// reopened watch brings (or the relist before it) reach the informer's
// memory through a queue, a few milliseconds after the watch opens. The
// reflector ends and reopens every watch every few minutes; such a
// rollover, shorter than Gap, loses nothing to wait for.
const (
	Settle = 200 * time.Millisecond
	Gap    = time.Second
)

// Retry bounds the interval at which a broken watch (or the list before it)
// is tried again: from RetryFirst, doubling, to RetryMax, with jitter. A
// restarting API server refuses connections, which costs it nothing; one
// that answers 429 or 5xx is asked again at most every RetryMax by each
// informer.
const (
	RetryFirst = 250 * time.Millisecond
	RetryMax   = 500 * time.Millisecond
)

// Views tracks the watches of a process's informers, by kind.
type Views struct {
	mu    sync.Mutex
	kinds map[string]*kindState
	now   func() time.Time
	log   logr.Logger
}

type kindState struct {
	lw        toolscache.ListerWatcherWithContext // the first informer's, to ask the API server with
	open      int                                 // watches open now
	changed   time.Time                           // when open last went to or from 0
	settled   time.Time                           // when the view is current again, once open
	everOpen  bool
	lastEvent time.Time // the last event or bookmark
}

// New returns an empty tracker.
func New() *Views { return &Views{kinds: map[string]*kindState{}, now: time.Now, log: logr.Discard()} }

// WithLog makes v log the watches that come back after a break, and the
// errors it leaves to client-go's reflector.
func (v *Views) WithLog(log logr.Logger) *Views {
	v.log = log
	return v
}

// NewInformer is for controller-runtime's cache.Options.NewInformer: the
// informer it would build, over a ListerWatcher that Views observes. kindOf
// names the kind of the informer's example object.
func (v *Views) NewInformer(kindOf func(runtime.Object) string) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(v.Observe(kindOf(obj), lw), obj, resync, indexers)
	}
}

// Observe wraps lw, whose watches feed the view of kind.
func (v *Views) Observe(kind string, lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	v.mu.Lock()
	if v.kinds[kind] == nil {
		v.kinds[kind] = &kindState{changed: v.now(), lw: inner}
	}
	v.mu.Unlock()
	return &observed{views: v, kind: kind, inner: inner}
}

// StaleView is a kind whose view is not current, and since when.
type StaleView struct {
	Kind  string
	Since time.Time
}

// Stale lists the kinds of kinds whose view has no open watch, or one
// that has not settled yet. Kinds this process does not watch are not
// stale.
func (v *Views) Stale(kinds ...string) []StaleView {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	var out []StaleView
	for _, k := range kinds {
		if s := v.kinds[k]; s != nil && (s.open == 0 || now.Before(s.settled)) {
			out = append(out, StaleView{Kind: k, Since: s.changed})
		}
	}
	return out
}

// CanWatch reports whether the API server serves a watch of kind now:
// whether a newer view of it can be had. Listing is not enough: an API
// server that has just started lists custom resources from etcd seconds
// before its watch cache for them is ready, and watches wait for that.
func (v *Views) CanWatch(ctx context.Context, kind string) bool {
	v.mu.Lock()
	s := v.kinds[kind]
	v.mu.Unlock()
	if s == nil {
		return false
	}
	list, err := s.lw.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return false
	}
	rv := ""
	if l, err := meta.ListAccessor(list); err == nil {
		rv = l.GetResourceVersion()
	}
	timeout := int64(1)
	w, err := s.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
	if err != nil {
		return false
	}
	w.Stop()
	return true
}

// State is what is known of one kind's watches.
type State struct {
	Kind      string
	Open      bool
	Since     time.Time // when Open last changed
	Settled   time.Time // when an open watch's view is current
	LastEvent time.Time // zero before the first event or bookmark
}

// States lists every kind watched.
func (v *Views) States() []State {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]State, 0, len(v.kinds))
	for k, s := range v.kinds {
		out = append(out, State{Kind: k, Open: s.open > 0, Since: s.changed, Settled: s.settled, LastEvent: s.lastEvent})
	}
	return out
}

func (v *Views) opened(kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.kinds[kind]
	if s.open == 0 {
		now := v.now()
		s.settled = now
		if now.Sub(s.changed) >= Gap || !s.everOpen {
			s.settled = now.Add(Settle)
			if s.everOpen {
				v.log.Info("watch back; the view is current again once it has settled", "kind", kind, "brokenFor", now.Sub(s.changed).Round(time.Millisecond).String())
			}
		}
		s.changed, s.everOpen = now, true
	}
	s.open++
}

func (v *Views) closed(kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.kinds[kind]
	s.open--
	if s.open == 0 {
		s.changed = v.now()
	}
}

func (v *Views) event(kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.kinds[kind].lastEvent = v.now()
}

// observed is a ListerWatcher whose watches Views counts, and whose
// failures to reach the API server are tried again here, briefly, rather
// than returned to the reflector, whose backoff grows to 30 s.
type observed struct {
	views *Views
	kind  string
	inner toolscache.ListerWatcherWithContext
}

var _ toolscache.ListerWatcherWithContext = (*observed)(nil)

func (o *observed) List(options metav1.ListOptions) (runtime.Object, error) {
	return o.ListWithContext(context.Background(), options)
}

func (o *observed) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return o.WatchWithContext(context.Background(), options)
}

func (o *observed) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	out, err := retry(ctx, func() (runtime.Object, error) { return o.inner.ListWithContext(ctx, options) })
	if err != nil && ctx.Err() == nil {
		o.views.log.Info("list failed; client-go retries it", "kind", o.kind, "error", err.Error())
	}
	return out, err
}

func (o *observed) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	var stop context.CancelFunc
	w, err := retry(ctx, func() (watch.Interface, error) {
		// An API server whose watch cache of the kind is not ready holds
		// a watch for as long as that takes, and keeps holding one asked
		// for an old resource version after it serves new ones: an attempt
		// that has not opened within attemptTimeout is tried afresh.
		wctx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(attemptTimeout, cancel)
		w, err := o.inner.WatchWithContext(wctx, options)
		if !timer.Stop() {
			if err == nil {
				w.Stop()
			}
			cancel()
			return nil, errAttemptTimedOut
		}
		if err != nil {
			cancel()
			return nil, err
		}
		stop = cancel
		return w, nil
	})
	if err != nil {
		if ctx.Err() == nil {
			o.views.log.Info("watch failed; client-go lists again", "kind", o.kind, "error", err.Error())
		}
		return nil, err
	}
	o.views.opened(o.kind)
	return newCountedWatch(w, func() { o.views.event(o.kind) }, func() { stop(); o.views.closed(o.kind) }), nil
}

// attemptTimeout bounds how long one attempt to open a watch may take.
const attemptTimeout = time.Second

var errAttemptTimedOut = errors.New("the watch did not open within a second")

// retry calls try until it succeeds, fails with an error that trying again
// soon cannot fix (the reflector handles those: a resource version too old,
// a forbidden list), or ctx ends.
func retry[T any](ctx context.Context, try func() (T, error)) (T, error) {
	wait := RetryFirst
	for {
		out, err := try()
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, RetryMax)
	}
}

// unreachable is an error of not reaching a working API server. A kind
// not found counts too: an API server that has just started serves custom
// resources a moment after it answers.
func unreachable(err error) bool {
	var netErr net.Error
	return errors.Is(err, errAttemptTimedOut) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.As(err, &netErr) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsNotFound(err)
}

// countedWatch passes a watch's events on, calling onEvent for each and
// onClose once when it ends.
type countedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newCountedWatch(inner watch.Interface, onEvent, onClose func()) watch.Interface {
	w := &countedWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		defer onClose()
		for {
			select {
			case <-w.stop:
				return
			case e, ok := <-inner.ResultChan():
				if !ok {
					return
				}
				onEvent()
				select {
				case w.out <- e:
				case <-w.stop:
					return
				}
			}
		}
	}()
	return w
}

func (w *countedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *countedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}
