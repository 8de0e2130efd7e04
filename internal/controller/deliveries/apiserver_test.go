package deliveries_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// The delivery controller against kube-apiserver and etcd alone (see
// framework.ControllerSuite), with the rollout controller beside it as in
// the process: each action a look at a config can take (delivery's what)
// through the API server. What a step decides is internal/delivery's,
// tested there; the behaviour of whole deliveries is test/controllers'.

const window = 300 * time.Millisecond

var suite = framework.NewControllerSuite(manager.Controller{RolloutBatchWindow: window})

func TestAgainstAPIServer(t *testing.T) {
	suite.Run(t, "the delivery controller against kube-apiserver and etcd")
}

var ctx = context.Background()

// deliveryNamespace is a namespace whose policy keeps revisions and
// delivers in two waves, canary (workloads labelled wave=canary) and rest,
// which waits for approval, with ConfigMap cfg (level: info) read by
// Deployments canary and app, stamped with its revision as the webhook
// would have. It returns the namespace and the ConfigMap.
func deliveryNamespace(name string) (string, *corev1.ConfigMap) {
	ns := suite.PolicyNamespace(name, func(s *v1alpha1.ConfigPolicySpec) {
		s.Revisions.Enabled = true
		s.Delivery = &v1alpha1.DeliverySettings{ProgressDeadlineSeconds: 600, SoakSeconds: new(int32(0)), Waves: []v1alpha1.Wave{
			{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"wave": "canary"}}},
			{Name: "rest", Approval: true},
		}}
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"level": "info"}}
	suite.Create(cm)
	for _, name := range []string{"canary", "app"} {
		suite.Create(deployment(ns, name, suite.HashOf(cm), suite.SnapshotOf(cm)))
	}
	return ns, cm
}

// deployment reads ConfigMap cfg through envFrom, its template stamped
// with hash and snapshot; canary is in the canary wave.
func deployment(ns, name, hash, snapshot string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	if name == "canary" {
		labels["wave"] = "canary"
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}, Annotations: map[string]string{
					v1alpha1.ConfigHashAnnotation: hash, v1alpha1.ConfigSnapshotsAnnotation: "ConfigMap/cfg=" + snapshot}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}},
			}},
	}
}

// rolledOut writes the status of Deployment name as its controller would
// once its one replica is rolled out (no pod is written: the gate counts
// none).
func rolledOut(ns, name string) {
	var d appsv1.Deployment
	Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	Expect(suite.Env.Client.Status().Update(ctx, &d)).To(Succeed())
}

// setLevel changes cfg's one value.
func setLevel(cm *corev1.ConfigMap, level string) {
	Expect(suite.Env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	cm.Data["level"] = level
	Expect(suite.Env.Client.Update(ctx, cm)).To(Succeed())
}

// record reads the delivery record named name in ns.
func record(ns, name string) func() *v1alpha1.ConfigDelivery {
	return func() *v1alpha1.ConfigDelivery {
		var rec v1alpha1.ConfigDelivery
		if err := suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rec); err != nil {
			return nil
		}
		return &rec
	}
}

// state says where a record stands: "State/Reason@CurrentWave".
func state(ns, name string) func() string {
	get := record(ns, name)
	return func() string {
		rec := get()
		if rec == nil {
			return "(none)"
		}
		return fmt.Sprintf("%s/%s@%s", rec.Status.State, rec.Status.Reason, rec.Status.CurrentWave)
	}
}

// templateSnapshot is the snapshot of cfg Deployment name's template names.
func templateSnapshot(ns, name string) func() string {
	return func() string {
		var d appsv1.Deployment
		Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		return d.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
	}
}

var _ = Describe("the delivery controller", func() {
	It("starts a delivery of a change, places a record its creator left unplaced, superseding the open one, and cancels it when delivery is turned off", func() {
		ns, cm := deliveryNamespace("deliveries-actions")
		old := suite.SnapshotOf(cm)
		// The rollout controller writes the snapshot the templates name.
		Eventually(func() error {
			return suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, &corev1.ConfigMap{})
		}, 10*time.Second).Should(Succeed())

		By("start: a change starts the first delivery, whose canary takes it and whose rest waits for approval")
		setLevel(cm, "debug")
		v2 := suite.SnapshotOf(cm)
		Eventually(state(ns, "configmap-cfg-1"), 10*time.Second).Should(Equal("Progressing/WaveStarted@canary"))
		Eventually(templateSnapshot(ns, "canary"), 10*time.Second).Should(Equal("ConfigMap/cfg=" + v2))
		rolledOut(ns, "canary")
		Eventually(state(ns, "configmap-cfg-1"), 10*time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Consistently(templateSnapshot(ns, "app"), 2*window).Should(Equal("ConfigMap/cfg=" + old))
		first := record(ns, "configmap-cfg-1")()
		Expect(first.Status.To).To(Equal(v2))
		Expect(first.Status.Waves).To(HaveLen(2))
		Expect(first.Status.Waves[0].Workloads).To(ConsistOf(v1alpha1.DeliveryTarget{Kind: "Deployment", Name: "canary", From: old}))
		Expect(first.Status.Waves[1].Workloads).To(ConsistOf(v1alpha1.DeliveryTarget{Kind: "Deployment", Name: "app", From: old}))

		By("place: a record whose creator stopped before its placement is placed by the next leader, and the open one ends")
		suite.StopController()
		DeferCleanup(suite.StartController)
		unplaced := &v1alpha1.ConfigDelivery{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: delivery.RecordName(delivery.Delivers(first), 2)},
			Spec:       first.Spec,
		}
		unplaced.Spec.Sequence, unplaced.Spec.Request = 2, nil
		suite.Create(unplaced)
		suite.StartController()
		Eventually(state(ns, "configmap-cfg-1"), 10*time.Second).Should(Equal("Superseded/NewerContent@rest"))
		Eventually(state(ns, "configmap-cfg-2"), 10*time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"),
			"placed, its canary (already on the delivered revision) healthy at once")
		placed := record(ns, "configmap-cfg-2")()
		Expect(placed.Status.To).To(Equal(v2))
		Expect(placed.Status.Waves[1].Workloads).To(ConsistOf(v1alpha1.DeliveryTarget{Kind: "Deployment", Name: "app", From: old}),
			"the rest is placed with the revision it runs")
		Consistently(templateSnapshot(ns, "app"), 2*window).Should(Equal("ConfigMap/cfg=" + old))

		By("cancel: delivery turned off ends the waiting delivery at once, and plain rollouts take the rest to the content of now")
		var policy v1alpha1.ConfigPolicy
		Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Name: "deliveries-actions"}, &policy)).To(Succeed())
		policy.Spec.Delivery = nil
		Expect(suite.Env.Client.Update(ctx, &policy)).To(Succeed())
		// A waiting delivery is polled every 30 s: the policy's change itself
		// wakes the controller.
		Eventually(state(ns, "configmap-cfg-2"), 5*time.Second).Should(Equal("Cancelled/NotDelivered@rest"))
		Eventually(templateSnapshot(ns, "app"), 10*time.Second).Should(Equal("ConfigMap/cfg=" + v2))
	})

	It("keeps the newest finished deliveries of a config and deletes the older ones, never an open one", func() {
		ns, cm := deliveryNamespace("deliveries-prune")
		current := suite.SnapshotOf(cm)
		suite.StopController()
		DeferCleanup(suite.StartController)
		for seq := int64(1); seq <= 8; seq++ {
			rec := &v1alpha1.ConfigDelivery{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("configmap-cfg-%d", seq)},
				Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "cfg"}, Sequence: seq, Policy: "deliveries-prune",
					Settings: v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "all"}}}},
			}
			suite.Create(rec)
			// The third is halted (open): never pruned. The newest delivers
			// the content of now and is finished: the look prunes.
			rec.Status = v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliverySucceeded, To: fmt.Sprintf("cfg-old-%d", seq), FinishedAt: new(metav1.Now())}
			if seq == 3 {
				rec.Status = v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryHalted, To: "cfg-old-3"}
			}
			if seq == 8 {
				rec.Status.To = current
			}
			Expect(suite.Env.Client.Status().Update(ctx, rec)).To(Succeed())
			// Created in different seconds would order them by time too;
			// within one, the sequence orders them.
		}
		suite.StartController()
		kept := func() []string {
			var list v1alpha1.ConfigDeliveryList
			Expect(suite.Env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var names []string
			for _, r := range list.Items {
				names = append(names, r.Name)
			}
			return names
		}
		Eventually(kept, 10*time.Second).Should(ConsistOf("configmap-cfg-3", "configmap-cfg-4", "configmap-cfg-5",
			"configmap-cfg-6", "configmap-cfg-7", "configmap-cfg-8"))
		Consistently(kept, 2*window).Should(HaveLen(6))
	})
})
