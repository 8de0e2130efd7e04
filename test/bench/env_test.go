// Package bench holds configward's benchmarks. They run against a real
// kube-apiserver and etcd (envtest, from $KUBEBUILDER_ASSETS), started
// lazily by the first benchmark that needs them, so `go test ./...`, which
// runs no benchmarks, starts nothing here. Run them with `make bench`.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/scheme"
)

var (
	envOnce sync.Once
	testEnv *envtest.Environment
	envCfg  *rest.Config
	envErr  error
)

func TestMain(m *testing.M) {
	// Benchmarks measure the library, not log formatting.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if testEnv != nil {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	os.Exit(code)
}

// controlPlane starts kube-apiserver and etcd on first use and returns a
// copy of the admin config with client-side rate limits high enough to load
// thousands of objects quickly.
func controlPlane(tb testing.TB) *rest.Config {
	tb.Helper()
	envOnce.Do(func() {
		if os.Getenv("KUBEBUILDER_ASSETS") == "" {
			envErr = errors.New("KUBEBUILDER_ASSETS is not set: run the benchmarks with `make bench`, which builds kube-apiserver and etcd and points KUBEBUILDER_ASSETS at them")
			return
		}
		// configward's CRDs: the handlers' benchmarks serve every webhook,
		// and the ConfigMap ones read ConfigSchemas from the cache.
		testEnv = &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute,
			CRDDirectoryPaths: []string{"../../config/crd/bases"}, ErrorIfCRDPathMissing: true}
		envCfg, envErr = testEnv.Start()
		if envErr != nil {
			envErr = fmt.Errorf("starting kube-apiserver and etcd: %w", envErr)
			return
		}
		envErr = warmUp(envCfg)
	})
	if envErr != nil {
		tb.Fatal(envErr)
	}
	cfg := rest.CopyConfig(envCfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

// warmUp syncs and stops one cache before any benchmark measures one: what
// the first cache of a process sets up once and keeps (client-go's shared
// transports and their connections) would otherwise count against the
// objects of whichever heap benchmark runs first.
func warmUp(cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1000, 2000
	opts := inventory.CacheOptions()
	opts.Scheme = scheme.Scheme()
	ca, err := cache.New(c, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ca.GetInformer(ctx, &corev1.Namespace{}); err != nil {
		return err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return errors.New("warming up: the cache did not sync")
	}
	return nil
}

func newClient(tb testing.TB, cfg *rest.Config) client.Client {
	tb.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func createNamespace(tb testing.TB, c client.Client, name string) {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
}

// createIgnoringExisting creates obj; an object left by an earlier run of the
// same benchmark (-count > 1) is fine.
func createIgnoringExisting(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
