package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

// The set spec's ConfigMap and Secret: one settings each, which must match.
const pairConfigMap, pairSecret, pairApp = "pair-settings", "pair-token", "pair"

// A ConfigMap and a Secret that must match, hot, delivered as one change
// set through two waves to a program that mounts them as two volumes and
// reads both at each reload. The kubelet swaps each volume on its own
// (each from its own cache, at its own sync); the reload agent asks
// configward before each reload whether the pod's disk holds one set, so
// the program never reads a mix.
var _ = Describe("a hot ConfigMap and Secret of one set, mounted as two volumes, on the real node", Ordered, ContinueOnFailure, func() {
	ctx := context.Background()
	var ns string
	cm, secret := &corev1.ConfigMap{}, &corev1.Secret{}

	BeforeAll(func() {
		ns = namespace(nil)
		deliveryPolicy("node-hot-set-"+ns, ns, v1alpha1.ConfigPolicySpec{
			Revisions: v1alpha1.RevisionSettings{Enabled: true, Secrets: true},
			// Changes a minute apart, several: not a writer that flaps.
			Rollouts: v1alpha1.RolloutSettings{Flapping: &v1alpha1.FlappingSettings{Changes: 20, Window: metav1.Duration{Duration: 10 * time.Minute}}},
			Delivery: &v1alpha1.DeliverySettings{
				Waves: []v1alpha1.Wave{
					{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pairApp}}, PodPercent: new(int32(50))},
					{Name: "rest"},
				},
				ProgressDeadlineSeconds: 120, SoakSeconds: new(int32(1)), PropagationSeconds: new(int32(30)), OnFailure: v1alpha1.FailureHalt,
			},
		})
		hot := func(name string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}}
		}
		*cm = corev1.ConfigMap{ObjectMeta: hot(pairConfigMap), Data: map[string]string{"settings": "level=alpha"}}
		*secret = corev1.Secret{ObjectMeta: hot(pairSecret), Data: map[string][]byte{"settings": []byte("level=alpha")}}
		Expect(env.Client.Create(ctx, cm)).To(Succeed())
		Expect(env.Client.Create(ctx, secret)).To(Succeed())
		awaitHot(ns, pairConfigMap)
		awaitHotVolume(ns, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: pairSecret}})
		Expect(env.Client.Create(ctx, pairDeployment(ns))).To(Succeed())
		Eventually(func() []corev1.PodPhase {
			var phases []corev1.PodPhase
			for _, p := range livePods(ns, pairApp) {
				phases = append(phases, p.Status.Phase)
			}
			return phases
		}, 3*time.Minute, 250*time.Millisecond).Should(And(HaveLen(2), HaveEach(corev1.PodRunning)), func() string {
			return agentLogs(ns) + "\n" + env.Kubectl("", "get", "events", "-n", ns).Stdout
		})
		waves := map[string]int{}
		for _, p := range livePods(ns, pairApp) {
			Expect(reload.HasAgent(&p)).To(BeTrue(), p.Name)
			waves[p.Annotations[v1alpha1.ChannelWaveAnnotation]]++
		}
		Expect(waves).To(Equal(map[string]int{"canary": 1, "rest": 1}))
	})

	It("never reloads the program on a mix through changes of both, and every pod applies each set whole, without a restart", func() {
		words := []string{"bravo", "charlie", "delta", "echo", "foxtrot", "golf"}
		var took []string
		for _, word := range words {
			settings := "level=" + word
			cm.Data["settings"] = settings
			secret.Data["settings"] = []byte(settings)
			written := time.Now()
			Expect(env.Client.Update(ctx, cm)).To(Succeed())
			Expect(env.Client.Update(ctx, secret)).To(Succeed())
			for _, p := range livePods(ns, pairApp) {
				Eventually(appliedLevel(&p), 2*time.Minute, 250*time.Millisecond).Should(Equal(settings), func() string {
					return p.Name + agentLogs(ns) + "\n" + env.Kubectl("", "get", "configdeliveries,configmaps,secrets", "-n", ns,
						"-o", "custom-columns=NAME:.metadata.name,STATE:.status.state,WAVE:.status.currentWave,MESSAGE:.status.message,SET:.metadata.annotations.configward\\.dev/channel-set").Stdout +
						controllerSays(ns)
				})
				Expect(output(&p)()).NotTo(ContainElement(HavePrefix("mixed ")), "the program of %s read a mix", p.Name)
				entries := reload.EntriesOf(podNamed(ns, p.Name))
				set := entries["ConfigMap/"+pairConfigMap].Set
				Expect(set).NotTo(BeEmpty(), "the agent reports the set it applied: %+v", entries)
				Expect(entries["Secret/"+pairSecret].Set).To(Equal(set), "both members applied as one set")
			}
			took = append(took, time.Since(written).Round(100*time.Millisecond).String())
		}
		By("one delivery per change, of both")
		var recs v1alpha1.ConfigDeliveryList
		Expect(env.Client.List(ctx, &recs, client.InNamespace(ns))).To(Succeed())
		sets := 0
		for _, r := range recs.Items {
			Expect(r.Spec.Members).To(Or(BeEmpty(), HaveLen(2)), r.Name)
			if len(r.Spec.Members) == 2 {
				sets++
			}
		}
		Expect(sets).To(Equal(len(words)), "one change set per change")
		By("the program never read a mix, and never restarted")
		waits := 0
		for _, p := range livePods(ns, pairApp) {
			Expect(output(&p)()).NotTo(ContainElement(HavePrefix("mixed ")), p.Name)
			mixes, err := framework.MetricSum("http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/metrics", "reloadapp_mixed_reloads_total")
			Expect(err).NotTo(HaveOccurred())
			Expect(mixes).To(BeZero(), p.Name)
			code, body := programSays(&p)
			Expect([]any{code, body}).To(Equal([]any{http.StatusOK, "level=golf"}))
			neverRestarted(&p)
			lines, err := node.ContainerOutput(&p, reload.AgentContainer)
			Expect(err).NotTo(HaveOccurred())
			for _, l := range lines {
				if strings.Contains(l, "do not hold one set yet") {
					waits++
				}
			}
		}
		AddReportEntry("hot set", fmt.Sprintf("kubelet sync 5s: %d changes of a ConfigMap and a Secret delivered as one set through two waves, each applied by both pods after %s; the agents held a reload %d times for a member not yet swapped in",
			len(words), strings.Join(took, ", "), waits))
	})
})

// pairDeployment runs reloadapp on the set's ConfigMap and Secret, mounted
// as two volumes, with the reload agent calling its reload endpoint.
func pairDeployment(ns string) *appsv1.Deployment {
	d := reloadDeployment(ns, reloadMode{name: pairApp, trigger: "http://localhost:8080/-/reload", replicas: 2})
	d.Labels = map[string]string{"app": pairApp} // the canary's selector picks the workload
	spec := &d.Spec.Template.Spec
	spec.Volumes = []corev1.Volume{
		{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: pairConfigMap}}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: pairSecret}}},
	}
	app := &spec.Containers[0]
	app.Args = append(app.Args, "-also", "/config/token")
	app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: "token", MountPath: "/config/token"})
	return d
}

// controllerSays is what configward's controllers logged about ns, last.
func controllerSays(ns string) string {
	var b strings.Builder
	for _, p := range releasePods("controller") {
		lines, err := node.ContainerOutput(&p, p.Spec.Containers[0].Name)
		if err != nil {
			continue
		}
		var about []string
		for _, l := range lines {
			if strings.Contains(l, ns) {
				about = append(about, l)
			}
		}
		fmt.Fprintf(&b, "--- %s, about %s:\n%s\n", p.Name, ns, strings.Join(about[max(0, len(about)-60):], "\n"))
	}
	return b.String()
}
