package revisions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/test/framework"
)

// The revisions controller and the Snapshotter against kube-apiserver and
// etcd alone (see framework.ControllerSuite); revisions_test.go holds the
// decisions that need no cluster.

// grace is the controller's snapshot grace: short, so specs wait less.
const grace = 2 * time.Second

var suite = framework.NewControllerSuite(manager.Controller{RolloutBatchWindow: 500 * time.Millisecond, SnapshotGrace: grace})

func TestAgainstAPIServer(t *testing.T) {
	suite.Run(t, "the revisions controller against kube-apiserver and etcd")
}

var ctx = context.Background()

// names is a config-snapshots annotation naming snap as the snapshot of
// the original of kind named cfg (ConfigMap) or creds (Secret).
func names(kind refs.Kind, snap string) map[string]string {
	original := "cfg"
	if kind == refs.Secret {
		original = "creds"
	}
	return map[string]string{v1alpha1.ConfigSnapshotsAnnotation: revision.Snapshots{{Kind: kind, Name: original}: snap}.Encode()}
}

// snapshot is a ConfigMap snapshot of cfg named name, as the Snapshotter
// writes them.
func snapshot(ns, name string) *corev1.ConfigMap {
	return revision.ConfigMapSnapshot(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"},
		Data: map[string]string{"app.yaml": "port: 80"}}, name)
}

// template is a pod template that reads the ConfigMaps named, through
// envFrom, and carries annotations.
func template(annotations map[string]string, reads ...string) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "app", Image: "app:1"}
	for _, cm := range reads {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

// deployment is a Deployment whose template carries annotations and reads
// nothing: no rollout follows the content of the config its annotation
// names, so only the revisions controller acts on it.
func deployment(ns, name string, annotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template(annotations)}}
}

// controlledBy is the controller reference to owner, of kind.
func controlledBy(kind string, owner client.Object) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
}

// pod is a pod of rs carrying annotations and reading the ConfigMaps
// named, as the ReplicaSet controller would have created it.
func pod(rs *appsv1.ReplicaSet, name string, annotations map[string]string, reads ...string) *corev1.Pod {
	t := template(annotations, reads...)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: t.Labels, Annotations: t.Annotations,
		OwnerReferences: controlledBy("ReplicaSet", rs)}, Spec: t.Spec}
}

// snapshotNames lists the namespace's snapshots, as "Kind/name".
func snapshotNames(ns string) func() []string {
	return func() []string {
		sel := client.MatchingLabels{v1alpha1.SnapshotLabel: v1alpha1.SnapshotLabelValue}
		var cms corev1.ConfigMapList
		Expect(suite.Env.Client.List(ctx, &cms, client.InNamespace(ns), sel)).To(Succeed())
		var secrets corev1.SecretList
		Expect(suite.Env.Client.List(ctx, &secrets, client.InNamespace(ns), sel)).To(Succeed())
		var out []string
		for _, c := range cms.Items {
			out = append(out, "ConfigMap/"+c.Name)
		}
		for _, s := range secrets.Items {
			out = append(out, "Secret/"+s.Name)
		}
		return out
	}
}

// snapshotOf is the name of the snapshot of cm's content value, as the
// controller names it.
func snapshotOf(cm *corev1.ConfigMap, value string) string {
	key, err := suite.Env.HashKey(ctx)
	Expect(err).NotTo(HaveOccurred())
	content := digest.Content(digest.KeyDigests(map[string]string{"app.yaml": value}, nil), nil)
	return revision.SnapshotName(key, cm.Namespace, refs.ConfigMap, cm.Name, content)
}

// blockedMark is the namespace's mark saying snapshots cannot be written.
func blockedMark(ns string) func() string {
	return func() string {
		var n corev1.Namespace
		Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		return n.Annotations[v1alpha1.SnapshotsBlockedAnnotation]
	}
}

// touch changes a label of obj, so that its namespace is looked at again.
func touch(obj client.Object, value string) {
	Expect(suite.Env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	obj.SetLabels(map[string]string{"app": "web", "touched": value})
	Expect(suite.Env.Client.Update(ctx, obj)).To(Succeed())
}

func revisionsOn(s *v1alpha1.ConfigPolicySpec) {
	s.Revisions = v1alpha1.RevisionSettings{Enabled: true}
}

var _ = Describe("the revisions controller", func() {
	It("deletes a snapshot nothing names once the grace has passed, and keeps those a workload, its history, a Job or a running pod names", func() {
		// Revisions are off here: snapshots left from when they were on
		// are still collected.
		ns := suite.Namespace(nil)
		d := deployment(ns, "web", names(refs.ConfigMap, "cfg-template"))
		suite.Create(d)
		history := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", OwnerReferences: controlledBy("Deployment", d)},
			Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: template(names(refs.ConfigMap, "cfg-history"))}}
		suite.Create(history)
		jobTemplate := template(names(refs.Secret, "creds-job"))
		jobTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate"}, Spec: batchv1.JobSpec{Template: jobTemplate}}
		statefulSetRevision := map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": names(refs.ConfigMap, "cfg-statefulset")}}}}
		raw, err := json.Marshal(statefulSetRevision)
		Expect(err).NotTo(HaveOccurred())
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-1"}, Data: runtime.RawExtension{Raw: raw}, Revision: 1}
		// A pod of the revision cfg-pod, pinned: it reads the snapshot.
		running := pod(history, "web-1-a", names(refs.ConfigMap, "cfg-pod"), "cfg-pod")
		suite.Create(job, cr, running)
		credsSnapshot := func(name string) *corev1.Secret {
			return revision.SecretSnapshot(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cret")}}, name)
		}
		suite.Create(snapshot(ns, "cfg-template"), snapshot(ns, "cfg-history"), credsSnapshot("creds-job"), snapshot(ns, "cfg-statefulset"),
			snapshot(ns, "cfg-pod"), snapshot(ns, "cfg-orphan"), credsSnapshot("creds-orphan"))
		named := []string{"ConfigMap/cfg-template", "ConfigMap/cfg-history", "Secret/creds-job", "ConfigMap/cfg-statefulset", "ConfigMap/cfg-pod"}

		Eventually(snapshotNames(ns), grace+10*time.Second).Should(ConsistOf(named))
		Consistently(snapshotNames(ns), time.Second).Should(ConsistOf(named))

		By("once the Job, the history and the pod are gone or done, their snapshots go too")
		Expect(suite.Env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Expect(suite.Env.Client.Delete(ctx, cr)).To(Succeed())
		running.Status.Phase = corev1.PodSucceeded
		Expect(suite.Env.Client.Status().Update(ctx, running)).To(Succeed())
		Eventually(snapshotNames(ns), grace+10*time.Second).Should(ConsistOf("ConfigMap/cfg-template", "ConfigMap/cfg-history"))
	})

	It("reports once a pod that names its revision's snapshots but reads the originals", func() {
		ns := suite.Namespace(nil)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1"}, Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template(names(refs.ConfigMap, "cfg-1"))}}
		suite.Create(rs, snapshot(ns, "cfg-1"))
		reported := func() float64 { return framework.Metric("configward_pods_not_pinned_total", nil) }
		before := reported()
		// Created while the Pod path was down: its references were not
		// pointed at the snapshot.
		unpinned := pod(rs, "web-1-a", names(refs.ConfigMap, "cfg-1"), "cfg")
		pinned := pod(rs, "web-1-b", names(refs.ConfigMap, "cfg-1"), "cfg-1")
		suite.Create(unpinned, pinned)
		Eventually(framework.Events(suite.Env.Client, ns, "web-1-a", "ConfigRevisionNotPinned"), 10*time.Second).Should(ConsistOf(
			HavePrefix("the pod reads [ConfigMap/cfg], not its revision's snapshots (ConfigMap/cfg=cfg-1)")))
		Expect(reported()).To(Equal(before + 1))

		By("looked at again, it is not reported again")
		touch(unpinned, "again")
		another := pod(rs, "web-1-c", names(refs.ConfigMap, "cfg-1"), "cfg")
		suite.Create(another)
		Eventually(framework.Events(suite.Env.Client, ns, "web-1-c", "ConfigRevisionNotPinned"), 10*time.Second).Should(HaveLen(1))
		Expect(reported()).To(Equal(before+2), "one report per unpinned pod")
		Expect(framework.Events(suite.Env.Client, ns, "web-1-b", "ConfigRevisionNotPinned")()).To(BeEmpty(), "a pinned pod was reported")
	})
})

var _ = Describe("the Snapshotter", func() {
	It("writes the snapshot a revision names once, however many workloads name it, and never one of content its original no longer holds", func() {
		ns := suite.PolicyNamespace("revisions-write", revisionsOn)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"app.yaml": "port: 80"}}
		suite.Create(cm)
		first := snapshotOf(cm, "port: 80")
		suite.Create(deployment(ns, "a", names(refs.ConfigMap, first)), deployment(ns, "b", names(refs.ConfigMap, first)))
		Eventually(snapshotNames(ns), 10*time.Second).Should(ConsistOf("ConfigMap/" + first))
		var written corev1.ConfigMap
		Expect(suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, &written)).To(Succeed())
		Expect(written.Data).To(Equal(cm.Data))
		Expect(written.Immutable).To(HaveValue(BeTrue()))
		Expect(written.Annotations).To(HaveKeyWithValue(v1alpha1.SnapshotOfAnnotation, "cfg"))

		By("a revision naming content cfg never held: refused, and the namespace is not marked")
		cm.Data["app.yaml"] = "port: 81"
		Expect(suite.Env.Client.Update(ctx, cm)).To(Succeed())
		changed := func() float64 {
			return framework.Metric("configward_snapshots_blocked_total", map[string]string{"reason": "changed"})
		}
		before := changed()
		suite.Create(deployment(ns, "c", names(refs.ConfigMap, snapshotOf(cm, "port: 82"))))
		Eventually(changed, 10*time.Second).Should(BeNumerically(">", before))
		Expect(snapshotNames(ns)()).To(ConsistOf("ConfigMap/" + first))
		Expect(blockedMark(ns)()).To(BeEmpty())

		By("a revision naming its content now gets its own snapshot")
		current := snapshotOf(cm, "port: 81")
		suite.Create(deployment(ns, "d", names(refs.ConfigMap, current)))
		Eventually(snapshotNames(ns), 10*time.Second).Should(ConsistOf("ConfigMap/"+first, "ConfigMap/"+current))
	})

	It("marks the namespace while a ResourceQuota refuses snapshots, and takes the mark off once one is written", func() {
		ns := suite.PolicyNamespace("revisions-quota", revisionsOn)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"app.yaml": "port: 80"}}
		suite.Create(cm)
		// The quota controller's part: the quota's status says the
		// namespace holds all the ConfigMaps it may.
		full := corev1.ResourceList{"count/configmaps": resource.MustParse("1")}
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmaps"}, Spec: corev1.ResourceQuotaSpec{Hard: full}}
		suite.Create(quota)
		quota.Status = corev1.ResourceQuotaStatus{Hard: full, Used: full}
		Expect(suite.Env.Client.Status().Update(ctx, quota)).To(Succeed())

		refused := func() float64 {
			return framework.Metric("configward_snapshots_blocked_total", map[string]string{"reason": "quota"})
		}
		before := refused()
		name := snapshotOf(cm, "port: 80")
		d := deployment(ns, "web", names(refs.ConfigMap, name))
		suite.Create(d)
		Eventually(blockedMark(ns), 10*time.Second).Should(HavePrefix("quota: a ResourceQuota refused snapshot " + name))
		Expect(refused()).To(BeNumerically(">", before))
		Expect(snapshotNames(ns)()).To(BeEmpty())

		By("the quota raised, the snapshot is written and the mark goes")
		roomy := corev1.ResourceList{"count/configmaps": resource.MustParse("10")}
		quota.Spec.Hard = roomy
		Expect(suite.Env.Client.Update(ctx, quota)).To(Succeed())
		quota.Status.Hard = roomy
		Expect(suite.Env.Client.Status().Update(ctx, quota)).To(Succeed())
		touch(d, "quota-raised")
		Eventually(snapshotNames(ns), 10*time.Second).Should(ConsistOf("ConfigMap/" + name))
		Eventually(blockedMark(ns), 10*time.Second).Should(BeEmpty())
	})
})
