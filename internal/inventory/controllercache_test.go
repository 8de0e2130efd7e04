package inventory

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/workload"
)

// controller is the controller cache's transforms with the built-in kinds.
var controller = ControllerTransforms{Registry: workload.Builtin()}

// The controller's cache keeps of a ReplicaSet a workload controls what
// its readers read: owners, status, and the template's annotations
// (History and the revisions controller read them through the kind's
// accessors, as below).
func TestControllerCacheDropsTheSpecOfAControlledReplicaSet(t *testing.T) {
	rs, template := controlledReplicaSet()
	out, err := controller.Workload(rs.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.ReplicaSet)
	want := appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta}}
	if !reflect.DeepEqual(got.Spec, want) || !reflect.DeepEqual(got.Status, rs.Status) || !reflect.DeepEqual(got.OwnerReferences, rs.OwnerReferences) {
		t.Errorf("a controlled ReplicaSet is cached as %+v", got)
	}
	if _, ok := got.Annotations[cachedSpecKey]; ok {
		t.Error("the controller's cache kept the webhook's spec digest, which only the effects ledger reads")
	}
	w, _ := workload.Builtin().For(got)
	if v, _ := w.TemplateAnnotation(v1alpha1.ConfigSnapshotsAnnotation); v != "s" {
		t.Errorf("the cached ReplicaSet's template names snapshots %q, want s", v)
	}
	checkOnlyControlledLoseTheSpec(t, controller.Workload, rs, got)

	// A CronJob's Job keeps its spec: the Jobs' rollout controller reads
	// its config to tell, in an Event, that a stale template cannot change.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "nightly-1", Namespace: "shop", OwnerReferences: controlledBy("batch/v1", "CronJob", "nightly")},
		Spec: batchv1.JobSpec{Template: template}}
	if out, _ := controller.Workload(job); out.(*batchv1.Job).Spec.Template.Spec.Containers == nil {
		t.Error("a Job of a CronJob lost its spec")
	}

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: appsv1.DeploymentSpec{Template: template}}
	if out, _ := controller.Workload(d); out.(*appsv1.Deployment).Spec.Template.Spec.Containers == nil {
		t.Error("a Deployment lost its template's spec")
	}
}
