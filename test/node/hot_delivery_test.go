package node

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

// hotWaveApps are the three Deployments of the hot delivery spec, two pods
// each; the canary wave takes one pod of the first.
var hotWaveApps = []string{"hot-a", "hot-b", "hot-c"}

// settingsFile is where the reader container of each pod sees the key
// reloadapp reads.
const settingsFile = "/config/settings/" + settingsKey

// Hot config in waves on the real node: configward's chart points each
// pod's hot ConfigMap at its wave's channel, the kubelet delivers each
// channel's content, the reload agents make reloadapp reload it and report
// what it made of it, and those reports gate the waves.
var _ = Describe("hot config in waves, with the reload agent and a real program on the real node", Ordered, ContinueOnFailure, func() {
	ctx := context.Background()
	var ns string
	cm := &corev1.ConfigMap{}
	var canary string // the name of the canary pod

	BeforeAll(func() {
		ns = namespace(nil)
		deliveryPolicy("node-hot-waves-"+ns, ns, v1alpha1.ConfigPolicySpec{
			Revisions: v1alpha1.RevisionSettings{Enabled: true},
			Delivery: &v1alpha1.DeliverySettings{
				Waves: []v1alpha1.Wave{
					{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "hot-a"}}, PodPercent: new(int32(50))},
					{Name: "rest", Approval: true},
				},
				ProgressDeadlineSeconds: 120, SoakSeconds: new(int32(2)), PropagationSeconds: new(int32(30)), OnFailure: v1alpha1.FailureRollback,
			},
		})
		*cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: settingsConfigMap,
			Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}}, Data: map[string]string{settingsKey: "level=info"}}
		Expect(env.Client.Create(ctx, cm)).To(Succeed())
		awaitHot(ns, settingsConfigMap)
		Eventually(channelLevels(ns), 30*time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"canary": "level=info", "rest": "level=info"}))
		for _, app := range hotWaveApps {
			d := reloadDeployment(ns, reloadMode{name: app, trigger: "http://localhost:8080/-/reload", replicas: 2})
			d.Labels = map[string]string{"app": app}
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{
				Name: "reader", Image: framework.AppImage, ImagePullPolicy: corev1.PullNever, Args: []string{settingsFile},
				VolumeMounts: []corev1.VolumeMount{{Name: "settings", MountPath: "/config/settings"}},
			})
			Expect(env.Client.Create(ctx, d)).To(Succeed())
		}
		Eventually(func() []corev1.PodPhase {
			var phases []corev1.PodPhase
			for _, p := range hotPods(ns) {
				phases = append(phases, p.Status.Phase)
			}
			return phases
		}, 3*time.Minute, 250*time.Millisecond).Should(And(HaveLen(6), HaveEach(corev1.PodRunning)), func() string { return agentLogs(ns) })
		placed := map[string][]string{}
		for _, p := range hotPods(ns) {
			Expect(reload.HasAgent(&p)).To(BeTrue(), p.Name)
			ch := p.Spec.Volumes[0].ConfigMap.Name
			placed[ch] = append(placed[ch], p.Name)
			if ch == "settings-ch-canary" {
				Expect(p.Labels["app"]).To(Equal("hot-a"))
				canary = p.Name
			}
		}
		Expect(placed).To(And(HaveKeyWithValue("settings-ch-canary", HaveLen(1)), HaveKeyWithValue("settings-ch-rest", HaveLen(5))), "one pod of hot-a in the canary")
		By("every agent reports the content its pod started on, as the original's")
		for _, p := range hotPods(ns) {
			Eventually(func() string {
				return reload.EntriesOf(podNamed(ns, p.Name))["ConfigMap/"+settingsConfigMap].Content
			}, time.Minute, 250*time.Millisecond).ShouldNot(BeEmpty(), agentLogs(ns))
			Expect(lastRead(&p)).To(Equal("level=info"))
		}
	})

	It("delivers a good change to the canary pod while the other five read the old bytes, then to every pod; no container restarts", func() {
		cm.Data[settingsKey] = "level=debug"
		written := time.Now()
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		canaryPod := podNamed(ns, canary)
		Eventually(appliedLevel(canaryPod), 2*time.Minute, 250*time.Millisecond).Should(Equal("level=debug"), agentLogs(ns))
		toCanary := time.Since(written)
		Eventually(latestHotDelivery(ns), time.Minute, 250*time.Millisecond).Should(Equal("WaitingForApproval@rest"))
		code, body := programSays(canaryPod)
		Expect([]any{code, body}).To(Equal([]any{http.StatusOK, "level=debug"}))
		Expect(lastRead(canaryPod)).To(Equal("level=debug"), "the canary pod reads the new bytes")
		By("the five others, read from inside, past two kubelet syncs: the old bytes")
		time.Sleep(12 * time.Second)
		for _, p := range hotPods(ns) {
			if p.Name == canary {
				continue
			}
			Expect(readerSaw(&p)).NotTo(ContainElement("level=debug"), p.Name)
			Expect(lastRead(&p)).To(Equal("level=info"), p.Name)
			code, body := programSays(&p)
			Expect([]any{code, body}).To(Equal([]any{http.StatusOK, "level=info"}), p.Name)
		}
		res := env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/"+settingsConfigMap)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		promoted := time.Now()
		for _, p := range hotPods(ns) {
			Eventually(appliedLevel(&p), 2*time.Minute, 250*time.Millisecond).Should(Equal("level=debug"), p.Name)
		}
		toLast := time.Since(promoted)
		Eventually(latestHotDelivery(ns), time.Minute, 250*time.Millisecond).Should(Equal("Succeeded@rest"))
		for _, p := range hotPods(ns) {
			Expect(lastRead(&p)).To(Equal("level=debug"), p.Name)
			neverRestarted(&p)
		}
		AddReportEntry("hot waves", fmt.Sprintf("kubelet sync 5s: the canary pod applied the change %s after the write; the last wave's five pods %s after the promote",
			toCanary.Round(100*time.Millisecond), toLast.Round(100*time.Millisecond)))
	})

	It("halts a change the canary's program rejects, the others never see it, and the rollback brings the canary's old content back without a restart", func() {
		cm.Data[settingsKey] = "verbose"
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(latestHotDelivery(ns), 2*time.Minute, 250*time.Millisecond).Should(Equal("Halted@canary"), agentLogs(ns))
		var recs v1alpha1.ConfigDeliveryList
		Expect(env.Client.List(ctx, &recs, client.InNamespace(ns))).To(Succeed())
		latest := slices.MaxFunc(recs.Items, func(a, b v1alpha1.ConfigDelivery) int { return int(a.Spec.Sequence - b.Spec.Sequence) })
		Expect(latest.Status.Reason).To(Equal("WaveFailed"))
		Expect(latest.Status.Message).To(And(ContainSubstring(canary), ContainSubstring("rejected")))
		Expect(latest.Status.RolledBack).To(BeTrue())

		By("rolled back: the canary reads and applies the old content again")
		canaryPod := podNamed(ns, canary)
		Eventually(func() []any { c, b := programSays(canaryPod); return []any{c, b} }, 2*time.Minute, 250*time.Millisecond).
			Should(Equal([]any{http.StatusOK, "level=debug"}))
		Eventually(appliedLevel(canaryPod), time.Minute, 250*time.Millisecond).Should(Equal("level=debug"))
		Expect(readerSaw(canaryPod)).To(ContainElement("verbose"), "the canary did see the bad bytes")

		By("the five others never saw the bad bytes, past two kubelet syncs")
		time.Sleep(12 * time.Second)
		for _, p := range hotPods(ns) {
			Expect(lastRead(&p)).To(Equal("level=debug"), p.Name)
			neverRestarted(&p)
			if p.Name != canary {
				Expect(readerSaw(&p)).NotTo(ContainElement("verbose"), p.Name)
			}
		}
		res := env.Kubectl("", "get", "configdeliveries", "-n", ns)
		Expect(res.Stdout).To(ContainSubstring("Halted"))
	})
})

// deliveryPolicy creates ConfigPolicy name with spec for namespace ns alone,
// deleted when the spec ends, and waits until configward points the
// namespace's pods at channels.
func deliveryPolicy(name, ns string, spec v1alpha1.ConfigPolicySpec) {
	spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	Expect(env.Client.Create(context.Background(), policy)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(context.Background(), policy))).To(Succeed()) })
	Eventually(func() string {
		var n corev1.Namespace
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)).To(Succeed())
		return n.Labels[v1alpha1.HotChannelsLabel]
	}, 30*time.Second, 200*time.Millisecond).Should(Equal("true"))
}

// hotPods are the live pods of the hot delivery spec's Deployments.
func hotPods(ns string) []corev1.Pod {
	var out []corev1.Pod
	for _, app := range hotWaveApps {
		out = append(out, livePods(ns, app)...)
	}
	return out
}

func podNamed(ns, name string) *corev1.Pod {
	var p corev1.Pod
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
	return &p
}

// channelLevels maps each wave to what its channel of settings holds.
func channelLevels(ns string) func() map[string]string {
	return func() map[string]string {
		var list corev1.ConfigMapList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
		out := map[string]string{}
		for _, c := range list.Items {
			out[c.Annotations[v1alpha1.ChannelWaveAnnotation]] = c.Data[settingsKey]
		}
		return out
	}
}

// appliedLevel is what the program of pod applied last, as its reload
// condition says (the program's own answer, not the content on disk),
// when the report is of content configward knows: "" otherwise.
func appliedLevel(pod *corev1.Pod) func() string {
	return func() string {
		cond := reloadConditionOf(pod)
		if cond.Reason != reload.ReasonApplied {
			return ""
		}
		code, body := programSays(pod)
		if code != http.StatusOK {
			return ""
		}
		return body
	}
}

// readerSaw lists, in order, each content of the settings file the reader
// container of pod saw: read from inside the pod.
func readerSaw(pod *corev1.Pod) []string {
	lines, err := node.ContainerOutput(pod, "reader")
	Expect(err).NotTo(HaveOccurred())
	var saw []string
	for _, l := range lines {
		var path, content string
		if _, err := fmt.Sscanf(l, "file %s %q", &path, &content); err == nil && path == settingsFile {
			saw = append(saw, content)
		}
	}
	return saw
}

// lastRead is the settings file's content the reader container of pod saw
// last.
func lastRead(pod *corev1.Pod) string {
	saw := readerSaw(pod)
	if len(saw) == 0 {
		return ""
	}
	return saw[len(saw)-1]
}

// latestHotDelivery is the state and wave of the newest delivery of
// settings in ns ("State@wave").
func latestHotDelivery(ns string) func() string {
	return func() string {
		latest := latestDelivery(ns)
		if latest.Name == "" {
			return "none"
		}
		return fmt.Sprintf("%s@%s", latest.Status.State, latest.Status.CurrentWave)
	}
}
