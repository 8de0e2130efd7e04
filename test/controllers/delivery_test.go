package controllers

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/status"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

// These specs deliver a change of one ConfigMap to its consumers in waves:
// the delivery controller moves the ConfigDelivery on, the rollout
// controller re-stamps each wave's Deployments, and cluster (in place of
// kube-controller-manager and the kubelets) rolls them and runs their pods,
// with an application that may not come up on bad config. Deployments are
// created stamped as the config-hash webhook stamps them: with the hash of
// their config and the snapshots their revision reads.

// canaryWave selects the Deployments labelled for the canary wave.
var canaryWave = &metav1.LabelSelector{MatchLabels: map[string]string{"configward.dev/wave": "canary"}}

// threeWaves: the canary by label, then 30% of the others, then the rest.
func threeWaves(deadline, soak int32, onFailure v1alpha1.FailurePolicy) v1alpha1.DeliverySettings {
	return v1alpha1.DeliverySettings{
		Waves:                   []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "early", Percent: new(int32(30))}, {Name: "rest"}},
		ProgressDeadlineSeconds: deadline, SoakSeconds: new(soak), OnFailure: onFailure,
	}
}

// world is what deliveryNamespace puts in a namespace beside its policy.
type world struct {
	// n one-pod Deployments app-0 to app-<n-1>, app-<canary> labelled
	// for the canary wave, each counting a pod available once it has been
	// ready for minReadySeconds.
	n, canary       int
	minReadySeconds int32
	// app runs in their pods.
	app app
	// policy, when set, sets more of the ConfigPolicy.
	policy func(*v1alpha1.ConfigPolicySpec)
}

// deliveryNamespace creates a namespace where ConfigPolicy name turns
// revisions and the delivery settings on, with ConfigMap cfg holding
// "info" and the Deployments of w mounting it, run by cluster; it returns
// once each runs its revision.
func deliveryNamespace(name string, settings v1alpha1.DeliverySettings, w world) (string, *corev1.ConfigMap) {
	ns := policyNamespace(name, func(s *v1alpha1.ConfigPolicySpec) {
		s.Revisions.Enabled, s.Delivery = true, &settings
		if w.policy != nil {
			w.policy(s)
		}
	})
	cm := create1(configMap(ns, "cfg", "info"))
	cluster(ns, clusterOptions{app: w.app, deployments: true})
	for i := range w.n {
		d := waveDeployment(ns, fmt.Sprintf("app-%d", i), i == w.canary, cm)
		d.Spec.MinReadySeconds = w.minReadySeconds
		create(d)
	}
	for i := range w.n {
		Eventually(reads(ns, fmt.Sprintf("app-%d", i)), 20*time.Second).Should(ConsistOf("info"))
	}
	return ns, cm
}

// waveDeployment is a one-pod Deployment mounting the ConfigMaps cms, in
// the canary wave when canary, stamped as the config-hash webhook stamps
// it where revisions are on.
func waveDeployment(ns, name string, canary bool, cms ...*corev1.ConfigMap) *appsv1.Deployment {
	d := deployment(ns, name, "")
	if canary {
		d.Labels = map[string]string{"configward.dev/wave": "canary"}
	}
	spec := &d.Spec.Template.Spec
	spec.Containers[0].EnvFrom = nil
	snaps := revision.Snapshots{}
	for i, cm := range cms {
		v := fmt.Sprintf("c%d", i)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}})
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/etc/" + cm.Name})
		snaps[revision.Source{Kind: refs.ConfigMap, Name: cm.Name}] = snapshotOf(cm)
	}
	d.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: hashOf(cms...), v1alpha1.ConfigSnapshotsAnnotation: snaps.Encode()}
	return d
}

// deliveries lists the ConfigDeliveries of config in ns, oldest first.
func deliveries(ns, config string) []v1alpha1.ConfigDelivery {
	ds, err := env.Deliveries(ctx, ns, config)
	Expect(err).NotTo(HaveOccurred())
	return ds
}

// latestDelivery is where the newest delivery of config in ns stands:
// "State/Reason@wave".
func latestDelivery(ns, config string) func() string {
	return func() string { return framework.DeliveryState(deliveries(ns, config)) }
}

// ask writes a request into the newest delivery of config, as `configward
// delivery` does, with the requester configward's webhook records.
func ask(ns, config string, action v1alpha1.DeliveryAction, by string) {
	ds := deliveries(ns, config)
	Expect(ds).NotTo(BeEmpty())
	rec := &ds[len(ds)-1]
	before := rec.DeepCopy()
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	rec.Spec.Request = &v1alpha1.DeliveryRequest{Action: action, ID: hex.EncodeToString(id), RequestedBy: by}
	Expect(env.Client.Patch(ctx, rec, client.MergeFrom(before))).To(Succeed())
}

// patches maps each Deployment of ns that configward's controller wrote to
// the times of its writes, from the API server's audit log.
func patches(ns string) map[string][]time.Time {
	events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Resource == "deployments" &&
			ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" && !ev.DryRun() && ev.ResponseStatus.Code >= 200 && ev.ResponseStatus.Code < 300
	})
	Expect(err).NotTo(HaveOccurred())
	out := map[string][]time.Time{}
	for _, ev := range events {
		out[ev.ObjectRef.Name] = append(out[ev.ObjectRef.Name], ev.StageTimestamp.Time)
	}
	return out
}

// patched names the Deployments of ns configward's controller wrote.
func patched(ns string) func() []string {
	return func() []string { return slices.Collect(maps.Keys(patches(ns))) }
}

// patchCount counts the writes of configward's controller to the
// Deployments of ns.
func patchCount(ns string) func() int {
	return func() int {
		n := 0
		for _, ts := range patches(ns) {
			n += len(ts)
		}
		return n
	}
}

// snapshotsNamed is the config-snapshots annotation of Deployment name's
// template.
func snapshotsNamed(ns, name string) func() string {
	return templateSnapshots(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

// statusTable is what `configward status -n ns` prints, gathered and
// printed in-process as the command does.
func statusTable(ns string) string {
	res, err := status.Gather(ctx, env.Client, status.Options{Namespace: ns, Registry: workload.Builtin()})
	Expect(err).NotTo(HaveOccurred())
	var out bytes.Buffer
	Expect(status.PrintTable(&out, res, false, false, time.Now())).To(Succeed())
	return out.String()
}

// deploymentNamed is a handle on Deployment name of ns, for the helpers
// that read a stored object.
func deploymentNamed(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// operator is who asks the deliveries to move on.
const operator = "delivery-operator"

var _ = Describe("progressive config delivery", func() {
	It("rolls a good change wave by wave, each wave healthy and soaked before the next, each Deployment once", func() {
		ns, cm := deliveryNamespace("delivery-good", threeWaves(120, 1, v1alpha1.FailureHalt), world{n: 10, canary: 7, app: runs})
		setValue(cm, "debug")
		// A pipeline's next step, started right after its write: the
		// delivery is created a batch window later, and the wait waits for
		// it, then for its last wave.
		waited := make(chan framework.KubectlResult, 1)
		go func() {
			waited <- env.Configward("delivery", "wait", "configmap/cfg", "-n", ns, "--timeout", "2m")
		}()
		Eventually(latestDelivery(ns, "cfg"), time.Minute, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Eventually(waited, 30*time.Second).Should(Receive(And(HaveField("ExitCode", 0), HaveField("Stdout", ContainSubstring("configmap-cfg-1 succeeded")))))
		Expect(env.Kubectl("", "wait", "--for=condition=Ready", "configdelivery/configmap-cfg-1", "-n", ns, "--timeout=10s")).To(HaveField("ExitCode", 0))
		d := deliveries(ns, "cfg")
		Expect(d).To(HaveLen(1))
		waves := d[0].Status.Waves
		Expect(waves).To(HaveLen(3))
		var placed [][]string
		for _, w := range waves {
			var names []string
			for _, t := range w.Workloads {
				names = append(names, t.Name)
			}
			placed = append(placed, names)
		}
		Expect(placed).To(Equal([][]string{{"app-7"}, {"app-0", "app-1", "app-2"}, {"app-3", "app-4", "app-5", "app-6", "app-8", "app-9"}}),
			"canary by label, then 30%% of the nine left rounded up, in name order, then the rest")

		By("audit log: each Deployment patched once, none before the wave before it was healthy and soaked")
		Eventually(patchCount(ns), 10*time.Second, 500*time.Millisecond).Should(Equal(10))
		written := patches(ns)
		for i, w := range waves {
			Expect(w.HealthySince).NotTo(BeNil())
			Expect(w.CompletedAt.Sub(w.HealthySince.Time)).To(BeNumerically(">=", time.Second), "soaked")
			for _, t := range w.Workloads {
				Expect(written[t.Name]).To(HaveLen(1), t.Name)
				at := written[t.Name][0]
				Expect(at).To(BeTemporally(">=", w.StartedAt.Time.Add(-time.Second)), "%s patched after its wave started", t.Name)
				if i > 0 {
					prev := waves[i-1]
					// Record times are whole seconds; the soak ends at least
					// soakSeconds after the previous wave was healthy.
					Expect(at).To(BeTemporally(">=", prev.HealthySince.Time.Add(time.Second)), "%s patched before wave %s soaked", t.Name, prev.Name)
				}
			}
		}
		Expect(snapshotsNamed(ns, "app-3")()).To(Equal("ConfigMap/cfg=" + snapshotOf(cm)))
		Eventually(reads(ns, "app-3"), 10*time.Second).Should(ConsistOf("debug"))
		Eventually(events(ns, "cfg", "DeliveryWaveStarted"), 10*time.Second).Should(HaveLen(3))
		Eventually(results(deploymentNamed(ns, "app-3")), 10*time.Second).
			Should(And(ContainElement("config-current pass done"), Not(ContainElement(HavePrefix("config-delivery")))),
				"a finished delivery leaves no result behind")
	})

	It("halts a bad change at the canary's deadline and re-stamps no other Deployment; promote moves it on, resume judges the wave again", func() {
		ns, cm := deliveryNamespace("delivery-bad", threeWaves(5, 0, v1alpha1.FailureHalt), world{n: 10, canary: 7, app: failsOn("broken", false)})
		setValue(cm, "broken")
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("Halted/ProgressDeadlineExceeded@canary"))
		Expect(env.Configward("delivery", "wait", "configmap/cfg", "-n", ns, "--timeout", "10s")).To(And(HaveField("ExitCode", 3),
			HaveField("Stderr", ContainSubstring("halted at wave canary (ProgressDeadlineExceeded)"))), "a halted delivery answers a pipeline at once")
		Expect(env.Kubectl("", "wait", "--for=condition=Stalled", "configdelivery/configmap-cfg-1", "-n", ns, "--timeout=10s")).To(HaveField("ExitCode", 0))
		Consistently(patched(ns), 2*time.Second, 500*time.Millisecond).Should(ConsistOf("app-7"))
		Expect(patchCount(ns)()).To(Equal(1))
		Eventually(events(ns, "cfg", "DeliveryHalted"), 10*time.Second).Should(HaveLen(1))
		Eventually(events(ns, "app-7", "ConfigDeliveryHalted"), 10*time.Second).Should(HaveLen(1))
		Eventually(results(deploymentNamed(ns, "app-7")), 10*time.Second).Should(ContainElement(HavePrefix("config-delivery fail")))
		Eventually(results(deploymentNamed(ns, "app-2")), 10*time.Second).Should(ContainElement(HavePrefix("config-delivery warn")))
		Expect(statusTable(ns)).To(And(
			ContainSubstring("Deployment/app-7: ConfigMap/cfg: ConfigDelivery configmap-cfg-1, wave canary (1 of 3), Halted: wave canary not healthy 5s after it started"),
			ContainSubstring("Deployment/app-2: ConfigMap/cfg: ConfigDelivery configmap-cfg-1, wave early (2 of 3), keeps its revision until this wave starts; the delivery is Halted at wave canary")))

		By("promote moves the halted delivery on by hand, recorded with who asked")
		ask(ns, "cfg", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "cfg"), 10*time.Second, 100*time.Millisecond).Should(HaveSuffix("@early"))
		Expect(deliveries(ns, "cfg")[0].Status.History).To(ContainElement(And(HaveField("What", "Promoted"), HaveField("By", operator))))
		Eventually(patchCount(ns), 10*time.Second, 500*time.Millisecond).Should(Equal(4))

		By("the early wave fails too; resume judges it again with a new deadline")
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("Halted/ProgressDeadlineExceeded@early"))
		ask(ns, "cfg", v1alpha1.ActionResume, operator)
		Eventually(latestDelivery(ns, "cfg"), 4*time.Second, 50*time.Millisecond).Should(Equal("Progressing/WaveStarted@early"))
		Expect(deliveries(ns, "cfg")[0].Status.History).To(ContainElement(And(HaveField("What", "Resumed"), HaveField("By", operator))))
		Expect(patchCount(ns)()).To(Equal(4), "resuming re-stamps nothing that has the delivered revision")
	})

	It("fails the canary on restarts of its new pods and rolls it back to its old revision with onFailure: Rollback", func() {
		ns, cm := deliveryNamespace("delivery-rollback", threeWaves(120, 0, v1alpha1.FailureRollback), world{n: 10, canary: 7, app: failsOn("broken", true)})
		before := snapshotsNamed(ns, "app-7")()
		setValue(cm, "broken")
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("Halted/WaveFailed@canary"))
		Expect(deliveries(ns, "cfg")[0].Status.Message).To(ContainSubstring("of the delivered revision restarted"))
		Eventually(snapshotsNamed(ns, "app-7"), 10*time.Second).Should(Equal(before))
		Eventually(reads(ns, "app-7"), 10*time.Second).Should(ConsistOf("info"))
		Expect(deliveries(ns, "cfg")[0].Status.RolledBack).To(BeTrue())
		Consistently(patchCount(ns), time.Second, 250*time.Millisecond).Should(Equal(2))
		Expect(patched(ns)()).To(ConsistOf("app-7"))
	})

	It("waits for approval, survives a controller restart mid-wave, and a newer change supersedes an open delivery", func() {
		var hold atomic.Bool
		ns, cm := deliveryNamespace("delivery-approve", v1alpha1.DeliverySettings{
			Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "rest", Approval: true}}, ProgressDeadlineSeconds: 120, SoakSeconds: new(int32(0)),
		}, world{n: 10, canary: 7, app: func(content string) health {
			// Held, the last content's pods do not get ready: the wave that
			// rolls them is open while the controller restarts.
			return health{unready: hold.Load() && content == "trace"}
		}})
		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(env.Configward("delivery", "wait", "configmap/cfg", "-n", ns, "--timeout", "2s")).To(And(HaveField("ExitCode", 1),
			HaveField("Stderr", ContainSubstring("waits for approval of wave rest"))), "waiting for a person is still moving, not stalled")
		Expect(env.Kubectl("", "wait", "--for=condition=Reconciling", "configdelivery/configmap-cfg-1", "-n", ns, "--timeout=10s")).To(HaveField("ExitCode", 0))
		Consistently(patchCount(ns), 2*time.Second, 500*time.Millisecond).Should(Equal(1))

		By("a newer change supersedes it: the new delivery starts again at the canary")
		setValue(cm, "trace")
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 10*time.Second).Should(Equal(2))
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(deliveries(ns, "cfg")[0].Status.State).To(Equal(v1alpha1.DeliverySuperseded))

		By("promoted, the rest rolls; the controller restarts while it does")
		hold.Store(true)
		ask(ns, "cfg", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "cfg"), 10*time.Second, 100*time.Millisecond).Should(Equal("Progressing/WaveStarted@rest"))
		Expect(stopController()).To(Succeed())
		hold.Store(false)
		startSuiteController()
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		for i := range 10 {
			Eventually(reads(ns, fmt.Sprintf("app-%d", i)), 10*time.Second).Should(ConsistOf("trace"))
		}
		// The canary's template changed twice (debug, then trace), every
		// other Deployment's once: the restart re-stamped nothing.
		generations := func() map[string]int64 {
			var list appsv1.DeploymentList
			Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			out := map[string]int64{}
			for _, d := range list.Items {
				out[d.Name] = d.Generation
			}
			return out
		}
		want := map[string]int64{}
		for i := range 10 {
			want[fmt.Sprintf("app-%d", i)] = 2
		}
		want["app-7"] = 3
		Eventually(generations, 10*time.Second).Should(Equal(want))
		Consistently(generations, 2*time.Second, 250*time.Millisecond).Should(Equal(want))
	})

	It("lets workloads that cannot show health pass without blocking, and holds a workload created during the delivery for the last wave", func() {
		ns, cm := deliveryNamespace("delivery-unverified", v1alpha1.DeliverySettings{
			Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "rest", Approval: true}}, SoakSeconds: new(int32(0)),
		}, world{n: 10, canary: 7, app: runs})
		var canary appsv1.Deployment
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-7"}, &canary)).To(Succeed())
		canary.Spec.Paused = true
		Expect(env.Client.Update(ctx, &canary)).To(Succeed())
		var other appsv1.Deployment
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-0"}, &other)).To(Succeed())
		old := other.Spec.Template.Annotations
		setValue(cm, "debug")
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.Waves[0].Health).To(ConsistOf(And(HaveField("Name", "app-7"), HaveField("State", "Unverified"),
			HaveField("Message", ContainSubstring("the Deployment is paused")))))
		Expect(d.Status.History).To(ContainElement(And(HaveField("What", "WaveHealthy"), HaveField("Message", ContainSubstring("passed without showing health")))))

		By("a Deployment created now, stamped by the webhook with the revision the others run, keeps it until the last wave")
		late := waveDeployment(ns, "late", false, cm)
		late.Spec.Template.Annotations = maps.Clone(old)
		create(late)
		Eventually(reads(ns, "late"), 10*time.Second).Should(ConsistOf("info"))
		Consistently(templateSnapshots(late), 2*time.Second).Should(Equal(old[v1alpha1.ConfigSnapshotsAnnotation]))

		By("promoted, the last wave takes it to the new content with the others")
		ask(ns, "cfg", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Eventually(reads(ns, "late"), 10*time.Second).Should(ConsistOf("debug"))
	})

	It("delivers each of two ConfigMaps a workload reads, and does not put delivery without revisions in force", func() {
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "delivery-norev"}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"controllers.configward.dev/delivery-norev": "on"}},
			Delivery:          &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "all"}}},
		}}
		create(policy)
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, policy)).To(Succeed()) })
		Eventually(func() string {
			Expect(env.Client.Get(ctx, clientKey(policy), policy)).To(Succeed())
			for _, c := range policy.Status.Conditions {
				if c.Type == "Ready" && c.ObservedGeneration == policy.Generation {
					return string(c.Status) + ": " + c.Message
				}
			}
			return ""
		}, 10*time.Second).Should(And(HavePrefix("False: "), ContainSubstring(`spec.delivery: Invalid value: "waves": delivery needs revisions`)))

		ns := policyNamespace("delivery-two", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled = true
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "rest"}}, SoakSeconds: new(int32(0))}
		})
		a, b := create1(configMap(ns, "a", "1")), create1(configMap(ns, "b", "1"))
		cluster(ns, clusterOptions{app: runs, deployments: true})
		both, other := waveDeployment(ns, "both", true, a, b), waveDeployment(ns, "other", false, a, b)
		create(both, other)
		Eventually(reads(ns, "both"), 10*time.Second).Should(HaveLen(1))
		Eventually(reads(ns, "other"), 10*time.Second).Should(HaveLen(1))
		setValue(a, "2")
		setValue(b, "2")
		Eventually(latestDelivery(ns, "a"), 30*time.Second, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Eventually(latestDelivery(ns, "b"), 30*time.Second, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		want := hashOf(a, b)
		Eventually(templateHash(both), 10*time.Second).Should(Equal(want))
		Eventually(templateHash(other), 10*time.Second).Should(Equal(want))
		Expect(templateSnapshots(other)()).To(Equal(revision.Snapshots{{Kind: refs.ConfigMap, Name: "a"}: snapshotOf(a), {Kind: refs.ConfigMap, Name: "b"}: snapshotOf(b)}.Encode()))
	})
})
