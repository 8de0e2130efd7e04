package freshness

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Gate decides whether a review may be judged from the view as it is.
//
// While the API server this process watches through cannot serve a watch
// of a kind whose view is stale (it restarts, etcd is down, its watch cache
// of the kind is not ready yet), nothing newer can be had, and the cluster's other API servers
// still need an answer: the review is judged from memory, as before the
// outage. Once it serves the kind's watch again, the view is stale for a reason that
// passes in moments (the watch reopening within Retry's bound, its events
// arriving): the review waits up to Wait for it. After that the replica
// refuses to judge (the webhook's failure policy decides, as when it sheds
// load) and reports not ready, so that its Service sends the reviews to a
// replica whose view is current.
//
// Both replicas never step out together because of a blip: during it the
// API server serves no watch, so they keep judging; after it, their watches
// reopen within Retry's bound, inside Wait. Only a replica whose API server
// serves a kind while its own watch of it stays broken steps out.
type Gate struct {
	Views *Views
	// Kinds are the kinds whose view a review is judged with.
	Kinds []string
	// Wait is how long a review waits for a stale view to come back.
	Wait time.Duration
	// APIServerReady, when set, asks the API server whether it reports
	// ready (/readyz). One that does not is starting (or cannot reach its
	// storage): it may already answer lists and watches while it loads,
	// and holding every review then, all released at once when the view
	// comes back, on a control plane busy starting, costs more than judging
	// from the view as it was, as during the outage itself.
	APIServerReady func(context.Context) bool

	mu      sync.Mutex
	probing bool
	asked   map[string]ask
}

// ask is the API server's last answer about a kind.
type ask struct {
	served bool
	at     time.Time // when the ask started
}

// askEvery is how often the API server is asked about each stale kind,
// and askTimeout how long one ask may take.
const (
	askEvery   = 100 * time.Millisecond
	askTimeout = 500 * time.Millisecond
)

// Check returns nil when a review may be judged now, waiting for a stale
// view for up to Wait; otherwise an error that says why not. It never
// calls the API server itself: a hanging API server would hold every
// review.
func (g *Gate) Check(ctx context.Context) error {
	if len(g.Views.Stale(g.Kinds...)) == 0 {
		return nil
	}
	deadline := time.NewTimer(g.Wait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		stale := g.Views.Stale(g.Kinds...)
		if len(stale) == 0 {
			return nil
		}
		servable, known := g.servable(stale)
		if known && servable == "" {
			judgedStale.Inc()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("this replica's view of %s objects has been out of date for %v although its API server serves them; it waited %v for its watch to come back", stale[0].Kind, time.Since(stale[0].Since).Round(time.Millisecond), g.Wait)
		case <-tick.C:
		}
	}
}

// Ready is the readiness check: not ready while the view of a kind the API
// server serves has been stale for longer than Wait.
func (g *Gate) Ready(context.Context) error {
	var late []StaleView
	for _, s := range g.Views.Stale(g.Kinds...) {
		if time.Since(s.Since) >= g.Wait {
			late = append(late, s)
		}
	}
	if len(late) == 0 {
		return nil
	}
	if kind, _ := g.servable(late); kind != "" {
		return fmt.Errorf("the view of %s objects has been out of date for over %v although the API server serves them: not judging with it until its watch is back", kind, g.Wait)
	}
	return nil
}

// servable is a kind among stale whose watch the API server served after its view
// went stale, if any; known says whether every one of them was asked about
// since (an unknown one may yet be servable).
func (g *Gate) servable(stale []StaleView) (kind string, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.probing {
		g.probing = true
		go g.probe()
	}
	known = true
	for _, s := range stale {
		a, ok := g.asked[s.Kind]
		if !ok || a.at.Before(s.Since) {
			known = false
			continue
		}
		if a.served {
			return s.Kind, true
		}
	}
	return "", known
}

// answered keeps what a probe begun at at learnt of kind: whether its API
// server serves it.
func (g *Gate) answered(kind string, served bool, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.asked == nil {
		g.asked = map[string]ask{}
	}
	g.asked[kind] = ask{served: served, at: at}
}

// probe asks the API server about every stale kind while any is stale.
func (g *Gate) probe() {
	for {
		stale := g.Views.Stale(g.Kinds...)
		if len(stale) == 0 {
			g.mu.Lock()
			// A view that went stale since is probed by the next caller.
			g.probing = false
			g.mu.Unlock()
			return
		}
		at := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
		ready := g.APIServerReady == nil || g.APIServerReady(ctx)
		cancel()
		if !ready {
			for _, s := range stale {
				g.answered(s.Kind, false, at)
			}
			time.Sleep(askEvery)
			continue
		}
		var wg sync.WaitGroup
		for _, s := range stale {
			wg.Add(1)
			go func() {
				defer wg.Done()
				at := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
				served := g.Views.CanWatch(ctx, s.Kind)
				cancel()
				g.answered(s.Kind, served, at)
			}()
		}
		wg.Wait()
		time.Sleep(askEvery)
	}
}
