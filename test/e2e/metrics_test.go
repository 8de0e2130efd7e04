package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// counter sums a counter family in the process registry (the in-process
// webhook and controller register there, as they do on /metrics), over the
// series whose labels include the given ones.
func counter(name string, labels map[string]string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			// A series is a counter or a gauge; the other reads 0.
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

var _ = Describe("metrics", func() {
	It("count stamped hashes, rule decisions and rollouts", func() {
		ns := rulesNamespace()
		stamped := counter("configward_config_hash_stamped_total", map[string]string{"kind": "Deployment"})
		warned := counter("configward_policy_decisions_total", map[string]string{"rule": "secret-in-env", "action": "Warn"})
		rolled := counter("configward_rollouts_triggered_total", map[string]string{"kind": "Deployment"})

		apply(configMap(ns, "m-config", map[string]string{"k": "1"}, nil))
		apply(workloadYAML("Deployment", ns, "m", `containers:
- name: a
  image: app
  envFrom: [{configMapRef: {name: m-config}}, {secretRef: {name: db}}]
`))
		Expect(counter("configward_config_hash_stamped_total", map[string]string{"kind": "Deployment"})).To(Equal(stamped + 1))
		Expect(counter("configward_policy_decisions_total", map[string]string{"rule": "secret-in-env", "action": "Warn"})).To(Equal(warned + 1))

		schemaDenied := counter("configward_policy_decisions_total", map[string]string{"rule": "config-schema", "action": "Deny"})
		res := env.Kubectl(literalConfigMap(ns, "m-orphan", map[string]string{"k": "v"}, "  annotations: {configward.dev/schema: nowhere}\n"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(counter("configward_policy_decisions_total", map[string]string{"rule": "config-schema", "action": "Deny"})).To(Equal(schemaDenied + 1))

		apply(configMap(ns, "m-config", map[string]string{"k": "2"}, nil))
		Eventually(func() float64 {
			return counter("configward_rollouts_triggered_total", map[string]string{"kind": "Deployment"})
		}, 10*time.Second).Should(Equal(rolled+1), fmt.Sprintf("namespace %s", ns))
	})
})
