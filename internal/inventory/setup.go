package inventory

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/workload"
)

// Start registers the informers the inventory reads, so they start and sync
// with the manager's cache (and count for readiness) instead of lazily on the
// first request. The informers of consumerKinds (kinds of reg) are
// registered too, with the consumer index, so Consumers can answer for
// those kinds.
//
// A declared kind whose CRD is not served now is logged and left out (see
// Inventory.WatchedKinds): one missing CRD must not take down the webhook
// or controller for every other kind. Serving it later needs a restart.
func Start(ctx context.Context, c cache.Cache, reg *workload.Registry, consumerKinds []workload.Kind) (*Inventory, error) {
	inv := Over(c, reg, nil)
	inv.snapshots = &snapshotIndex{}
	for _, kind := range ContentKinds() {
		o := NewObject(kind)
		informer, err := c.GetInformer(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("starting informer for %T: %w", o, err)
		}
		if err := inv.snapshots.watch(informer, kind); err != nil {
			return nil, err
		}
	}
	inv.classes = watchClasses(ctx, c)
	for _, k := range consumerKinds {
		t, ok := reg.Type(k.GroupKind())
		if !ok {
			return nil, fmt.Errorf("%s is not a workload kind", k.GroupKind())
		}
		err := startKind(ctx, c, reg, t)
		if err != nil && t.Custom() {
			kindAvailable.WithLabelValues(k.GroupKind().String()).Set(0)
			ctrl.Log.WithName("inventory").Error(err, "cannot watch a declared workload kind: check that the API server serves its group, version and resource "+
				"(kubectl api-resources --api-group=<group>). Until a restart after that, the controller does not roll it and deletes of config it uses "+
				"are not checked against it; the webhook still stamps and judges it once served",
				"kind", k.GroupKind().String(), "version", k.Version, "resource", k.Resource)
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.Custom() {
			kindAvailable.WithLabelValues(k.GroupKind().String()).Set(1)
		}
		inv.kinds = append(inv.kinds, k)
	}
	return inv, nil
}

// startKind indexes one workload kind and registers its informer. For a
// kind whose resource the API server does not serve, indexing fails
// before any informer is registered, so nothing is left behind.
func startKind(ctx context.Context, c cache.Cache, reg *workload.Registry, t *workload.Type) error {
	if err := indexConsumers(ctx, c, reg, t.Kind); err != nil {
		return err
	}
	if _, err := c.GetInformer(ctx, t.New()); err != nil {
		return fmt.Errorf("starting informer for %s: %w", t.GroupKind(), err)
	}
	return nil
}

// watchClasses registers the SecretProviderClass informer where the
// Secrets Store CSI driver's CRDs are served. Where they are not, configward
// starts without it and says so: CSI volumes are then judged as mounting a
// class nothing is known of (never missing), and their rotations are not
// followed until a restart after the driver is installed.
func watchClasses(ctx context.Context, c cache.Cache) bool {
	_, err := c.GetInformer(ctx, ClassMetadata())
	if err != nil {
		csiAvailable.Set(0)
		ctrl.Log.WithName("inventory").Info("the Secrets Store CSI driver's SecretProviderClass is not served: CSI-mounted secrets are not checked "+
			"and their rotations roll nothing until configward is restarted after the driver is installed", "reason", err.Error())
		return false
	}
	csiAvailable.Set(1)
	return true
}

var csiAvailable = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "configward_csi_secrets_available",
	Help: "1 when the Secrets Store CSI driver's SecretProviderClass was served at start and configward follows CSI-mounted secrets, 0 when it was not (configward then ignores them until restarted).",
})

var kindAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configward_workload_kind_available",
	Help: "1 when a declared custom workload kind is served by the API server and watched, 0 when its CRD was not served at start (configward then ignores it until restarted).",
}, []string{"kind"})

func init() { metrics.Registry.MustRegister(kindAvailable, csiAvailable) }
