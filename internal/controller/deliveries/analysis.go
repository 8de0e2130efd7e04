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

// callWebhook measures one webhook check. Its call names the workloads
// and pods of the group it judges only.
func (d *deliveries) callWebhook(ctx context.Context, rec *v1alpha1.ConfigDelivery, c v1alpha1.AnalysisCheck, wave string, g delivery.Group) delivery.Measurement {
	m := delivery.Measurement{Check: c.Name}
	timeout := analysis.WebhookTimeout
	if c.Webhook.TimeoutSeconds > 0 {
		timeout = time.Duration(c.Webhook.TimeoutSeconds) * time.Second
	}
	call := analysis.Call{Delivery: rec.Name, Namespace: rec.Namespace, Config: analysis.Config{Kind: rec.Spec.Config.Kind, Name: rec.Spec.Config.Name},
		Check: c.Name, Wave: wave, Workloads: targets(g.Targets), Pods: g.Pods}
	hook := analysis.Webhook{URL: c.Webhook.URL, CABundle: c.Webhook.CABundle, Reach: d.reach(nil)}
	var err error
	if ref := c.Webhook.SecretRef; ref != nil {
		var s *corev1.Secret
		if s, hook.Reach, err = d.credentials(ctx, ref.Name, "webhook"); err == nil {
			hook.Token = string(s.Data["token"])
		}
	}
	var answer analysis.Answer
	if err == nil {
		answer, err = analysis.CallWebhook(ctx, hook, call, timeout, analysis.WebhookAttempts)
	}
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
	address := d.opts.Prometheus.Address
	if p := rec.Spec.Settings.Analysis.Prometheus; p != nil {
		address = p.Address
		var creds analysis.Credentials
		reach := d.reach(nil)
		if p.SecretRef != nil {
			s, r, err := d.credentials(ctx, p.SecretRef.Name, "Prometheus")
			if err != nil {
				return nil, err
			}
			creds, reach = credentialsOf(s), r
		}
		return analysis.NewPrometheus(address, creds, queryTimeout, reach)
	}
	if address == "" {
		return nil, errors.New("no Prometheus: the policy's spec.delivery.analysis.prometheus and the chart's analysis.prometheus.address are both unset")
	}
	// The chart's Secret goes to the chart's address, which the same
	// person chose: it needs no list of its own.
	var creds analysis.Credentials
	if name := d.opts.Prometheus.Secret; name != "" {
		s, err := d.labelledSecret(ctx, name, "Prometheus")
		if err != nil {
			return nil, err
		}
		creds = credentialsOf(s)
	}
	return analysis.NewPrometheus(address, creds, queryTimeout, d.reach(nil))
}

func credentialsOf(s *corev1.Secret) analysis.Credentials {
	return analysis.Credentials{Token: string(s.Data["token"]), Username: string(s.Data["username"]), Password: string(s.Data["password"]), CA: s.Data["ca.crt"]}
}

// credentials reads the Secret a policy names for a check's credentials,
// and where they may go: the Secret's own list of addresses, which its
// owner writes beside the label, and the chart's. A policy's author picks
// the address; without the Secret's list, whoever may write a ConfigPolicy
// could send the platform's Prometheus token to a server of theirs.
func (d *deliveries) credentials(ctx context.Context, name, what string) (*corev1.Secret, analysis.Reach, error) {
	s, err := d.labelledSecret(ctx, name, what)
	if err != nil {
		return nil, nil, err
	}
	list, ok := s.Annotations[v1alpha1.AnalysisAddressesAnnotation]
	if !ok {
		return nil, nil, fmt.Errorf("the Secret %s/%s names no addresses its credentials may be sent to (annotation %s): configward sends them nowhere until its owner says where",
			d.opts.Namespace, name, v1alpha1.AnalysisAddressesAnnotation)
	}
	own, err := analysis.ParseAddresses(fmt.Sprintf("the Secret %s/%s's %s", d.opts.Namespace, name, v1alpha1.AnalysisAddressesAnnotation), list)
	if err != nil {
		return nil, nil, err
	}
	return s, d.reach(&own), nil
}

// labelledSecret reads a Secret of configward's namespace that its owner
// labelled for analysis; its values are never kept or logged.
func (d *deliveries) labelledSecret(ctx context.Context, name, what string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := d.opts.Secrets.Get(ctx, types.NamespacedName{Namespace: d.opts.Namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("reading the %s credentials, Secret %s/%s: %w", what, d.opts.Namespace, name, err)
	}
	if s.Labels[v1alpha1.AnalysisCredentialsLabel] != "true" {
		return nil, fmt.Errorf("the Secret %s/%s is not labelled %s=true: configward sends no Secret's values to a %s unless its owner labelled it for that",
			d.opts.Namespace, name, v1alpha1.AnalysisCredentialsLabel, what)
	}
	return &s, nil
}

// reach is every list a check's connections must be on: the chart's,
// and a Secret's own when its credentials go along.
func (d *deliveries) reach(own *analysis.Addresses) analysis.Reach {
	var r analysis.Reach
	if d.opts.AllowedAddresses != nil {
		r = append(r, *d.opts.AllowedAddresses)
	}
	if own != nil {
		r = append(r, *own)
	}
	return r
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
