package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var _ = Describe("without the Secrets Store CSI driver", func() {
	It("starts, says so, and rolls a workload that mounts a SecretProviderClass when its ConfigMap changes", func() {
		By("the gauge the operations guide names says CSI-mounted secrets are not followed")
		Expect(gaugeValue("configward_csi_secrets_available")).To(Equal(0.0))

		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		d := deployment(ns, "web", "cfg")
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "db-creds"}}}}}
		d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets"}}
		create(cm, d)
		setValue(cm, "port: 81")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
	})
})

// gaugeValue reads an unlabelled gauge from the registry the suite's
// controller, which runs in this process, publishes.
func gaugeValue(name string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	Fail(name + " is not published")
	return 0
}
