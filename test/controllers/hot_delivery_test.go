package controllers

import (
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/refs"
)

// These specs deliver changes of hot config through its channels: the
// channels controller writes each wave's channel as the config's latest
// ConfigDelivery says, and the delivery controller gates each wave on the
// pods that mount its channel. The pods are created here as the Pod path
// creates them, each pointed at its wave's channel; cluster runs them
// (without a reload agent: the gate waits propagationSeconds, then judges
// readiness). Placement itself, the Pod path's, is the whole-cluster
// suite's (test/e2e/hot_delivery_test.go).

// halfOfA is the canary wave of the specs here: one of Deployment a's two
// pods.
var halfOfA = v1alpha1.Wave{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, PodPercent: new(int32(50))}

// hotWaves are the waves canary (halfOfA) and rest, with the last's
// approval, no soak and a propagation of a second (the kubelet's delay:
// a pod on bad content turns unready within it).
func hotWaves(approval bool, deadline int32, onFailure v1alpha1.FailurePolicy) v1alpha1.DeliverySettings {
	return v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{halfOfA, {Name: "rest", Approval: approval}},
		ProgressDeadlineSeconds: deadline, SoakSeconds: new(int32(0)), PropagationSeconds: new(int32(1)), OnFailure: onFailure}
}

// hotConfigMap is ConfigMap name marked hot, holding value.
func hotConfigMap(ns, name, value string) *corev1.ConfigMap {
	cm := configMap(ns, name, value)
	cm.Annotations = map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}
	return cm
}

// hotNamespace creates a namespace where ConfigPolicy name turns revisions
// and delivery (settings) on, with hot ConfigMap flags holding "info" and
// Deployments a, with a pod in the canary wave and one in the rest, and b,
// with two pods in the rest, run by cluster with a; it returns once each
// pod runs and both channels hold "info".
func hotNamespace(name string, settings v1alpha1.DeliverySettings, a app) (string, *corev1.ConfigMap) {
	ns := policyNamespace(name, func(s *v1alpha1.ConfigPolicySpec) { s.Revisions.Enabled, s.Delivery = true, &settings })
	awaitHotChannels(ns)
	cm := create1(hotConfigMap(ns, "flags", "info"))
	Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
	cluster(ns, clusterOptions{app: a})
	hotWorkload(ns, "a", refs.ConfigMap, "flags", "canary", "rest")
	hotWorkload(ns, "b", refs.ConfigMap, "flags", "rest", "rest")
	Eventually(readyPods(ns), 10*time.Second).Should(Equal(4))
	return ns, cm
}

// awaitHotChannels waits until the controller sends the pods of ns to the
// Pod path (its hot-channels label).
func awaitHotChannels(ns string) {
	GinkgoHelper()
	Eventually(func() string {
		var n corev1.Namespace
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		return n.Labels[v1alpha1.HotChannelsLabel]
	}, 10*time.Second, 100*time.Millisecond).Should(Equal("true"), "the controller sends the namespace's pods to the Pod path")
}

// hotWorkload creates Deployment name (labelled app=name) whose template
// mounts config, a ConfigMap or a Secret by kind, as a directory, its
// ReplicaSet, and one pod for each of waves as the Pod path creates them:
// pointed at that wave's channel of config, or, for wave "", at config
// itself (a pod created before delivery was on).
func hotWorkload(ns, name string, kind refs.Kind, config string, waves ...string) *appsv1.Deployment {
	return hotWorkloadOf(ns, name, kind, []string{config}, waves...)
}

// hotWorkloadOf is hotWorkload for a template that mounts several configs
// of kind, each as a directory of its own.
func hotWorkloadOf(ns, name string, kind refs.Kind, configs []string, waves ...string) *appsv1.Deployment {
	volume := func(i int, name string) corev1.Volume {
		v := corev1.Volume{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
		if kind == refs.Secret {
			v.VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}
		}
		if i > 0 {
			v.Name = fmt.Sprintf("flags-%d", i)
		}
		return v
	}
	labels := map[string]string{"app": name}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "app:1"}},
	}}
	for i, config := range configs {
		v := volume(i, config)
		tpl.Spec.Volumes = append(tpl.Spec.Volumes, v)
		tpl.Spec.Containers[0].VolumeMounts = append(tpl.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/etc/" + v.Name})
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(len(waves))), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl}}
	create(d)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: templateRS(d), Labels: labels, OwnerReferences: []metav1.OwnerReference{controlledBy(d, "Deployment")}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: tpl}}
	create(rs)
	for _, wave := range waves {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: rs.Name + "-", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controlledBy(rs, "ReplicaSet")}}, Spec: *tpl.Spec.DeepCopy()}
		if wave != "" {
			// Marked and sealed as the Pod path places a pod: the gate
			// counts only pods it placed.
			p.Annotations = map[string]string{v1alpha1.ChannelWaveAnnotation: wave,
				v1alpha1.ChannelPlacedAnnotation: channel.PlacementSeal([]byte("controller tier"), "request-"+name, ns, wave)}
			p.Spec.Volumes = nil
			for i, config := range configs {
				p.Spec.Volumes = append(p.Spec.Volumes, volume(i, channel.Name(config, wave)))
			}
		}
		create(p)
	}
	return d
}

// mountsOf maps each live pod of Deployment name to the ConfigMap or
// Secret it mounts.
func mountsOf(ns, name string) func() map[string]string {
	return func() map[string]string {
		out := map[string]string{}
		for _, p := range podsOf(ctx, ns, name) {
			for _, v := range p.Spec.Volumes {
				switch {
				case v.ConfigMap != nil:
					out[p.Name] = v.ConfigMap.Name
				case v.Secret != nil:
					out[p.Name] = v.Secret.SecretName
				}
			}
		}
		return out
	}
}

// readyPods counts the ready pods of ns.
func readyPods(ns string) func() int {
	return func() int {
		var list corev1.PodList
		Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		n := 0
		for i := range list.Items {
			if podReady(&list.Items[i]) {
				n++
			}
		}
		return n
	}
}

// deleteWorkload deletes Deployment name, its ReplicaSets and its pods, as
// the garbage collector would after `kubectl delete deployment`.
func deleteWorkload(ns, name string) {
	for _, o := range []client.Object{&corev1.Pod{}, &appsv1.ReplicaSet{}, &appsv1.Deployment{}} {
		Expect(env.Client.DeleteAllOf(ctx, o, client.InNamespace(ns), client.MatchingLabels{"app": name}, client.GracePeriodSeconds(0))).To(Succeed())
	}
}

var _ = Describe("hot config delivered through channels", func() {
	It("delivers a change to the canary's pods first, waits for approval with the rest on the old content, then delivers it to every pod", func() {
		ns, cm := hotNamespace("hot-approve", hotWaves(true, 60, v1alpha1.FailureHalt), runs)
		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))
		Consistently(channelValues(ns, "flags"), 2*time.Second, 250*time.Millisecond).Should(HaveKeyWithValue("rest", "info"), "the rest waits for a person")
		rec := deliveries(ns, "flags")[0]
		Expect(rec.Spec.Hot).To(BeTrue())
		Expect(rec.Status.Waves).To(HaveLen(2))
		Expect(rec.Status.Waves[0]).To(And(HaveField("Channel", "flags-ch-canary"), HaveField("Workloads", ConsistOf(HaveField("Name", "a")))))
		Expect(rec.Status.Waves[1].Workloads).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "b")))
		Expect(rec.Status.Waves[0].Health).To(ConsistOf(And(HaveField("Kind", "Pod"), HaveField("State", "Unverified"),
			HaveField("Message", ContainSubstring("no reload agent")))), "a pod without an agent passes without showing what it applied")
		Expect(env.Kubectl("", "get", "configdeliveries", "-n", ns).Stdout).To(ContainSubstring("WaitingForApproval"))

		ask(ns, "flags", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))
		Expect(events(ns, "flags", "DeliveryWaveStarted")()).To(HaveLen(2))
	})

	It("halts a change that makes the canary unready and rolls its channel back, the rest never see it; turned off, every channel takes the current content", func() {
		ns, cm := hotNamespace("hot-rollback", hotWaves(false, 4, v1alpha1.FailureRollback), failsOn("broken", false))
		setValue(cm, "broken")
		// The canary's pod has no agent, so its wave is judged by readiness
		// once the 1 s propagation has passed. Whether the pod plays its
		// failure within that second (the wave never gets ready:
		// ProgressDeadlineExceeded) or just after it (ready, then not:
		// WaveUnhealthy) is the player's timing on a busy machine, not
		// configward's; either way the wave halts and rolls back.
		Eventually(latestDelivery(ns, "flags"), 30*time.Second, 100*time.Millisecond).Should(
			BeElementOf("Halted/ProgressDeadlineExceeded@canary", "Halted/WaveUnhealthy@canary"))
		rec := deliveries(ns, "flags")[0]
		Expect(rec.Status.RolledBack).To(BeTrue())
		Expect(rec.Status.Message).To(ContainSubstring("not ready"))
		Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}),
			"the canary's channel has its old content back; the rest never had the new one")
		Eventually(events(ns, "a", "ConfigDeliveryHalted"), 10*time.Second).Should(HaveLen(1))
		Expect(statusTable(ns)).To(And(
			ContainSubstring("Deployment/a: ConfigMap/flags: ConfigDelivery configmap-flags-1, wave canary (1 of 2), rolled back: its pods in this wave got the content they had back; Halted"),
			ContainSubstring("Deployment/b: ConfigMap/flags: ConfigDelivery configmap-flags-1, wave rest (2 of 2), its pods in this wave keep the content they have until this wave starts; the delivery is Halted at wave canary")))

		By("delivery turned off: the halted delivery is cancelled and every channel the pods mount takes the current content")
		Expect(env.Client.Delete(ctx, &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hot-rollback"}})).To(Succeed())
		Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "broken", "rest": "broken"}))
		Eventually(func() map[string]string {
			var n corev1.Namespace
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
			return n.Labels
		}, 10*time.Second).ShouldNot(HaveKey(v1alpha1.HotChannelsLabel))
		// A policy change wakes the delivery controller for every placed
		// delivery: the halted one is cancelled at once, not at its next poll
		// of a halted delivery, 30 s on.
		Eventually(latestDelivery(ns, "flags"), 10*time.Second, 200*time.Millisecond).Should(HavePrefix("Cancelled/"))
	})

	It("supersedes an open delivery without moving the canary back, halts and resumes on request, survives a controller restart, and keeps what pods hold when the original goes", func() {
		var hold atomic.Bool
		ns, cm := hotNamespace("hot-supersede", hotWaves(true, 60, v1alpha1.FailureHalt), func(content string) health {
			// Held, pods that read the last content do not get ready: the
			// rest's wave is open while the controller restarts.
			return health{unready: hold.Load() && content == "trace"}
		})
		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))

		By("a newer change supersedes it: the canary takes it, the rest stays where it was")
		setValue(cm, "trace")
		Eventually(func() int { return len(deliveries(ns, "flags")) }, 10*time.Second).Should(Equal(2))
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(deliveries(ns, "flags")[0].Status.State).To(Equal(v1alpha1.DeliverySuperseded))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "trace", "rest": "info"}))

		By("halt and resume, recorded with who asked")
		ask(ns, "flags", v1alpha1.ActionHalt, operator)
		Eventually(latestDelivery(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal("Halted/HaltedByUser@rest"))
		Consistently(channelValues(ns, "flags"), 2*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "trace", "rest": "info"}))
		ask(ns, "flags", v1alpha1.ActionResume, operator)
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(deliveries(ns, "flags")[1].Status.History).To(ContainElements(
			And(HaveField("What", "Halted"), HaveField("By", operator)), And(HaveField("What", "Resumed"), HaveField("By", operator))))

		By("promoted, the rest's wave is judged by a restarted controller")
		hold.Store(true)
		ask(ns, "flags", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal("Progressing/WaveStarted@rest"))
		Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "trace", "rest": "trace"}))
		Expect(stopController()).To(Succeed())
		hold.Store(false)
		startSuiteController()
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "trace", "rest": "trace"}))

		By("the original deleted while a delivery is open: it is cancelled, and the channels keep what the pods run on")
		setValue(cm, "warn")
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(env.Client.Delete(ctx, cm)).To(Succeed())
		Eventually(latestDelivery(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(HavePrefix("Cancelled/"))
		Consistently(channelValues(ns, "flags"), 2*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "warn", "rest": "trace"}))

		By("once no pod mounts them, the channels go")
		deleteWorkload(ns, "a")
		deleteWorkload(ns, "b")
		Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(BeEmpty())
	})

	It("holds a change a quota refuses to copy: the delivery halts before its first wave, no pod sees it, and it goes on once resumed", func() {
		ns, cm := hotNamespace("hot-quota", hotWaves(false, 60, v1alpha1.FailureHalt), runs)
		var cms corev1.ConfigMapList
		Expect(env.Client.List(ctx, &cms, client.InNamespace(ns))).To(Succeed())
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmaps"}}
		// The quota's status is kube-controller-manager's to count; here
		// the spec writes it, and the API server's quota admission counts
		// on from it.
		limit := func(n int) {
			Expect(client.IgnoreNotFound(env.Client.Get(ctx, clientKey(quota), quota))).To(Succeed())
			hard := corev1.ResourceList{"count/configmaps": *resource.NewQuantity(int64(n), resource.DecimalSI)}
			quota.Spec.Hard = hard
			if quota.UID == "" {
				create(quota)
			} else {
				Expect(env.Client.Update(ctx, quota)).To(Succeed())
			}
			quota.Status.Hard = hard
			if quota.Status.Used == nil {
				quota.Status.Used = corev1.ResourceList{"count/configmaps": *resource.NewQuantity(int64(len(cms.Items)), resource.DecimalSI)}
			}
			Expect(env.Client.Status().Update(ctx, quota)).To(Succeed())
		}
		limit(len(cms.Items))

		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("Halted/SnapshotsBlocked@"))
		Expect(deliveries(ns, "flags")[0].Status.Message).To(ContainSubstring("quota"))
		Consistently(channelValues(ns, "flags"), 2*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))

		By("the quota raised, resume delivers it wave by wave")
		limit(len(cms.Items) + 5)
		ask(ns, "flags", v1alpha1.ActionResume, operator)
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))
	})

	It("moves no running pod when delivery is turned on, and the first delivery names the pods that still mount the original", func() {
		labels := map[string]string{"controllers.configward.dev/hot-turnon": "on"}
		ns := namespace(labels)
		cm := create1(hotConfigMap(ns, "flags", "info"))
		cluster(ns, clusterOptions{app: runs})
		hotWorkload(ns, "b", refs.ConfigMap, "flags", "", "")
		Eventually(readyPods(ns), 10*time.Second).Should(Equal(2))
		outside := mountsOf(ns, "b")()
		Expect(outside).To(HaveLen(2))

		configPolicy("hot-turnon", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled, s.Delivery = true, &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{halfOfA, {Name: "rest"}},
				SoakSeconds: new(int32(0)), PropagationSeconds: new(int32(1))}
		})
		Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
		hotWorkload(ns, "a", refs.ConfigMap, "flags", "canary", "rest")
		Eventually(readyPods(ns), 10*time.Second).Should(Equal(4))
		Consistently(mountsOf(ns, "b"), time.Second).Should(Equal(outside), "running pods are not moved")

		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(HavePrefix("Succeeded/"))
		started := deliveries(ns, "flags")[0].Status.History[0]
		Expect(started.What).To(Equal("Started"))
		Expect(started.Message).To(ContainSubstring("2 pods mount ConfigMap flags directly and are outside the waves"))
		for pod, mounts := range outside {
			Expect(mounts).To(Equal("flags"))
			Expect(started.Message).To(ContainSubstring(pod))
		}
	})

	It("delivers a hot Secret through Secret channels where revisions cover Secrets", func() {
		ns := policyNamespace("hot-secret", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled, s.Revisions.Secrets, s.Delivery = true, true, new(hotWaves(true, 60, v1alpha1.FailureHalt))
		})
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token", Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}},
			Data: map[string][]byte{configKey: []byte("info")}}
		create(secret)
		Eventually(channelsOf(ns, "token", &corev1.SecretList{}), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
		cluster(ns, clusterOptions{app: runs})
		hotWorkload(ns, "a", refs.Secret, "token", "canary", "rest")
		Eventually(readyPods(ns), 10*time.Second).Should(Equal(2))

		secret.Data[configKey] = []byte("debug")
		Expect(env.Client.Update(ctx, secret)).To(Succeed())
		Eventually(latestDelivery(ns, "token"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(channelsOf(ns, "token", &corev1.SecretList{})()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))
		Expect(deliveries(ns, "token")[0].Spec.Config.Kind).To(Equal("Secret"))
	})
})
