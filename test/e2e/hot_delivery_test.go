package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// These specs deliver changes of a hot ConfigMap through channels on the
// whole cluster: kube-controller-manager creates the pods, configward's Pod
// path points each at its wave's channel, its controller writes the
// channels wave by wave, and kwok runs the pods (which have no reload
// agent here: the gate waits propagationSeconds, then judges readiness).
// The real node's spec (test/node) has the agents and a real program.

// hotDeliveryNamespace returns a namespace where delivery is on with
// waves (YAML under spec.delivery), a hot ConfigMap "flags" holding
// level=info, and Deployments a (labelled app=a, the canary's selector)
// and b, two pods each, mounting it as a directory; it returns once every
// pod runs and both channels hold level=info.
func hotDeliveryNamespace(tag, waves string) string {
	ns := newNamespace("hot", map[string]string{policyLabel: tag})
	applyPolicy(policyYAML("hot-"+tag, tag, "revisions: {enabled: true}\ndelivery:\n"+indent(waves, 2)))
	Eventually(policyReady("hot-"+tag), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
	Eventually(func() string {
		var n corev1.Namespace
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)).To(Succeed())
		return n.Labels[v1alpha1.HotChannelsLabel]
	}, 10*time.Second, 100*time.Millisecond).Should(Equal("true"), "the controller sends the namespace's pods to the Pod path")
	apply(hotConfigMap(ns, "flags", map[string]string{"level": "info"}))
	awaitHotSeen(ns, "flags")
	Eventually(channelsOf(ns, "flags"), 20*time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
	apply(hotDeployment(ns, "a", 2), hotDeployment(ns, "b", 2))
	rolloutStatus(ns, "deployment/a")
	rolloutStatus(ns, "deployment/b")
	return ns
}

// halfOfA begins the waves of every spec here: a canary wave of one of
// Deployment a's two pods.
const halfOfA = `waves:
- name: canary
  selector: {matchLabels: {app: a}}
  podPercent: 50
`

// hotDeployment is a Deployment labelled app=name whose pods mount hot
// ConfigMap flags as a directory.
func hotDeployment(ns, name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s, labels: {app: %[2]s}}
spec:
  replicas: %[3]d
  minReadySeconds: 3
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts: [{name: flags, mountPath: /etc/flags}]
      volumes: [{name: flags, configMap: {name: flags}}]
`, ns, name, replicas)
}

// channelsOf maps each wave to the level its channel of cm holds.
func channelsOf(ns, cm string) func() map[string]string {
	return func() map[string]string {
		var list corev1.ConfigMapList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
		out := map[string]string{}
		for _, c := range list.Items {
			if c.Annotations[v1alpha1.ChannelOfAnnotation] == cm {
				out[c.Annotations[v1alpha1.ChannelWaveAnnotation]] = c.Data["level"]
			}
		}
		return out
	}
}

// mountsOf maps each live pod of app to the ConfigMap its flags volume
// names.
func mountsOf(ns, app string) func() map[string]string {
	return func() map[string]string {
		out := map[string]string{}
		for _, p := range livePods(ns, app) {
			for _, v := range p.Spec.Volumes {
				if v.Name == "flags" && v.ConfigMap != nil {
					out[p.Name] = v.ConfigMap.Name
				}
			}
		}
		return out
	}
}

// countValues counts the values of m.
func countValues(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

var _ = Describe("hot config delivered through channels", func() {
	It("places one pod of the canary's Deployment on the canary channel and keeps the placement as pods are replaced and workloads added", func() {
		ns := hotDeliveryNamespace("place", halfOfA+`- name: rest
`)
		Expect(countValues(mountsOf(ns, "a")())).To(Equal(map[string]int{"flags-ch-canary": 1, "flags-ch-rest": 1}), "half of a's two pods, rounded up")
		Expect(countValues(mountsOf(ns, "b")())).To(Equal(map[string]int{"flags-ch-rest": 2}))
		for _, p := range livePods(ns, "a") {
			Expect(p.Annotations).To(HaveKey(v1alpha1.ChannelWaveAnnotation))
		}
		var d appsv1.Deployment
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a"}, &d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Volumes[0].ConfigMap.Name).To(Equal("flags"), "the template stays as written")

		By("the canary pod replaced: its replacement takes the canary's place, the other pod stays where it is")
		var canary, other string
		for pod, cm := range mountsOf(ns, "a")() {
			if cm == "flags-ch-canary" {
				canary = pod
			} else {
				other = pod
			}
		}
		Expect(env.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: canary}})).To(Succeed())
		Eventually(mountsOf(ns, "a"), rolloutTimeout, 250*time.Millisecond).Should(And(HaveLen(2), Not(HaveKey(canary)), HaveKeyWithValue(other, "flags-ch-rest")))
		Expect(countValues(mountsOf(ns, "a")())).To(Equal(map[string]int{"flags-ch-canary": 1, "flags-ch-rest": 1}))

		By("a workload added later goes where its labels say, and moves no one")
		before := mountsOf(ns, "a")()
		apply(hotDeployment(ns, "c", 1))
		rolloutStatus(ns, "deployment/c")
		Expect(countValues(mountsOf(ns, "c")())).To(Equal(map[string]int{"flags-ch-rest": 1}))
		Expect(mountsOf(ns, "a")()).To(Equal(before))
	})

	It("delivers a change to the canary's pods first, waits for approval with the rest on the old content, then delivers it to every pod", func() {
		ns := hotDeliveryNamespace("approve", halfOfA+`- name: rest
  approval: true
progressDeadlineSeconds: 60
soakSeconds: 1
propagationSeconds: 2
`)
		apply(hotConfigMap(ns, "flags", map[string]string{"level": "debug"}))
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))
		Consistently(channelsOf(ns, "flags"), 3*time.Second, 250*time.Millisecond).Should(HaveKeyWithValue("rest", "info"), "the rest waits for a person")
		rec := deliveries(ns, "flags")[0]
		Expect(rec.Spec.Hot).To(BeTrue())
		Expect(rec.Status.Waves).To(HaveLen(2))
		Expect(rec.Status.Waves[0]).To(And(HaveField("Channel", "flags-ch-canary"), HaveField("Workloads", ConsistOf(HaveField("Name", "a")))))
		Expect(rec.Status.Waves[1].Workloads).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "b")))
		Expect(rec.Status.Waves[0].Health).To(ConsistOf(And(HaveField("Kind", "Pod"), HaveField("State", "Unverified"),
			HaveField("Message", ContainSubstring("no reload agent")))), "a pod without an agent passes without showing what it applied")
		Expect(env.Kubectl("", "get", "configdeliveries", "-n", ns).Stdout).To(ContainSubstring("WaitingForApproval"))

		res := env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))
		Expect(eventsFor(ns, "flags", "DeliveryWaveStarted")).To(HaveLen(2))
	})

	It("halts a change that makes the canary unready, rolls its channel back, and the rest never see it; nobody but configward writes a channel", func() {
		ns := hotDeliveryNamespace("rollback", halfOfA+`- name: rest
progressDeadlineSeconds: 15
soakSeconds: 1
propagationSeconds: 2
onFailure: Rollback
`)
		failingApp(ns, false)
		apply(hotConfigMap(ns, "flags", map[string]string{"level": "broken"}))
		Eventually(latestDelivery(ns, "flags"), 2*rolloutTimeout, 250*time.Millisecond).Should(Equal("Halted/ProgressDeadlineExceeded@canary"))
		rec := deliveries(ns, "flags")[0]
		Expect(rec.Status.RolledBack).To(BeTrue())
		Expect(rec.Status.Message).To(ContainSubstring("not ready"))
		Eventually(channelsOf(ns, "flags"), 20*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}),
			"the canary's channel has its old content back; the rest never had the new one")
		Eventually(func() []string { return eventsFor(ns, "a", "ConfigDeliveryHalted") }, 10*time.Second).Should(HaveLen(1))
		Expect(status("-n", ns)().Table).To(And(
			ContainSubstring("Deployment/a: ConfigMap/flags: ConfigDelivery configmap-flags-1, wave canary (1 of 2), rolled back: its pods in this wave got the content they had back; Halted"),
			ContainSubstring("Deployment/b: ConfigMap/flags: ConfigDelivery configmap-flags-1, wave rest (2 of 2), its pods in this wave keep the content they have until this wave starts; the delivery is Halted at wave canary")))

		By("a person and the pipeline are refused when they write a channel; it stays as configward wrote it")
		patch := `{"data":{"level":"broken"}}`
		for _, who := range []string{human, pipelineSA} {
			res := as(who, "", "patch", "configmap/flags-ch-rest", "-n", ns, "--type=merge", "-p", patch)
			Expect(res.ExitCode).NotTo(Equal(0), who)
			Expect(res.Stderr).To(ContainSubstring("[config-delivery] ConfigMap %s/flags-ch-rest is configward's channel of ConfigMap flags for wave rest", ns), who)
			res = as(who, "", "delete", "configmap/flags-ch-rest", "-n", ns)
			Expect(res.ExitCode).NotTo(Equal(0), who)
		}
		forged := strings.ReplaceAll(hotConfigMap(ns, "flags-ch-extra", map[string]string{"level": "broken"}), "annotations:", "labels: {configward.dev/channel: \"true\"}\n  annotations:")
		res := as(human, forged, "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0), res.Stdout)
		Expect(res.Stderr).To(ContainSubstring("[config-delivery]"))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "info", "rest": "info"}))

		By("delivery turned off: the halted delivery is cancelled and every channel the pods mount takes the current content")
		Expect(env.Client.Delete(context.Background(), &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hot-rollback"}})).To(Succeed())
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 250*time.Millisecond).Should(HavePrefix("Cancelled/"))
		Eventually(channelsOf(ns, "flags"), 20*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "broken", "rest": "broken"}))
		Eventually(func() map[string]string {
			var n corev1.Namespace
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)).To(Succeed())
			return n.Labels
		}, 10*time.Second).ShouldNot(HaveKey(v1alpha1.HotChannelsLabel))
	})

	It("supersedes an open delivery without moving the canary back, halts and resumes on request, survives a controller restart, and keeps what pods hold when the original goes", func() {
		ns := hotDeliveryNamespace("supersede", halfOfA+`- name: rest
  approval: true
progressDeadlineSeconds: 60
soakSeconds: 1
propagationSeconds: 2
`)
		apply(hotConfigMap(ns, "flags", map[string]string{"level": "debug"}))
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))

		By("a newer change supersedes it: the canary takes it, the rest stays where it was")
		apply(hotConfigMap(ns, "flags", map[string]string{"level": "trace"}))
		Eventually(func() int { return len(deliveries(ns, "flags")) }, 30*time.Second).Should(Equal(2))
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(deliveries(ns, "flags")[0].Status.State).To(Equal(v1alpha1.DeliverySuperseded))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "trace", "rest": "info"}))

		By("halt and resume, recorded with who asked")
		res := env.KubectlPlugin("delivery", "halt", "-n", ns, "configmap/flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), 30*time.Second, 200*time.Millisecond).Should(Equal("Halted/HaltedByUser@rest"))
		Consistently(channelsOf(ns, "flags"), 2*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "trace", "rest": "info"}))
		res = env.KubectlPlugin("delivery", "resume", "-n", ns, "configmap/flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(deliveries(ns, "flags")[1].Status.History).To(ContainElements(
			And(HaveField("What", "Halted"), HaveField("By", Not(BeEmpty()))), And(HaveField("What", "Resumed"), HaveField("By", Not(BeEmpty())))))

		By("promoted, the rest's wave is judged by a restarted controller")
		res = env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), 30*time.Second, 100*time.Millisecond).Should(Equal("Progressing/WaveStarted@rest"))
		restartController(suiteController, func() {})
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "trace", "rest": "trace"}))

		By("the original deleted while a delivery is open: it is cancelled, and the channels keep what the pods run on")
		apply(hotConfigMap(ns, "flags", map[string]string{"level": "warn"}))
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		res = as(pipelineSA, "", "delete", "configmap/flags", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), 30*time.Second, 250*time.Millisecond).Should(HavePrefix("Cancelled/"))
		Consistently(channelsOf(ns, "flags"), 3*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "warn", "rest": "trace"}))

		By("once no pod mounts them, the channels go")
		Expect(env.Kubectl("", "delete", "deployment/a", "deployment/b", "-n", ns, "--wait=true").ExitCode).To(Equal(0))
		Eventually(channelsOf(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(BeEmpty())
	})

	It("holds a change a quota refuses to copy: the delivery halts before its first wave, no pod sees it, and it goes on once resumed", func() {
		ns := hotDeliveryNamespace("quota", halfOfA+`- name: rest
progressDeadlineSeconds: 60
soakSeconds: 1
propagationSeconds: 2
`)
		var cms corev1.ConfigMapList
		Expect(env.Client.List(context.Background(), &cms, client.InNamespace(ns))).To(Succeed())
		full := fmt.Sprintf(`apiVersion: v1
kind: ResourceQuota
metadata: {name: configmaps, namespace: %s}
spec:
  hard: {count/configmaps: "%%d"}
`, ns)
		apply(fmt.Sprintf(full, len(cms.Items)))
		Eventually(func() string {
			var q corev1.ResourceQuota
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "configmaps"}, &q)).To(Succeed())
			used := q.Status.Used["count/configmaps"]
			return used.String()
		}, 30*time.Second, 200*time.Millisecond).Should(Equal(fmt.Sprint(len(cms.Items))), "the quota controller counted the ConfigMaps")

		apply(hotConfigMap(ns, "flags", map[string]string{"level": "debug"}))
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(Equal("Halted/SnapshotsBlocked@"))
		Expect(deliveries(ns, "flags")[0].Status.Message).To(ContainSubstring("quota"))
		Consistently(channelsOf(ns, "flags"), 3*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))

		By("the quota raised, resume delivers it wave by wave")
		apply(fmt.Sprintf(full, len(cms.Items)+5))
		Eventually(func() int {
			var q corev1.ResourceQuota
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "configmaps"}, &q)).To(Succeed())
			hard := q.Status.Hard["count/configmaps"]
			return int(hard.Value())
		}, 30*time.Second, 200*time.Millisecond).Should(Equal(len(cms.Items) + 5))
		res := env.KubectlPlugin("delivery", "resume", "-n", ns, "configmap/flags")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))
	})

	It("moves no running pod when delivery is turned on, and the first delivery names the pods that still mount the original", func() {
		ns := newNamespace("hot", map[string]string{policyLabel: "turnon"})
		apply(hotConfigMap(ns, "flags", map[string]string{"level": "info"}))
		awaitHotSeen(ns, "flags")
		apply(hotDeployment(ns, "b", 2))
		rolloutStatus(ns, "deployment/b")
		Expect(countValues(mountsOf(ns, "b")())).To(Equal(map[string]int{"flags": 2}))

		applyPolicy(policyYAML("hot-turnon", "turnon", "revisions: {enabled: true}\ndelivery:\n"+indent(halfOfA+"- name: rest\nsoakSeconds: 1\npropagationSeconds: 2\n", 2)))
		Eventually(policyReady("hot-turnon"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(channelsOf(ns, "flags"), 20*time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
		apply(hotDeployment(ns, "a", 2))
		rolloutStatus(ns, "deployment/a")
		Expect(countValues(mountsOf(ns, "a")())).To(Equal(map[string]int{"flags-ch-canary": 1, "flags-ch-rest": 1}))
		Expect(countValues(mountsOf(ns, "b")())).To(Equal(map[string]int{"flags": 2}), "running pods are not moved")

		apply(hotConfigMap(ns, "flags", map[string]string{"level": "debug"}))
		Eventually(latestDelivery(ns, "flags"), rolloutTimeout, 250*time.Millisecond).Should(HavePrefix("Succeeded/"))
		started := deliveries(ns, "flags")[0].Status.History[0]
		Expect(started.What).To(Equal("Started"))
		Expect(started.Message).To(ContainSubstring("2 pods mount ConfigMap flags directly and are outside the waves"))
		for _, p := range livePods(ns, "b") {
			Expect(started.Message).To(ContainSubstring(p.Name))
		}
	})

	It("delivers a hot Secret through Secret channels where revisions cover Secrets", func() {
		ns := newNamespace("hot", map[string]string{policyLabel: "secret"})
		applyPolicy(policyYAML("hot-secret", "secret", "revisions: {enabled: true, secrets: true}\ndelivery:\n"+
			indent(halfOfA+"- name: rest\n  approval: true\nsoakSeconds: 1\npropagationSeconds: 2\n", 2)))
		Eventually(policyReady("hot-secret"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		secret := func(level string) string {
			return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: token, namespace: %s, annotations: {configward.dev/reload: hot}}
stringData: {level: %s}
`, ns, level)
		}
		apply(secret("info"))
		Eventually(secretChannelsOf(ns, "token"), 20*time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
		apply(strings.ReplaceAll(hotDeployment(ns, "a", 2), "{name: flags, configMap: {name: flags}}", "{name: flags, secret: {secretName: token}}"))
		rolloutStatus(ns, "deployment/a")
		mounts := map[string]int{}
		for _, p := range livePods(ns, "a") {
			mounts[p.Spec.Volumes[0].Secret.SecretName]++
		}
		Expect(mounts).To(Equal(map[string]int{"token-ch-canary": 1, "token-ch-rest": 1}))

		apply(secret("debug"))
		Eventually(latestDelivery(ns, "token"), rolloutTimeout, 250*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(secretChannelsOf(ns, "token")()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))
		Expect(deliveries(ns, "token")[0].Spec.Config.Kind).To(Equal("Secret"))
	})
})

// secretChannelsOf maps each wave to the level its channel of Secret name
// holds.
func secretChannelsOf(ns, name string) func() map[string]string {
	return func() map[string]string {
		var list corev1.SecretList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
		out := map[string]string{}
		for _, c := range list.Items {
			if c.Annotations[v1alpha1.ChannelOfAnnotation] == name {
				out[c.Annotations[v1alpha1.ChannelWaveAnnotation]] = string(c.Data["level"])
			}
		}
		return out
	}
}
