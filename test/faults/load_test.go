package faults

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/scheme"
)

// load is admission traffic sent through an API server while a fault
// happens: server-side dry-run creates of Deployments, ConfigMaps and
// Secrets, each of which passes through configward's webhooks.
type load struct {
	sent, failed atomic.Int64
	errs         sync.Map // error message -> *atomic.Int64
}

// startLoad sends the load through the API server cfg points at, at
// perSecond, until stop is closed or limit passes (bounded in time, and so
// in count), and reports on done how long it ran.
func startLoad(ctx context.Context, cfg *rest.Config, ns string, perSecond int, limit time.Duration, stop <-chan struct{}) (*load, <-chan time.Duration) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(perSecond*2), perSecond*2
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	objects := []func(i int64) client.Object{
		func(i int64) client.Object { return deployment(ns, "load-"+strconv.FormatInt(i, 10)) },
		func(i int64) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "load-" + strconv.FormatInt(i, 10)}, Data: map[string]string{"k": "v"}}
		},
		func(i int64) client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "load-" + strconv.FormatInt(i, 10)}, StringData: map[string]string{"k": "v"}}
		},
	}
	l := &load{}
	work := make(chan int64, perSecond)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := c.Create(rctx, objects[i%int64(len(objects))](i), client.DryRunAll)
				cancel()
				l.sent.Add(1)
				if err != nil {
					l.failed.Add(1)
					n, _ := l.errs.LoadOrStore(err.Error(), new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				}
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
	return l, done
}

// minimumLoad is how many requests a fault spec's load sends at least:
// fewer prove nothing about the webhooks under the fault.
const minimumLoad = 1000

// enough keeps the load going, for at most a minute more, until it has
// sent more than minimumLoad requests. Its rate is not the machine's to
// promise: under make test the other suites share the two cores, and while
// etcd or an API server is down the workers wait on their requests, so the
// fault's window alone may hold too few.
func (l *load) enough() {
	Eventually(l.sent.Load, time.Minute, 100*time.Millisecond).Should(BeNumerically(">", minimumLoad), "too little load to prove anything")
}

// failures counts the failed requests whose error matches.
func (l *load) failures(match func(msg string) bool) int64 {
	var n int64
	l.errs.Range(func(k, v any) bool {
		if match(k.(string)) {
			n += v.(*atomic.Int64).Load()
		}
		return true
	})
	return n
}

// summary is the load's figures, and each distinct error with its count
// (the most frequent first, at most five), for the report.
func (l *load) summary(took time.Duration) string {
	type counted struct {
		msg string
		n   int64
	}
	var errs []counted
	l.errs.Range(func(k, v any) bool {
		errs = append(errs, counted{k.(string), v.(*atomic.Int64).Load()})
		return true
	})
	sort.Slice(errs, func(i, j int) bool { return errs[i].n > errs[j].n })
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests in %v (%.0f/s), %d failed", l.sent.Load(), took.Round(time.Millisecond),
		float64(l.sent.Load())/took.Seconds(), l.failed.Load())
	for i, e := range errs {
		if i == 5 {
			fmt.Fprintf(&b, "\n  ... and %d more distinct errors", len(errs)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %d× %s", e.n, tail(e.msg, 300))
	}
	return b.String()
}

// callingWebhook is true for an error the API server reports when it could
// not call a webhook (as opposed to a webhook's denial, or a failure of
// the API server's own storage).
func callingWebhook(msg string) bool {
	return strings.Contains(msg, "failed calling webhook")
}
