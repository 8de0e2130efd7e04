package manager

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// A process keeps deciding from its caches while the API server it watches
// through is unreachable (an upgrade, a control-plane node's restart): the
// cluster's other API servers still call the webhook, and a replica that
// turned unready then would take the webhook away from them too. Readiness
// therefore stays as it was; what the process knows about its API server is
// told here instead, in a gauge to alert on and in the log.
var (
	apiServerReachable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "configward_api_server_reachable",
		Help: "1 while the API server this process watches through answers its readiness endpoint, 0 while it does not (answers then come from caches that may be stale).",
	})
	apiServerLastContact = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "configward_api_server_last_contact_timestamp_seconds",
		Help: "When the API server this process watches through last answered (Unix time): how stale the caches may be.",
	})
)

func init() { metrics.Registry.MustRegister(apiServerReachable, apiServerLastContact) }

// apiServerProbeInterval is how often the API server is asked: one small
// request per interval and replica.
const apiServerProbeInterval = 5 * time.Second

// apiServerProbe asks the API server's /readyz (which every user may read)
// each interval and reports the answer.
type apiServerProbe struct {
	client rest.Interface
	every  time.Duration
	log    logr.Logger
}

// addAPIServerProbe runs the probe in mgr, on every replica.
func addAPIServerProbe(mgr ctrlmanager.Manager, cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	return mgr.Add(&apiServerProbe{client: dc.RESTClient(), every: apiServerProbeInterval, log: ctrl.Log.WithName("api-server")})
}

// NeedLeaderElection is false: every replica watches for itself.
func (p *apiServerProbe) NeedLeaderElection() bool { return false }

func (p *apiServerProbe) Start(ctx context.Context) error {
	reachable := true // as the caches' first sync found it
	var lost time.Time
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		rctx, cancel := context.WithTimeout(ctx, p.every)
		_, err := p.client.Get().AbsPath("/readyz").DoRaw(rctx)
		cancel()
		now := time.Now()
		switch {
		case err == nil:
			apiServerReachable.Set(1)
			apiServerLastContact.Set(float64(now.Unix()))
			if !reachable {
				p.log.Info("the API server answers again; the caches resync", "unreachableFor", now.Sub(lost).Round(time.Second).String())
			}
			reachable = true
		case ctx.Err() != nil:
			return nil
		default:
			apiServerReachable.Set(0)
			if reachable {
				lost = now
				p.log.Info("the API server does not answer; deciding from the caches as they were", "error", err.Error())
			}
			reachable = false
		}
	}
}
