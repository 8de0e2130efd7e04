package deliveries

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/analysis"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
)

// A wave's checks are measured here, the I/O of delivery.Due's checks:
// each query is rendered for the wave's pods and workloads (and, with
// compareTo: rest, once more for the consumers the delivery has not reached
// yet) and sent to the Prometheus-compatible API of the policy or the
// chart; each webhook is called with the wave. What a measurement decides
// is delivery.Next's.

var checkMeasurements = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "configward_delivery_check_measurements_total",
	Help: "Measurements of delivery checks by kind (query, webhook) and result (Passed, Failed, NoData, Error); a query check with compareTo: rest sends two queries per measurement.",
}, []string{"kind", "result"})

func init() { metrics.Registry.MustRegister(checkMeasurements) }

// PrometheusDefault is the Prometheus the chart names, for policies whose
// analysis names none.
type PrometheusDefault struct {
	// Address of its API; "" when the chart names none.
	Address string
	// Secret with its credentials, in Namespace ("" for none).
	Secret string
}

// queryTimeout bounds one query.
const queryTimeout = 10 * time.Second

// measure takes the checks due for rec at the look at now, over the
// groups it saw (which delivery.Looked chose by the same checks due).
func (d *deliveries) measure(ctx context.Context, rec *v1alpha1.ConfigDelivery, seen delivery.Seen, now time.Time) ([]delivery.Measurement, error) {
	due, bake := delivery.Due(rec, now)
	if len(due) == 0 {
		return nil, nil
	}
	wave, rest := delivery.Groups(rec, seen, bake)
	waveName := rec.Status.CurrentWave
	if bake {
		waveName = delivery.BakeWave
	}
	vars := func(g delivery.Group, name string) analysis.Vars {
		return analysis.Vars{Namespace: rec.Namespace, Config: rec.Spec.Config.Name, Kind: rec.Spec.Config.Kind, Delivery: rec.Name,
			Wave: waveName, Group: name, Pods: g.Pods, Workloads: g.Workloads}
	}
	var prom *analysis.Prometheus
	var promErr error
	promRead := false
	var out []delivery.Measurement
	for _, c := range due {
		if c.Webhook != nil {
			out = append(out, d.callWebhook(ctx, rec, c, waveName, wave))
			continue
		}
		if !promRead {
			prom, promErr = d.prometheus(ctx, rec)
			promRead = true
		}
		m := delivery.Measurement{Check: c.Name}
		if promErr != nil {
			m.Result, m.Message = delivery.ResultError, promErr.Error()
		} else {
			m = queryCheck(ctx, prom, c, vars(wave, "wave"), len(wave.Pods) > 0, vars(rest, "rest"), len(rest.Pods) > 0)
		}
		checkMeasurements.WithLabelValues("query", m.Result).Inc()
		out = append(out, m)
	}
	return out, nil
}

// queryCheck measures one query check over the wave and, with compareTo:
// rest, over the rest.
func queryCheck(ctx context.Context, prom *analysis.Prometheus, c v1alpha1.AnalysisCheck, wave analysis.Vars, wavePods bool, rest analysis.Vars, restPods bool) delivery.Measurement {
	m := delivery.Measurement{Check: c.Name}
	if !wavePods {
		m.Result, m.Message = delivery.ResultNoData, "the group measured has no pod"
		return m
	}
	now := time.Now()
	value, err := query(ctx, prom, c.Query, wave, now)
	switch {
	case err != nil:
		m.Result, m.Message = delivery.ResultError, err.Error()
		return m
	case value == nil:
		m.Result, m.Message = delivery.ResultNoData, "the query returned no data"
		return m
	}
	m.Value = format(*value)
	bounds := analysis.Bounds{Max: c.Max, Min: c.Min}
	if c.Tolerance != nil {
		bounds.Tolerance = *c.Tolerance
	}
	var control *float64
	note := ""
	if c.CompareTo == v1alpha1.CompareToRest {
		switch {
		case !restPods:
			note = " (no consumer left to compare with: the bounds apply as they are)"
		default:
			// The same instant, so both groups are measured over the
			// same window.
			control, err = query(ctx, prom, c.Query, rest, now)
			switch {
			case err != nil:
				m.Result, m.Message = delivery.ResultError, "the rest: "+err.Error()
				return m
			case control == nil:
				note = " (the rest has no data: the bounds apply as they are)"
			default:
				m.Control = format(*control)
			}
		}
	}
	pass, why := analysis.Judge(bounds, *value, control)
	m.Result, m.Message = delivery.ResultFailed, why+note
	if pass {
		m.Result = delivery.ResultPassed
	}
	return m
}

// query renders and runs one query; nil without data.
func query(ctx context.Context, prom *analysis.Prometheus, q string, v analysis.Vars, at time.Time) (*float64, error) {
	rendered, err := analysis.Render(q, v)
	if err != nil {
		return nil, err
	}
	res, err := prom.Query(ctx, rendered, at)
	if err != nil || res.NoData {
		return nil, err
	}
	return &res.Value, nil
}

func format(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// callWebhook measures one webhook check.
func (d *deliveries) callWebhook(ctx context.Context, rec *v1alpha1.ConfigDelivery, c v1alpha1.AnalysisCheck, wave string, g delivery.Group) delivery.Measurement {
	m := delivery.Measurement{Check: c.Name}
	timeout := analysis.WebhookTimeout
	if c.Webhook.TimeoutSeconds > 0 {
		timeout = time.Duration(c.Webhook.TimeoutSeconds) * time.Second
	}
	call := analysis.Call{Delivery: rec.Name, Namespace: rec.Namespace, Config: analysis.Config{Kind: rec.Spec.Config.Kind, Name: rec.Spec.Config.Name},
		Check: c.Name, Wave: wave, Workloads: targets(g.Targets), Pods: g.Pods}
	answer, err := analysis.CallWebhook(ctx, c.Webhook.URL, c.Webhook.CABundle, call, timeout, analysis.WebhookAttempts)
	switch {
	case err != nil:
		m.Result, m.Message = delivery.ResultError, err.Error()
	case answer.Pass:
		m.Result, m.Message = delivery.ResultPassed, "passed: "+answer.Message
	default:
		m.Result, m.Message = delivery.ResultFailed, "failed: "+answer.Message
	}
	checkMeasurements.WithLabelValues("webhook", m.Result).Inc()
	return m
}

// prometheus is the API rec's checks ask: the policy's, else the chart's,
// with the credentials of the Secret named, read from configward's own
// namespace only and never kept.
func (d *deliveries) prometheus(ctx context.Context, rec *v1alpha1.ConfigDelivery) (*analysis.Prometheus, error) {
	address, secret := d.opts.Prometheus.Address, d.opts.Prometheus.Secret
	if p := rec.Spec.Settings.Analysis.Prometheus; p != nil {
		address, secret = p.Address, ""
		if p.SecretRef != nil {
			secret = p.SecretRef.Name
		}
	}
	if address == "" {
		return nil, errors.New("no Prometheus: the policy's spec.delivery.analysis.prometheus and the chart's analysis.prometheus.address are both unset")
	}
	var creds analysis.Credentials
	if secret != "" {
		var s corev1.Secret
		if err := d.opts.Secrets.Get(ctx, types.NamespacedName{Namespace: d.opts.Namespace, Name: secret}, &s); err != nil {
			return nil, fmt.Errorf("reading the Prometheus credentials, Secret %s/%s: %w", d.opts.Namespace, secret, err)
		}
		if s.Labels[v1alpha1.AnalysisCredentialsLabel] != "true" {
			return nil, fmt.Errorf("the Secret %s/%s is not labelled %s=true: configward sends no Secret's values to a Prometheus unless its owner labelled it for that",
				d.opts.Namespace, secret, v1alpha1.AnalysisCredentialsLabel)
		}
		creds = analysis.Credentials{Token: string(s.Data["token"]), Username: string(s.Data["username"]), Password: string(s.Data["password"]), CA: s.Data["ca.crt"]}
	}
	return analysis.NewPrometheus(address, creds, queryTimeout)
}

// targets are the workloads of a group as a webhook check's call names
// them.
func targets(ts []v1alpha1.DeliveryTarget) []analysis.Target {
	out := make([]analysis.Target, len(ts))
	for i, t := range ts {
		out[i] = analysis.Target{Kind: t.Kind, Name: t.Name}
	}
	return out
}
