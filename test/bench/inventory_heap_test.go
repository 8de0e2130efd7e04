package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/scheme"
)

const (
	heapNamespace = "bench-heap"
	heapObjects   = 10_000
	heapKeys      = 10
	heapValueSize = 1 << 10 // 10 keys of 1 KiB: 10 KiB of data per ConfigMap
	seedWorkers   = 16
)

// heapProfileDir, when set, receives a heap profile per variant taken at the
// moment of measurement (cache synced, after GC), named after the
// sub-benchmark. Combine with -memprofilerate for finer sampling, and read
// with `go tool pprof -sample_index=inuse_space`.
var heapProfileDir = flag.String("heapprofile-dir", "", "write a heap profile of each BenchmarkInventoryHeap variant and of BenchmarkWebhookPodCache into this directory")

var (
	heapSeedOnce sync.Once
	heapSeedErr  error
)

// BenchmarkInventoryHeap measures the heap an informer cache holds for
// 10,000 ConfigMaps of 10 KiB each, with the inventory's transform (values
// replaced by per-key digests, managed fields dropped) and without it (the
// objects as the API server sends them). Run it with -benchtime=1x: each
// iteration lists and caches all 10,000 objects.
func BenchmarkInventoryHeap(b *testing.B) {
	cfg := controlPlane(b)
	heapSeedOnce.Do(func() { heapSeedErr = seedHeapConfigMaps(b, cfg) })
	if heapSeedErr != nil {
		b.Fatal(heapSeedErr)
	}

	b.Run("digests-only", func(b *testing.B) {
		opts := inventory.CacheOptions()
		opts.Scheme = scheme.Scheme()
		measureCacheHeap(b, opts)
	})
	b.Run("full-objects", func(b *testing.B) {
		measureCacheHeap(b, cache.Options{Scheme: scheme.Scheme()})
	})
}

// measureCacheHeap reports how much the live heap grows with a cache,
// configured with opts, that holds the seeded ConfigMaps.
func measureCacheHeap(b *testing.B, opts cache.Options) {
	var total uint64
	n := 0
	for b.Loop() {
		total += kindHeap(b, opts, &corev1.ConfigMap{}, &corev1.ConfigMapList{}, heapNamespace, heapObjects)
		n++
	}
	mean := float64(total) / float64(n)
	b.ReportMetric(mean/(1<<20), "MiB/10k-objects")
	b.ReportMetric(mean/heapObjects, "B/object")
}

// seedHeapConfigMaps creates the 10,000 ConfigMaps through the API server.
func seedHeapConfigMaps(b *testing.B, cfg *rest.Config) error {
	return seedObjects(b, cfg, heapNamespace, heapObjects, func(i int) client.Object { return heapConfigMap(i) })
}

// seedObjects creates n objects made by newObj in namespace through the API
// server with a few concurrent writers (objects left by an earlier run are
// kept).
func seedObjects(b *testing.B, cfg *rest.Config, namespace string, n int, newObj func(i int) client.Object) error {
	c := newClient(b, cfg)
	createNamespace(b, c, namespace)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	jobs := make(chan int)
	errs := make(chan error, seedWorkers)
	var wg sync.WaitGroup
	for range seedWorkers {
		wg.Go(func() {
			for i := range jobs {
				if err := createIgnoringExisting(ctx, c, newObj(i)); err != nil {
					errs <- fmt.Errorf("creating object %d in %s: %w", i, namespace, err)
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	b.Logf("created %d objects in %s in %s", n, namespace, time.Since(start).Round(time.Millisecond))
	return nil
}

// heapConfigMap is ConfigMap i: heapKeys keys of heapValueSize bytes each,
// values distinct across objects and keys.
func heapConfigMap(i int) *corev1.ConfigMap {
	data := make(map[string]string, heapKeys)
	buf := make([]byte, heapValueSize)
	for k := range heapKeys {
		prefix := fmt.Sprintf("object %05d key %02d ", i, k)
		n := copy(buf, prefix)
		for j := n; j < len(buf); j++ {
			buf[j] = 'a' + byte((i+k+j)%26)
		}
		data[fmt.Sprintf("setting-%02d.conf", k)] = string(buf)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("cm-%05d", i),
			Namespace: heapNamespace,
			Labels:    map[string]string{"app.kubernetes.io/name": "bench", "bench.configward.dev/shard": fmt.Sprintf("%d", i%16)},
		},
		Data: data,
	}
}

func writeHeapProfile(b *testing.B) {
	b.Helper()
	name := filepath.Join(*heapProfileDir, filepath.Base(b.Name())+".heap.pprof")
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
	b.Logf("heap profile: %s", name)
}
