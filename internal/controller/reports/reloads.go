package reports

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/workload"
)

// What pods made of hot config: for each top-level workload that mounts
// hot ConfigMaps or Secrets as volumes, its pods' reload conditions
// (written by the webhook from their agents' reports) are judged against
// each config's content now. The Report gets a config-reload result per
// config and the gauge counts pods by state.

var reloadPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configward_reload_pods",
	Help: "Running pods that mount hot config, per hot config they mount, by namespace and state: applied, unconfirmed (the program was told; nothing checks), rejected (its program refused the current content), older (other than the current content), pending (the agent has not reported), no-agent.",
}, []string{"namespace", "state"})

func init() { metrics.Registry.MustRegister(reloadPods) }

// reloads judges the hot config of every workload of ns (objs) on its live
// pods, publishes the gauge, and returns the Reports' results.
func (d *driftController) reloads(ctx context.Context, ns string, objs []workload.Object, live map[types.UID][]*corev1.Pod) ([]subjectResults, error) {
	key := d.opts.Keys.Current().Bytes()
	total := map[reload.PodState]int{}
	var out []subjectResults
	for _, w := range objs {
		spec, err := w.PodSpec()
		if err != nil || spec == nil {
			continue
		}
		hot, err := d.inv.HotMounts(ctx, ns, spec)
		if err != nil || len(hot) == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		gvk := w.Type.Kind.GroupVersionKind()
		r := subjectResults{subject: report.Subject(gvk.GroupVersion().String(), gvk.Kind, ns, w.Obj.GetName(), w.Obj.GetUID())}
		for _, m := range hot {
			content := reload.ContentID(key, ns, string(m.Ref.Kind), m.Ref.Name, m.Object.KeyDigests)
			t := reload.Count(live[w.Obj.GetUID()], m.Config(), content)
			for s, n := range t.Pods {
				total[s] += n
			}
			r.results = append(r.results, report.ReloadResult(m.Config(), content, t))
		}
		out = append(out, r)
	}
	for _, s := range reload.States {
		if len(out) == 0 {
			reloadPods.DeleteLabelValues(ns, string(s))
		} else {
			reloadPods.WithLabelValues(ns, string(s)).Set(float64(total[s]))
		}
	}
	return out, nil
}
