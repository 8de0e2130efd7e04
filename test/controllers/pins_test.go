package controllers

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

// When a wave starts, the controller re-stamps its workloads at once, and
// the webhook judges those writes with whatever its own cache holds: a
// replica whose ConfigDelivery watch is a moment (or, after an API server
// restart, many seconds) behind still sees the wave waiting and would pin
// the workload back to its old snapshot. The stamp's sources then read the
// record from the API server instead.
var _ = Describe("the delivery pins of a stamp, its cache behind the record", func() {
	It("judges a write naming the delivered snapshot by the record on the API server", func() {
		// The suite's controller would move the hand-written record on.
		Expect(stopController()).To(Succeed())
		DeferCleanup(startSuiteController)
		ctx := context.Background()
		ns := namespace(nil)
		cm := configMap(ns, "shared", "level: debug")
		create(cm)
		// The revision the rest wave runs: a snapshot of the earlier content.
		const old = "configmap-shared-old"
		create(revision.ConfigMapSnapshot(configMap(ns, "shared", "level: info"), old))
		rec := &v1alpha1.ConfigDelivery{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmap-shared-1"},
			Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "shared"}, Sequence: 1, Policy: "pins",
				Settings: v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary", Percent: new(int32(10))}, {Name: "rest"}}}},
		}
		create(rec)

		By("a cache that syncs while the canary wave runs, then stops: a replica whose watch is behind")
		opts := inventory.CacheOptions()
		opts.Scheme = scheme.Scheme()
		behind, err := cache.New(env.Config, opts)
		Expect(err).NotTo(HaveOccurred())
		inv, err := inventory.Start(ctx, behind, workload.Builtin(), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(deliveryrecords.Index(ctx, behind)).To(Succeed())
		_, err = behind.GetInformer(ctx, &v1alpha1.ConfigDelivery{})
		Expect(err).NotTo(HaveOccurred())

		key := []byte("pins-spec-key")
		src := revision.Source{Kind: refs.ConfigMap, Name: "shared"}
		started := metav1.Now()
		rec.Status = v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryProgressing, From: old, CurrentWave: "canary", Waves: []v1alpha1.WaveStatus{
			{Name: "canary", Workloads: []v1alpha1.DeliveryTarget{{Kind: "Deployment", Name: "canary-app", From: old}}, StartedAt: &started},
			{Name: "rest", Workloads: []v1alpha1.DeliveryTarget{{Kind: "Deployment", Name: "app", From: old}}},
		}}
		stop, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = behind.Start(stop) }()
		DeferCleanup(func() { cancel(); <-stopped })
		Expect(behind.WaitForCacheSync(ctx)).To(BeTrue())
		var current string
		Eventually(func() string {
			o, err := inv.Get(ctx, refs.ConfigMap, ns, "shared")
			Expect(err).NotTo(HaveOccurred())
			current = inv.SnapshotName(key, o)
			return current
		}).ShouldNot(BeEmpty())
		Eventually(func() (bool, error) { return inv.SnapshotWritten(ctx, ns, src, old) }).Should(BeTrue())
		rec.Status.To = current
		Expect(env.Client.Status().Update(ctx, rec)).To(Succeed())
		Eventually(func() string {
			var seen v1alpha1.ConfigDelivery
			Expect(behind.Get(ctx, clientKey(rec), &seen)).To(Succeed())
			return seen.Status.CurrentWave
		}).Should(Equal("canary"))
		cancel()
		<-stopped

		By("the wave rest starts on the API server only")
		rec.Status.Waves[1].StartedAt, rec.Status.CurrentWave = new(metav1.Now()), "rest"
		Expect(env.Client.Status().Update(ctx, rec)).To(Succeed())

		d := deployment(ns, "app", "shared")
		w, _ := workload.Builtin().For(d)
		scope := configpolicy.NamespacePolicy{Rollouts: true, Revisions: true, Delivery: &rec.Spec.Settings}
		gather := func(records *deliveryrecords.Reader, stored, written revision.Snapshots) stamp.Facts {
			storedStamp, writtenStamp := workload.Stamp{Snapshots: stored.Encode()}, workload.Stamp{Snapshots: written.Encode()}
			facts, err := stamp.Sources{Inventory: inv, Records: records}.Gather(ctx, stamp.Subject{Workload: w, Spec: &d.Spec.Template.Spec, Policy: scope, Key: key,
				Stored: &storedStamp, Written: &writtenStamp})
			Expect(err).NotTo(HaveOccurred())
			return facts
		}
		stored, written := revision.Snapshots{src: old}, revision.Snapshots{src: current}
		facts := gather(&deliveryrecords.Reader{Cache: behind}, stored, written)
		Expect(facts.Snapshots).To(Equal(revision.Snapshots{src: old}), "the stopped cache still has the wave waiting")
		Expect(facts.Reached).To(BeFalse())

		withLive := &deliveryrecords.Reader{Cache: behind, Live: env.Client}
		facts = gather(withLive, stored, written)
		Expect(facts.Snapshots).To(Equal(revision.Snapshots{src: current}), "the record on the API server has the wave started: the delivered content")
		Expect(facts.Reached).To(BeTrue(), "the wave that started reached it: its template must name the delivered snapshot exactly")

		By("a write that keeps the old snapshot is judged by the cache alone")
		facts = gather(withLive, stored, stored)
		Expect(facts.Snapshots).To(Equal(revision.Snapshots{src: old}))
	})
})
