package freshness

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	judgedStale = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "configward_view_stale_reviews_total",
		Help: "Reviews judged from a view that was not current, because the API server this replica watches through did not answer (an outage: nothing newer could be had).",
	})

	watchOpen = prometheus.NewDesc("configward_view_watch_open",
		"1 while the informers of a kind have an open watch on the API server, 0 while it is broken (the view of the kind is what it was when it broke).", []string{"kind"}, nil)
	lastEvent = prometheus.NewDesc("configward_view_last_event_timestamp_seconds",
		"When a watch of the kind last brought an event or a bookmark (Unix time; the API server sends a bookmark about every minute on a quiet watch).", []string{"kind"}, nil)
	staleFor = prometheus.NewDesc("configward_view_stale_seconds",
		"How long the view of the kind has not been current (no open watch, or one opened less than half a second ago); 0 while it is.", []string{"kind"}, nil)
)

// published is the process's Views, which the metrics read.
var published atomic.Pointer[Views]

// Publish makes v the Views the process's metrics show.
func Publish(v *Views) { published.Store(v) }

type collector struct{}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- watchOpen
	ch <- lastEvent
	ch <- staleFor
}

func (collector) Collect(ch chan<- prometheus.Metric) {
	v := published.Load()
	if v == nil {
		return
	}
	now := time.Now()
	for _, s := range v.States() {
		open, stale := 0.0, 0.0
		if s.Open {
			open = 1
		}
		if !s.Open || now.Before(s.Settled) {
			stale = now.Sub(s.Since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(watchOpen, prometheus.GaugeValue, open, s.Kind)
		ch <- prometheus.MustNewConstMetric(staleFor, prometheus.GaugeValue, stale, s.Kind)
		if !s.LastEvent.IsZero() {
			ch <- prometheus.MustNewConstMetric(lastEvent, prometheus.GaugeValue, float64(s.LastEvent.Unix()), s.Kind)
		}
	}
}

func init() { metrics.Registry.MustRegister(judgedStale, collector{}) }
