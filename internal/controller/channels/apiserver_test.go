package channels_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// The channels controller against kube-apiserver and etcd alone (see
// framework.ControllerSuite): the channels it writes, keeps and deletes
// as the policy and the pods that mount them change. What a channel holds
// during a delivery is delivery.Want's, tested there and, with whole
// deliveries, in test/controllers.

var suite = framework.NewControllerSuite(manager.Controller{RolloutBatchWindow: 300 * time.Millisecond})

func TestAgainstAPIServer(t *testing.T) {
	suite.Run(t, "the channels controller against kube-apiserver and etcd")
}

var ctx = context.Background()

// channels lists what each channel of flags in ns holds, by wave.
func channels(ns string) func() map[string]string {
	return func() map[string]string {
		held, err := channel.List(ctx, suite.Env.Client, ns, "ConfigMap", "flags")
		Expect(err).NotTo(HaveOccurred())
		out := map[string]string{}
		for wave, h := range held {
			out[wave] = h.Content
		}
		return out
	}
}

// mounting is a running pod of wave that mounts flags' channel of it, as
// the Pod path points one.
func mounting(ns, name, wave string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{v1alpha1.ChannelWaveAnnotation: wave,
			v1alpha1.ChannelPlacedAnnotation: channel.PlacementSeal([]byte("test"), "request-"+name, ns, wave)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", VolumeMounts: []corev1.VolumeMount{{Name: "flags", MountPath: "/etc/flags"}}}},
			Volumes: []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: channel.Name("flags", wave)}}}}}},
	}
}

// policy reads the ConfigPolicy name, changes it and writes it back.
func updatePolicy(name string, change func(*v1alpha1.ConfigPolicySpec)) {
	var p v1alpha1.ConfigPolicy
	Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Name: name}, &p)).To(Succeed())
	change(&p.Spec)
	Expect(suite.Env.Client.Update(ctx, &p)).To(Succeed())
}

var _ = Describe("the channels controller", func() {
	It("writes a channel per wave, keeps one a pod mounts after its wave leaves the policy and deletes it once none does, and makes the mounted ones follow the config once delivery is off", func() {
		ns := suite.PolicyNamespace("channels-lifecycle", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled = true
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Percent: new(int32(10))}, {Name: "rest"}}}
		})
		flags := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags", Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}},
			Data: map[string]string{"discount": "10"}}
		suite.Create(flags)
		first := suite.SnapshotOf(flags)
		Eventually(channels(ns), 10*time.Second).Should(Equal(map[string]string{"canary": first, "rest": first}),
			"every wave gets a channel holding the content of now")
		var ch corev1.ConfigMap
		Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flags-ch-canary"}, &ch)).To(Succeed())
		Expect(ch.Data).To(Equal(flags.Data))
		Expect(ch.Annotations).To(HaveKeyWithValue(v1alpha1.ReloadAnnotation, v1alpha1.ReloadHot))

		By("the canary wave leaves the policy while a pod mounts its channel: kept, until the pod goes")
		pod := mounting(ns, "canary-pod", "canary")
		suite.Create(pod, mounting(ns, "rest-pod", "rest"))
		updatePolicy("channels-lifecycle", func(s *v1alpha1.ConfigPolicySpec) { s.Delivery.Waves = s.Delivery.Waves[1:] })
		Consistently(channels(ns), 2*time.Second).Should(HaveKey("canary"))
		Expect(suite.Env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(channels(ns), 10*time.Second).Should(Equal(map[string]string{"rest": first}))

		By("delivery turned off: the channel a pod mounts follows the config at once")
		updatePolicy("channels-lifecycle", func(s *v1alpha1.ConfigPolicySpec) { s.Delivery = nil })
		Expect(suite.Env.Client.Get(ctx, client.ObjectKeyFromObject(flags), flags)).To(Succeed())
		flags.Data["discount"] = "20"
		Expect(suite.Env.Client.Update(ctx, flags)).To(Succeed())
		Eventually(channels(ns), 10*time.Second).Should(Equal(map[string]string{"rest": suite.SnapshotOf(flags)}))
	})
})
