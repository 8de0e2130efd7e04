package peers

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Result of one load phase.
type Result struct {
	// Latencies of the requests that got an answer (allowed or denied), in
	// the order they finished.
	Latencies []time.Duration
	// Errors counts requests that got no answer (timeouts, refused).
	Errors  int
	Elapsed time.Duration
}

// Rate is answered requests per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Latencies)) / r.Elapsed.Seconds()
}

// Percentile returns the p-th percentile (0 < p <= 100) of the latencies,
// nearest-rank.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.Latencies)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ClosedLoop runs clients workers, each sending its next request when the
// previous one is answered, until duration has passed or maxRequests were
// sent, whichever comes first: the loop always ends by itself. do gets the
// worker and the request's sequence number.
func ClosedLoop(ctx context.Context, clients int, duration time.Duration, maxRequests int, do func(ctx context.Context, worker, seq int) error) Result {
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var (
		mu   sync.Mutex
		res  Result
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			errs := 0
			for ctx.Err() == nil {
				seq := int(next.Add(1)) - 1
				if seq >= maxRequests {
					break
				}
				t0 := time.Now()
				err := do(ctx, w, seq)
				if ctx.Err() != nil {
					break // cut off by the deadline: neither answered nor failed
				}
				if err != nil {
					errs++
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, local...)
			res.Errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// OpenLoop sends requests at a fixed rate for duration, whatever the answers
// do, with up to inFlight outstanding. A request's latency counts from when
// it was due, not from when a free sender picked it up, so a server that
// falls behind shows it (no coordinated omission).
func OpenLoop(ctx context.Context, rate float64, duration time.Duration, inFlight int, do func(ctx context.Context, seq int) error) Result {
	ctx, cancel := context.WithTimeout(ctx, duration+10*time.Second)
	defer cancel()
	total := int(rate * duration.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	due := make(chan time.Time, total)
	var (
		mu  sync.Mutex
		res Result
		wg  sync.WaitGroup
		seq atomic.Int64
	)
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			errs := 0
			for at := range due {
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				}
				if err := do(ctx, int(seq.Add(1))-1); err != nil {
					errs++
					continue
				}
				local = append(local, time.Since(at))
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, local...)
			res.Errors += errs
			mu.Unlock()
		}()
	}
	start := time.Now()
	for i := range total {
		due <- start.Add(time.Duration(i) * interval)
	}
	close(due)
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}
