package deliveries

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
)

// Where deliveries and sets stand is counted at each scrape from the
// controller's cache, so a gauge never lags its object nor outlives it
// (a deleted record or set leaves no series behind). Every replica counts
// the same cache, the standby too: alerts take the max.
var (
	deliveriesByState = prometheus.NewDesc("configward_deliveries",
		"ConfigDeliveries by namespace and state: Pending (not placed yet), Progressing, WaitingForApproval, Halted (a person is to resume or cancel it), and the kept finished ones, Succeeded, Superseded, Cancelled.",
		[]string{"namespace", "state"}, nil)
	setsByCondition = prometheus.NewDesc("configward_config_sets",
		"ConfigSets by namespace and the condition true of them: Ready (its version is delivered, or nothing is to deliver), Reconciling (waiting for members or being delivered), Stalled (timed out, claimed, halted, or its members cannot move together).",
		[]string{"namespace", "condition"}, nil)
)

// counted is the cache the collector reads: the last controller set up in
// this process (tests start several, one after another).
var counted atomic.Pointer[client.Reader]

type standingCollector struct{}

func (standingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- deliveriesByState
	ch <- setsByCondition
}

func (standingCollector) Collect(ch chan<- prometheus.Metric) {
	r := counted.Load()
	if r == nil {
		return
	}
	// The cache answers from memory; the bound only guards a scrape from a
	// cache that has not synced.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	log := ctrl.Log.WithName("delivery-metrics")
	var recs v1alpha1.ConfigDeliveryList
	if err := (*r).List(ctx, &recs); err != nil {
		log.Error(err, "counting ConfigDeliveries for configward_deliveries")
	} else {
		n := map[[2]string]int{}
		for i := range recs.Items {
			state := string(recs.Items[i].Status.State)
			if state == "" {
				state = "Pending"
			}
			n[[2]string{recs.Items[i].Namespace, state}]++
		}
		for k, v := range n {
			ch <- prometheus.MustNewConstMetric(deliveriesByState, prometheus.GaugeValue, float64(v), k[0], k[1])
		}
	}
	var sets v1alpha1.ConfigSetList
	if err := (*r).List(ctx, &sets); err != nil {
		log.Error(err, "counting ConfigSets for configward_config_sets")
		return
	}
	n := map[[2]string]int{}
	for i := range sets.Items {
		s := &sets.Items[i]
		n[[2]string{s.Namespace, delivery.Standing(s.Status.Conditions, s.Generation)}]++
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(setsByCondition, prometheus.GaugeValue, float64(v), k[0], k[1])
	}
}

func init() { metrics.Registry.MustRegister(standingCollector{}) }
