package manager

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
)

// Process is a configured manager that drains before it stops: the
// webhook (webhook.go) and the controller (controller.go) are each one.
type Process struct {
	Manager  ctrlmanager.Manager
	draining atomic.Bool
	delay    time.Duration
	// server, when the process serves the API server, drains before the
	// manager stops it.
	server drainer
}

// drainer is a server the API server keeps connections to.
type drainer interface {
	// Drain makes every answer from now on close its connection.
	Drain()
	// WaitConnectionsClosed returns once the API server holds no
	// connection to the server.
	WaitConnectionsClosed(context.Context) error
	// DrainBound is the longest that wait takes with a well-behaved API
	// server.
	DrainBound() time.Duration
}

// RESTConfig loads the connection to the API server: an explicit kubeconfig,
// else $KUBECONFIG, else the in-cluster service account.
func (c *Common) RESTConfig() (*rest.Config, error) {
	if c.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			return nil, err
		}
		// As ctrl.GetConfig does for $KUBECONFIG and in a pod: client-go's
		// default of 5 requests a second would queue the webhook's Events
		// (one goroutine each) and cap the controller below its rollout
		// rate; the API server's priority and fairness does the limiting.
		// Found by make soak.
		if cfg.QPS == 0 {
			cfg.QPS = -1
		}
		return cfg, nil
	}
	return ctrl.GetConfig()
}

type namedCheck struct {
	name  string
	check healthz.Checker
}

// addProbes installs liveness, which only says the process is alive (a
// dependency failing must not get the pod killed), and readiness, which says
// the process can decide correctly right now.
func (p *Process) addProbes(extra ...namedCheck) error {
	if err := p.Manager.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	checks := append([]namedCheck{
		{"not-draining", func(*http.Request) error {
			if p.draining.Load() {
				return errors.New("shutting down")
			}
			return nil
		}},
		{"informers-synced", p.cachesSynced},
	}, extra...)
	for _, c := range checks {
		if err := p.Manager.AddReadyzCheck(c.name, c.check); err != nil {
			return err
		}
	}
	return nil
}

func (p *Process) cachesSynced(req *http.Request) error {
	ctx, cancel := context.WithTimeout(req.Context(), time.Second)
	defer cancel()
	if !p.Manager.GetCache().WaitForCacheSync(ctx) {
		return errors.New("informer caches have not synced")
	}
	return nil
}

// Run serves until ctx is cancelled (SIGTERM), then reports not ready, keeps
// serving for the shutdown delay so endpoints drain, then, for a server the
// API server calls, until the API server has closed every connection it
// holds to it, and only then stops the manager, which lets in-flight
// requests finish. With no delay (nothing routes elsewhere, as in tests
// that run one replica) it stops at once.
func (p *Process) Run(ctx context.Context) error {
	mgrCtx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Manager.Start(mgrCtx) }()

	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log := ctrl.Log.WithName("shutdown")
	p.draining.Store(true)
	if p.server != nil {
		p.server.Drain()
	}
	log.Info("not ready any more; draining before stopping", "delay", p.delay)
	select {
	case err := <-done:
		return err
	case <-time.After(p.delay):
	}
	if p.server != nil && p.delay > 0 {
		// Each connection ends after its next answer or when the API
		// server closes it idle; closing one under the API server instead
		// loses the review it may be writing onto it at that instant.
		waitCtx, cancel := context.WithTimeout(context.Background(), p.server.DrainBound())
		defer cancel()
		waited := make(chan error, 1)
		go func() { waited <- p.server.WaitConnectionsClosed(waitCtx) }()
		select {
		case err := <-done:
			return err
		case err := <-waited:
			if err != nil {
				log.Info("stopping with connections open", "reason", err.Error())
			} else {
				log.Info("the API server closed every connection; stopping")
			}
		}
	}
	stop()
	return <-done
}
