package controllers

import (
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/test/framework"
)

// A change set: configs that workloads read together, changed within one
// batch window, are delivered by one record, so no template holds one
// member's new content with another's old.

var _ = Describe("change sets", func() {
	It("delivers two ConfigMaps changed together as one: one record, one approval, and no template ever holds one's new content with the other's old", func() {
		ns := policyNamespace("changeset", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled = true
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "rest", Approval: true}},
				SoakSeconds: new(int32(0)), ProgressDeadlineSeconds: 120}
		})
		a, b := create1(configMap(ns, "a", "1")), create1(configMap(ns, "b", "1"))
		cluster(ns, clusterOptions{app: runs, deployments: true})
		names := []string{"app-0", "app-1", "app-2", "only-b"}
		for i, name := range names[:3] {
			create(waveDeployment(ns, name, i == 0, a, b))
		}
		// only-b reads b alone: it is a consumer of the set all the same.
		create(waveDeployment(ns, "only-b", false, b))
		for _, name := range names {
			Eventually(reads(ns, name), 20*time.Second).Should(HaveLen(1))
		}
		srcA, srcB := revision.Source{Kind: refs.ConfigMap, Name: "a"}, revision.Source{Kind: refs.ConfigMap, Name: "b"}
		oldA, oldB := snapshotOf(a), snapshotOf(b)

		By("every stored version of every template, watched from before the change")
		seen, stop := watchTemplates(ns)
		DeferCleanup(stop)

		changeTogether(map[*corev1.ConfigMap]string{a: "2", b: "2"})
		newA, newB := snapshotOf(a), snapshotOf(b)
		Eventually(latestDelivery(ns, "a"), 30*time.Second, 200*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		recs := deliveries(ns, "a")
		Expect(recs).To(HaveLen(1), "one record for the change set")
		Expect(deliveries(ns, "b")).To(ConsistOf(HaveField("Name", recs[0].Name)))
		Expect(recs[0].Spec.Members).To(HaveExactElements(
			And(HaveField("Kind", "ConfigMap"), HaveField("Name", "a")), And(HaveField("Kind", "ConfigMap"), HaveField("Name", "b"))))
		Expect(recs[0].Status.Members).To(HaveExactElements(
			And(HaveField("Name", "a"), HaveField("To", newA), HaveField("From", oldA)), And(HaveField("Name", "b"), HaveField("To", newB), HaveField("From", oldB))))
		Expect(recs[0].Status.Waves).To(HaveExactElements(HaveField("Workloads", HaveLen(1)), HaveField("Workloads", HaveLen(3))),
			"the canary, then app-1, app-2 and only-b")
		both := func(a, b string) string { return revision.Snapshots{srcA: a, srcB: b}.Encode() }
		Eventually(snapshotsNamed(ns, "app-0"), 10*time.Second).Should(Equal(both(newA, newB)))
		Expect(snapshotsNamed(ns, "app-1")()).To(Equal(both(oldA, oldB)))
		Expect(snapshotsNamed(ns, "only-b")()).To(Equal(revision.Snapshots{srcB: oldB}.Encode()))

		By("one promote, asked through the second member, moves every member of the set")
		res := env.Configward("delivery", "promote", "configmap/b", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(ContainSubstring(recs[0].Name))
		Eventually(latestDelivery(ns, "a"), 30*time.Second, 200*time.Millisecond).Should(HavePrefix("Succeeded/"))
		for _, name := range names[:3] {
			Eventually(snapshotsNamed(ns, name), 10*time.Second).Should(Equal(both(newA, newB)), name)
		}
		Eventually(snapshotsNamed(ns, "only-b"), 10*time.Second).Should(Equal(revision.Snapshots{srcB: newB}.Encode()))

		mixed := func(s revision.Snapshots) bool {
			_, readsA := s[srcA]
			return readsA && (s[srcA] == newA) != (s[srcB] == newB)
		}
		versions := seen()
		for _, name := range names {
			Expect(versions[name]).To(ContainElement(HaveKeyWithValue(srcB, newB)), "the watch saw %s take the new content", name)
			for _, s := range versions[name] {
				Expect(mixed(s)).To(BeFalse(), "%s's template held %s", name, s.Encode())
			}
		}
	})
})

// watchTemplates watches the Deployments of ns and keeps the
// config-snapshots annotation of every version of each template it is
// sent, in order; stop ends the watch.
func watchTemplates(ns string) (seen func() map[string][]revision.Snapshots, stop func()) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	out := map[string][]revision.Snapshots{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			snaps, err := revision.Decode(d.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation])
			mu.Lock()
			if err != nil {
				snaps = revision.Snapshots{{Kind: refs.ConfigMap, Name: fmt.Sprintf("undecodable %v", err)}: ""}
			}
			if l := out[d.Name]; len(l) == 0 || l[len(l)-1].Encode() != snaps.Encode() {
				out[d.Name] = append(l, snaps)
			}
			mu.Unlock()
		}
	}()
	return func() map[string][]revision.Snapshots {
			mu.Lock()
			defer mu.Unlock()
			c := make(map[string][]revision.Snapshots, len(out))
			for k, v := range out {
				c[k] = append([]revision.Snapshots(nil), v...)
			}
			return c
		}, func() {
			w.Stop()
			<-done
		}
}

var _ = Describe("change sets that fail", func() {
	It("rolls every member of a failed set back at once, and a halt holds them all", func() {
		ns := policyNamespace("changeset-rollback", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled = true
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "rest"}},
				SoakSeconds: new(int32(0)), ProgressDeadlineSeconds: 120, OnFailure: v1alpha1.FailureRollback}
		})
		// The app reads a (its first volume): "broken" crashes it.
		a, b := create1(configMap(ns, "a", "1")), create1(configMap(ns, "b", "1"))
		cluster(ns, clusterOptions{app: failsOn("broken", true), deployments: true})
		create(waveDeployment(ns, "app-0", true, a, b), waveDeployment(ns, "app-1", false, a, b))
		for _, name := range []string{"app-0", "app-1"} {
			Eventually(reads(ns, name), 20*time.Second).Should(HaveLen(1))
		}
		srcA, srcB := revision.Source{Kind: refs.ConfigMap, Name: "a"}, revision.Source{Kind: refs.ConfigMap, Name: "b"}
		old := revision.Snapshots{srcA: snapshotOf(a), srcB: snapshotOf(b)}.Encode()
		seen, stop := watchTemplates(ns)
		DeferCleanup(stop)

		changeTogether(map[*corev1.ConfigMap]string{a: "broken", b: "2"})
		Eventually(latestDelivery(ns, "b"), 30*time.Second, 200*time.Millisecond).Should(Equal("Halted/WaveFailed@canary"))
		rec := deliveries(ns, "b")[0]
		Expect(rec.Spec.Members).To(HaveLen(2))
		Eventually(func() float64 {
			return framework.Metric("configward_deliveries", map[string]string{"namespace": ns, "state": string(v1alpha1.DeliveryHalted)})
		}, 5*time.Second).Should(BeEquivalentTo(1), "configward_deliveries counts the set's one record Halted")
		Expect(rec.Status.RolledBack).To(BeTrue())
		Eventually(snapshotsNamed(ns, "app-0"), 10*time.Second).Should(Equal(old), "the canary goes back on both members")
		Consistently(snapshotsNamed(ns, "app-1"), 2*time.Second, 250*time.Millisecond).Should(Equal(old), "the rest never moved")
		Eventually(events(ns, "a", "DeliveryHalted"), 10*time.Second).Should(HaveLen(1), "the Event goes on every member")
		Eventually(events(ns, "b", "DeliveryHalted"), 10*time.Second).Should(HaveLen(1))

		newA, newB := snapshotOf(a), snapshotOf(b)
		for _, s := range seen()["app-0"] {
			_, readsA := s[srcA]
			Expect(readsA && (s[srcA] == newA) != (s[srcB] == newB)).To(BeFalse(), "app-0's template held %s", s.Encode())
		}
		Expect(seen()["app-0"]).To(ContainElement(HaveKeyWithValue(srcB, newB)), "the canary took the set before it failed")
	})
})

var _ = Describe("declared config sets", func() {
	It("delivers a ConfigSet's version only once every member carries it, and stops one whose member never arrives", func() {
		ns := policyNamespace("configset", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled = true
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Selector: canaryWave}, {Name: "rest"}},
				SoakSeconds: new(int32(0)), ProgressDeadlineSeconds: 120}
		})
		a, b := configMap(ns, "a", "1"), configMap(ns, "b", "1")
		a.Annotations = map[string]string{v1alpha1.ConfigSetVersionAnnotation: "v1"}
		b.Annotations = map[string]string{v1alpha1.ConfigSetVersionAnnotation: "v1"}
		a, b = create1(a), create1(b)
		cluster(ns, clusterOptions{app: runs, deployments: true})
		create(waveDeployment(ns, "app-0", true, a, b), waveDeployment(ns, "app-1", false, a, b))
		for _, name := range []string{"app-0", "app-1"} {
			Eventually(reads(ns, name), 20*time.Second).Should(HaveLen(1))
		}
		set := &v1alpha1.ConfigSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"}, Spec: v1alpha1.ConfigSetSpec{
			Version: "v1", Members: []v1alpha1.ConfigSetMember{{Kind: "ConfigMap", Name: "a"}, {Kind: "ConfigMap", Name: "b"}}}}
		create(set)
		By("a version every member carries is delivered, and a pipeline waits on it")
		Expect(env.Kubectl("", "wait", "--for=condition=Ready", "configset/checkout", "-n", ns, "--timeout=60s")).To(HaveField("ExitCode", 0))
		Expect(env.Configward("delivery", "wait", "configset/checkout", "-n", ns, "--timeout", "10s")).To(HaveField("ExitCode", 0))
		Expect(deliveries(ns, "a")).To(ConsistOf(HaveField("Name", "configset-checkout-1")))
		Eventually(setsCounted(ns, v1alpha1.ConditionReady), 5*time.Second).Should(BeEquivalentTo(1), "configward_config_sets counts it Ready")

		By("the pipeline writes v2: the set, then a; nothing moves until b carries v2")
		srcA, srcB := revision.Source{Kind: refs.ConfigMap, Name: "a"}, revision.Source{Kind: refs.ConfigMap, Name: "b"}
		oldA, oldB := snapshotOf(a), snapshotOf(b)
		setVersion(set, "v2", nil)
		writeVersioned(a, "2", "v2")
		newA := snapshotOf(a)
		Eventually(configSetCondition(set, v1alpha1.ConditionReconciling), 10*time.Second).Should(And(HavePrefix("True/WaitingForMembers:"), ContainSubstring("ConfigMap/b")))
		Expect(statusTable(ns)).To(And(MatchRegexp(`ConfigSet/checkout +v2 +Reconciling +WaitingForMembers`), MatchRegexp(`ConfigSet/checkout: .*ConfigMap/b`)),
			"configward status shows a set that waits for members, which no delivery shows yet")
		Consistently(func() []string { return names(deliveries(ns, "a")) }, 5*time.Second, 500*time.Millisecond).Should(ConsistOf("configset-checkout-1"),
			"a's change alone starts no delivery")
		Expect(snapshotsNamed(ns, "app-0")()).To(Equal(revision.Snapshots{srcA: oldA, srcB: oldB}.Encode()))
		waiting := make(chan framework.KubectlResult, 1)
		go func() {
			waiting <- env.Configward("delivery", "wait", "configset/checkout", "-n", ns, "--timeout", "2m")
		}()
		writeVersioned(b, "2", "v2")
		newB := snapshotOf(b)
		Eventually(waiting, time.Minute).Should(Receive(And(HaveField("ExitCode", 0), HaveField("Stdout", ContainSubstring("version v2 is delivered")))))
		recs := deliveries(ns, "b")
		Expect(names(recs)).To(Equal([]string{"configset-checkout-1", "configset-checkout-2"}))
		Expect(recs[1].Spec.ConfigSet).To(Equal(&v1alpha1.ConfigSetVersion{Name: "checkout", Version: "v2", Generation: 2}))
		for _, name := range []string{"app-0", "app-1"} {
			Expect(snapshotsNamed(ns, name)()).To(Equal(revision.Snapshots{srcA: newA, srcB: newB}.Encode()), name)
		}

		By("a version whose member never arrives stops at its timeout, nothing of it delivered, and stays stopped")
		setVersion(set, "v3", new(int32(3)))
		writeVersioned(a, "3", "v3")
		Eventually(configSetCondition(set, v1alpha1.ConditionStalled), 15*time.Second).Should(And(HavePrefix("True/TimedOut:"), ContainSubstring("ConfigMap/b did not carry version v3")))
		res := env.Configward("delivery", "wait", "configset/checkout", "-n", ns, "--timeout", "10s")
		Expect(res).To(And(HaveField("ExitCode", 3), HaveField("Stderr", ContainSubstring("stopped (TimedOut)"))))
		writeVersioned(b, "3", "v3")
		Consistently(func() []string { return names(deliveries(ns, "b")) }, 4*time.Second, 500*time.Millisecond).Should(HaveLen(2), "a member that arrives after the timeout delivers nothing")
		Expect(configSetCondition(set, v1alpha1.ConditionStalled)()).To(HavePrefix("True/TimedOut:"))
		Eventually(setsCounted(ns, v1alpha1.ConditionStalled), 5*time.Second).Should(BeEquivalentTo(1), "configward_config_sets counts it Stalled")
		Expect(statusTable(ns)).To(MatchRegexp(`ConfigSet/checkout +v3 +Stalled +TimedOut`))
		Expect(setsCounted(ns, v1alpha1.ConditionReady)()).To(BeZero())
		for _, name := range []string{"app-0", "app-1"} {
			Expect(snapshotsNamed(ns, name)()).To(Equal(revision.Snapshots{srcA: newA, srcB: newB}.Encode()), name)
		}
	})
})

// hotPair creates a namespace where ConfigPolicy name turns delivery on
// with settings, hot ConfigMaps flags ("info") and limits ("10"), and
// Deployment a, whose two pods (one in the canary, one in the rest) mount
// both and run a; it returns once they are ready.
func hotPair(name string, settings v1alpha1.DeliverySettings, a app) (ns string, flags, limits *corev1.ConfigMap) {
	ns = policyNamespace(name, func(s *v1alpha1.ConfigPolicySpec) { s.Revisions.Enabled, s.Delivery = true, &settings })
	awaitHotChannels(ns)
	flags, limits = create1(hotConfigMap(ns, "flags", "info")), create1(hotConfigMap(ns, "limits", "10"))
	Eventually(channelValues(ns, "limits"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "10", "rest": "10"}))
	Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
	cluster(ns, clusterOptions{app: a})
	hotWorkloadOf(ns, "a", refs.ConfigMap, []string{"flags", "limits"}, "canary", "rest")
	Eventually(readyPods(ns), 10*time.Second).Should(Equal(2))
	return ns, flags, limits
}

var _ = Describe("a change set of hot config", func() {
	It("delivers two hot ConfigMaps a workload mounts, changed together, as one: one record, one approval for both", func() {
		ns, flags, limits := hotPair("changeset-hot", hotWaves(true, 60, v1alpha1.FailureHalt), runs)

		changeTogether(map[*corev1.ConfigMap]string{flags: "debug", limits: "20"})
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(names(deliveries(ns, "limits"))).To(Equal([]string{"configmap-flags-1"}), "one record delivers both")
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))
		Expect(channelValues(ns, "limits")()).To(Equal(map[string]string{"canary": "20", "rest": "10"}))

		ask(ns, "limits", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))
		Expect(channelValues(ns, "limits")()).To(Equal(map[string]string{"canary": "20", "rest": "20"}))
	})

	It("rolls every member's channel of the failed wave back at once, and the rest never see either", func() {
		// The application reads flags, its first volume, and does not come
		// up on "broken".
		ns, flags, limits := hotPair("changeset-hot-rollback", hotWaves(false, 4, v1alpha1.FailureRollback), failsOn("broken", false))

		changeTogether(map[*corev1.ConfigMap]string{flags: "broken", limits: "20"})
		Eventually(latestDelivery(ns, "flags"), 30*time.Second, 100*time.Millisecond).Should(Equal("Halted/ProgressDeadlineExceeded@canary"))
		rec := deliveries(ns, "limits")[0]
		Expect(rec.Spec.Members).To(HaveLen(2))
		Expect(rec.Status.RolledBack).To(BeTrue())
		Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
		Eventually(channelValues(ns, "limits"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "10", "rest": "10"}),
			"the member the canary did not fail on is rolled back with it")
	})
})

var _ = Describe("a declared set of hot config", func() {
	It("is delivered as one through its members' channels: one record, one approval, and each wave's channels move together", func() {
		ns := policyNamespace("configset-hot", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled, s.Delivery = true, new(hotWaves(true, 60, v1alpha1.FailureHalt))
		})
		awaitHotChannels(ns)
		versioned := func(name, value string) *corev1.ConfigMap {
			cm := hotConfigMap(ns, name, value)
			cm.Annotations[v1alpha1.ConfigSetVersionAnnotation] = "v1"
			return create1(cm)
		}
		flags, limits := versioned("flags", "info"), versioned("limits", "10")
		Eventually(channelValues(ns, "flags"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
		Eventually(channelValues(ns, "limits"), 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"canary": "10", "rest": "10"}))
		cluster(ns, clusterOptions{app: runs})
		hotWorkloadOf(ns, "a", refs.ConfigMap, []string{"flags", "limits"}, "canary", "rest")
		hotWorkloadOf(ns, "b", refs.ConfigMap, []string{"limits"}, "rest")
		Eventually(readyPods(ns), 10*time.Second).Should(Equal(3))
		set := &v1alpha1.ConfigSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pair"}, Spec: v1alpha1.ConfigSetSpec{
			Version: "v1", Members: []v1alpha1.ConfigSetMember{{Kind: "ConfigMap", Name: "flags"}, {Kind: "ConfigMap", Name: "limits"}}}}
		create(set)
		Eventually(configSetCondition(set, v1alpha1.ConditionReady), 10*time.Second).Should(HavePrefix("True/NothingToDeliver:"),
			"every channel holds the version's content")

		By("the pipeline writes v2: the set, then flags; no channel moves until limits carries v2")
		setVersion(set, "v2", nil)
		writeVersioned(flags, "debug", "v2")
		Consistently(func() []string { return names(deliveries(ns, "flags")) }, 3*time.Second, 250*time.Millisecond).Should(BeEmpty(),
			"a hot member's change alone starts no delivery")
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "info", "rest": "info"}))
		writeVersioned(limits, "20", "v2")

		By("one record delivers both to the canary's channels, and the rest waits for one approval")
		Eventually(latestDelivery(ns, "flags"), 20*time.Second, 100*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		recs := deliveries(ns, "limits")
		Expect(names(recs)).To(Equal([]string{"configset-pair-2"}))
		Expect(names(deliveries(ns, "flags"))).To(Equal(names(recs)), "the record of both members")
		rec := recs[0]
		Expect(rec.Spec.Hot).To(BeTrue())
		Expect(rec.Status.Members).To(HaveLen(2))
		Expect(rec.Status.Waves[0].Workloads).To(ConsistOf(HaveField("Name", "a")))
		Expect(rec.Status.Waves[1].Workloads).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "b")))
		Expect(rec.Status.Waves[1].Froms).To(And(ContainSubstring("ConfigMap/flags=flags-"), ContainSubstring("ConfigMap/limits=limits-")))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))
		Expect(channelValues(ns, "limits")()).To(Equal(map[string]string{"canary": "20", "rest": "10"}))
		Consistently(func() []string {
			return []string{channelValues(ns, "flags")()["rest"], channelValues(ns, "limits")()["rest"]}
		}, 2*time.Second, 250*time.Millisecond).
			Should(Equal([]string{"info", "10"}), "the rest waits for a person")
		Expect(statusTable(ns)).To(ContainSubstring("ConfigMap/flags+ConfigMap/limits"), "configward status names the set's members")

		ask(ns, "flags", v1alpha1.ActionPromote, operator)
		Eventually(latestDelivery(ns, "limits"), 20*time.Second, 100*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelValues(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))
		Expect(channelValues(ns, "limits")()).To(Equal(map[string]string{"canary": "20", "rest": "20"}))
		Expect(env.Kubectl("", "wait", "--for=condition=Ready", "configset/pair", "-n", ns, "--timeout=30s")).To(HaveField("ExitCode", 0))
		Expect(env.Configward("delivery", "wait", "configset/pair", "-n", ns, "--timeout", "10s")).To(And(HaveField("ExitCode", 0), HaveField("Stdout", ContainSubstring("version v2 is delivered"))))
	})
})

var _ = Describe("a config set whose members cannot move together", func() {
	It("is looked at again when a ConfigPolicy change lets them, without a write of the set", func() {
		ns := policyNamespace("configset-policy", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled = true
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "all"}}, SoakSeconds: new(int32(0))}
		})
		versioned := map[string]string{v1alpha1.ConfigSetVersionAnnotation: "v1"}
		a := configMap(ns, "a", "1")
		a.Annotations = versioned
		create(a, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b", Annotations: versioned}, Data: map[string][]byte{configKey: []byte("1")}})
		set := &v1alpha1.ConfigSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys"}, Spec: v1alpha1.ConfigSetSpec{
			Version: "v1", Members: []v1alpha1.ConfigSetMember{{Kind: "ConfigMap", Name: "a"}, {Kind: "Secret", Name: "b"}}}}
		create(set)
		Eventually(configSetCondition(set, v1alpha1.ConditionStalled), 10*time.Second).Should(And(HavePrefix("True/MembersIncompatible:"), ContainSubstring("Secret/b")))

		setPolicy("configset-policy", func(s *v1alpha1.ConfigPolicySpec) { s.Revisions.Secrets = true })
		Eventually(configSetCondition(set, v1alpha1.ConditionReady), 10*time.Second).Should(HavePrefix("True/"),
			"the set is judged again with the policy that keeps Secrets")
	})
})

var _ = Describe("config sets that claim one config", func() {
	It("stalls the newer of two sets that list one config, whichever webhook replica let both in", func() {
		ns := policyNamespace("configset-claims", func(s *v1alpha1.ConfigPolicySpec) {
			s.Revisions.Enabled = true
			s.Delivery = &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "all"}}}
		})
		create1(configMap(ns, "a", "1"))
		// This tier runs no webhook: both are stored, as two replicas
		// judging at once could let them be.
		first := &v1alpha1.ConfigSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}, Spec: v1alpha1.ConfigSetSpec{
			Version: "v1", Members: []v1alpha1.ConfigSetMember{{Kind: "ConfigMap", Name: "a"}}}}
		create(first)
		afterCreationSecond(first)
		second := first.DeepCopy()
		second.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "second"}
		create(second)
		Eventually(configSetCondition(second, v1alpha1.ConditionStalled), 10*time.Second).Should(
			Equal("True/MemberClaimed: a config belongs to one set, and these belong to an older one: ConfigMap/a (ConfigSet first). Take them out of one of the sets."))
		Eventually(configSetCondition(first, v1alpha1.ConditionStalled), 10*time.Second).Should(HavePrefix("False/"))
	})
})

// changeTogether writes each ConfigMap's value at once, in parallel, as
// one `kubectl apply` of both does: well within the batch window however
// loaded the machine is.
func changeTogether(values map[*corev1.ConfigMap]string) {
	var wg sync.WaitGroup
	for cm, v := range values {
		wg.Go(func() {
			defer GinkgoRecover()
			setValue(cm, v)
		})
	}
	wg.Wait()
}

// names are the names of recs.
func names(recs []v1alpha1.ConfigDelivery) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Name)
	}
	return out
}

// setVersion writes a new version (and timeout) of set, as a pipeline does.
func setVersion(set *v1alpha1.ConfigSet, version string, timeout *int32) {
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), set)).To(Succeed())
	set.Spec.Version, set.Spec.TimeoutSeconds = version, timeout
	Expect(env.Client.Update(ctx, set)).To(Succeed())
}

// writeVersioned writes value into cm with the set version it belongs to.
func writeVersioned(cm *corev1.ConfigMap, value, version string) {
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	cm.Data[configKey] = value
	cm.Annotations[v1alpha1.ConfigSetVersionAnnotation] = version
	Expect(env.Client.Update(ctx, cm)).To(Succeed())
}

// configSetCondition is "Status/Reason: message" of condition typ of set, for
// its current generation ("" until the status describes it).
func configSetCondition(set *v1alpha1.ConfigSet, typ string) func() string {
	return func() string {
		var got v1alpha1.ConfigSet
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), &got)).To(Succeed())
		if got.Status.ObservedGeneration != got.Generation {
			return ""
		}
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}
}

// setsCounted is configward_config_sets of ns for condition, as the
// suite's controller publishes it.
func setsCounted(ns, condition string) func() float64 {
	return func() float64 {
		return framework.Metric("configward_config_sets", map[string]string{"namespace": ns, "condition": condition})
	}
}
