package controllers

import (
	"fmt"
	"sync"

	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
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

		setValue(a, "2")
		setValue(b, "2")
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
