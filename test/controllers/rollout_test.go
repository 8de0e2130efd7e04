package controllers

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
)

var _ = Describe("the rollout controller", func() {
	It("stamps the consumers of a changed ConfigMap with its new hash, and its Event names the change", func() {
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		d := deployment(ns, "web", "cfg")
		create(cm)
		// The controller knows which came first only to the second: created
		// in a later one, the Deployment's pods started with the ConfigMap,
		// whatever order the informers deliver the two in.
		afterCreationSecond(cm)
		create(d)
		// Installing configward restarts nothing: without a change, an
		// unstamped workload stays unstamped.
		Consistently(templateHash(d), 2*batchWindow).Should(BeEmpty())

		setValue(cm, "port: 81")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
		Eventually(events(ns, "web", "ConfigChanged"), 5*time.Second).Should(ConsistOf(
			"ConfigMap/cfg changed: updated configward.dev/config-hash to " + hashOf(cm) + ", which rolls the pods through the workload's own update strategy"))

		By("a change back rolls it again, to the hash of the content it has now")
		setValue(cm, "port: 80")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
	})

	It("names the change that made a hash stale even when the workload's own event is reconciled first", func() {
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		create(cm)
		// Stamped as a webhook that had not seen the latest content would
		// have: its create is reconciled at once, before the ConfigMap's
		// change below is logged.
		d := deployment(ns, "web", "cfg")
		d.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: "hmac-sha256:an-older-config"}
		create(d)
		setValue(cm, "port: 81")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
		Eventually(events(ns, "web", "ConfigChanged"), 5*time.Second).Should(ConsistOf(
			"ConfigMap/cfg changed: updated configward.dev/config-hash to " + hashOf(cm) + ", which rolls the pods through the workload's own update strategy"))
	})

	// A workload configward never stamped rolls only for a change the log
	// has (installing configward restarts nothing). The log and the
	// controller's own watch of the ConfigMap are two handlers of one
	// informer; with no batch window the look can come before the log.
	It("rolls every workload it never stamped on the first change, with no batch window", func() {
		Expect(stopController()).To(Succeed())
		DeferCleanup(startSuiteController)
		stop, err := env.StartController(manager.Controller{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stop)
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		create(cm)
		afterCreationSecond(cm)
		var ds []*appsv1.Deployment
		for i := range 20 {
			d := deployment(ns, fmt.Sprintf("web-%02d", i), "cfg")
			create(d)
			ds = append(ds, d)
		}
		Consistently(templateHash(ds[len(ds)-1]), time.Second).Should(BeEmpty(), "installing configward restarts nothing")
		setValue(cm, "port: 81")
		for _, d := range ds {
			Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)), "Deployment %s", d.Name)
		}
	})

	It("names a change made while it waited to lead: the standby that takes over logged it", func() {
		Expect(stopController()).To(Succeed())
		DeferCleanup(startSuiteController)
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		create(cm)
		d := deployment(ns, "web", "cfg")
		d.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: hashOf(cm)}
		create(d)
		// Another replica leads: this one watches and waits.
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configward-controller"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
				AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}}
		create(lease)
		stop, err := env.StartController(manager.Controller{RolloutBatchWindow: batchWindow,
			LeaderElect: true, LeaderElectionNamespace: ns, LeaderElectionID: lease.Name})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stop)

		setValue(cm, "port: 81")
		Consistently(templateHash(d), 2*batchWindow).ShouldNot(Equal(hashOf(cm)), "a standby rolls nothing")
		By("the leader goes away; the standby takes over")
		Expect(env.Client.Delete(ctx, lease)).To(Succeed())
		Eventually(templateHash(d), 20*time.Second).Should(Equal(hashOf(cm)))
		Eventually(events(ns, "web", "ConfigChanged"), 5*time.Second).Should(ConsistOf(
			"ConfigMap/cfg changed: updated configward.dev/config-hash to " + hashOf(cm) + ", which rolls the pods through the workload's own update strategy"))
	})

	It("leaves an opted-out workload's template alone", func() {
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		d := deployment(ns, "web", "cfg")
		d.Annotations = map[string]string{v1alpha1.RolloutAnnotation: v1alpha1.RolloutDisabled}
		create(cm, d)
		setValue(cm, "port: 81")
		Consistently(templateHash(d), 3*batchWindow).Should(BeEmpty())
	})

	It("stamps a paused Deployment and says its pods are not replaced", func() {
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		d := deployment(ns, "web", "cfg")
		d.Spec.Paused = true
		create(cm, d)
		setValue(cm, "port: 81")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
		// The ConfigMap's creation, a moment before the Deployment's, may
		// count as a change of it too, stamped and said first: what this
		// says is that the last change is stamped and said.
		Eventually(events(ns, "web", "ConfigChangedNotRolled"), 5*time.Second).Should(ContainElement(
			"ConfigMap/cfg changed: updated configward.dev/config-hash to " + hashOf(cm) +
				", but the Deployment is paused: running pods keep the old config until it is resumed (kubectl rollout resume)"))
	})

	It("never changes a Job's template, and says a new Job is needed", func() {
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		tpl := podTemplate("job", "cfg")
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"}, Spec: batchv1.JobSpec{Template: tpl}}
		create(cm, job)
		setValue(cm, "port: 81")
		Eventually(events(ns, "job", "ConfigChangedNotRolled"), 5*time.Second).Should(ConsistOf(
			"ConfigMap/cfg changed, but a Job's pod template cannot change: running pods keep the old config and a new Job is needed to use the new one"))
		var got batchv1.Job
		Expect(env.Client.Get(ctx, clientKey(job), &got)).To(Succeed())
		Expect(got.Spec.Template.Annotations).NotTo(HaveKey(v1alpha1.ConfigHashAnnotation))
	})

	It("never patches a ReplicaSet another workload controls: its owner is rolled", func() {
		ns := namespace(nil)
		cm := configMap(ns, "cfg", "port: 80")
		d := deployment(ns, "web", "cfg")
		create(cm, d)
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: d.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: podTemplate("web", "cfg")},
		}
		create(rs)
		setValue(cm, "port: 81")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
		var got appsv1.ReplicaSet
		Consistently(func() map[string]string {
			Expect(env.Client.Get(ctx, clientKey(rs), &got)).To(Succeed())
			return got.Spec.Template.Annotations
		}, 3*batchWindow).ShouldNot(HaveKey(v1alpha1.ConfigHashAnnotation))
	})
})
