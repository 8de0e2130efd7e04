package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Progress is what a workload's own status says of its latest rollout.
type Progress struct {
	// Known: the kind's status tells (Deployment, StatefulSet, DaemonSet);
	// for other kinds only their pods can.
	Known bool
	// Done: every replica runs the latest template, ready and available,
	// and none of an older one is left.
	Done bool
	// Failed says why the rollout cannot finish by itself
	// (ProgressDeadlineExceeded); Waiting what it still waits for.
	Failed, Waiting string
	// Unready: every replica runs the latest template, but not all of them
	// are ready and available (pods that stopped being ready, or not yet).
	Unready bool
}

// Progress reads the object's rollout from its status, as `kubectl rollout
// status` does.
func (w Object) Progress() Progress {
	switch o := w.Obj.(type) {
	case *appsv1.Deployment:
		return deploymentProgress(o)
	case *appsv1.StatefulSet:
		want := replicas(o.Spec.Replicas)
		s := o.Status
		switch {
		case s.ObservedGeneration < o.Generation:
			return Progress{Known: true, Waiting: "its controller has not seen the new template yet"}
		case s.UpdateRevision != s.CurrentRevision && s.UpdatedReplicas < want:
			return Progress{Known: true, Waiting: fmt.Sprintf("%d of %d pods updated", s.UpdatedReplicas, want)}
		case s.ReadyReplicas < want || s.AvailableReplicas < want:
			return Progress{Known: true, Unready: true, Waiting: fmt.Sprintf("%d of %d pods ready and available", min(s.ReadyReplicas, s.AvailableReplicas), want)}
		}
		return Progress{Known: true, Done: true}
	case *appsv1.DaemonSet:
		s := o.Status
		switch {
		case s.ObservedGeneration < o.Generation:
			return Progress{Known: true, Waiting: "its controller has not seen the new template yet"}
		case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
			return Progress{Known: true, Waiting: fmt.Sprintf("%d of %d pods updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)}
		case s.NumberReady < s.DesiredNumberScheduled || s.NumberAvailable < s.DesiredNumberScheduled:
			return Progress{Known: true, Unready: true, Waiting: fmt.Sprintf("%d of %d pods ready and available", min(s.NumberReady, s.NumberAvailable), s.DesiredNumberScheduled)}
		}
		return Progress{Known: true, Done: true}
	}
	return Progress{}
}

func deploymentProgress(o *appsv1.Deployment) Progress {
	want := replicas(o.Spec.Replicas)
	s := o.Status
	if s.ObservedGeneration < o.Generation {
		return Progress{Known: true, Waiting: "its controller has not seen the new template yet"}
	}
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return Progress{Known: true, Failed: "ProgressDeadlineExceeded: " + c.Message}
		}
	}
	switch {
	case s.UpdatedReplicas < want:
		return Progress{Known: true, Waiting: fmt.Sprintf("%d of %d pods updated", s.UpdatedReplicas, want)}
	case s.Replicas > s.UpdatedReplicas:
		return Progress{Known: true, Waiting: fmt.Sprintf("%d old pods still to be replaced", s.Replicas-s.UpdatedReplicas)}
	case s.ReadyReplicas < want || s.AvailableReplicas < want:
		return Progress{Known: true, Unready: true, Waiting: fmt.Sprintf("%d of %d pods ready and available", min(s.ReadyReplicas, s.AvailableReplicas), want)}
	}
	return Progress{Known: true, Done: true}
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// Selector is the label selector the object finds its pods with
// (spec.selector of the built-in kinds and of declared kinds that have
// one); nil when it has none.
func (w Object) Selector() *metav1.LabelSelector {
	switch o := w.Obj.(type) {
	case *appsv1.Deployment:
		return o.Spec.Selector
	case *appsv1.StatefulSet:
		return o.Spec.Selector
	case *appsv1.DaemonSet:
		return o.Spec.Selector
	case *appsv1.ReplicaSet:
		return o.Spec.Selector
	case *unstructured.Unstructured:
		m, found, err := unstructured.NestedMap(o.Object, "spec", "selector")
		if !found || err != nil {
			return nil
		}
		var sel metav1.LabelSelector
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &sel) != nil {
			return nil
		}
		return &sel
	}
	return nil
}
