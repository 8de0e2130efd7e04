package delivery

import (
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// conditionReason is what the API server accepts as a condition's reason.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

func TestObserveSaysEachStateOnce(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))
	for _, state := range []v1alpha1.DeliveryState{"", v1alpha1.DeliveryProgressing, v1alpha1.DeliveryWaitingForApproval, v1alpha1.DeliveryHalted,
		v1alpha1.DeliverySucceeded, v1alpha1.DeliverySuperseded, v1alpha1.DeliveryCancelled} {
		st := Observe(v1alpha1.ConfigDeliveryStatus{State: state, Reason: "Some reason-with spaces"}, 4, t0)
		if st.ObservedGeneration != 4 {
			t.Errorf("%q: observedGeneration %d, want 4", state, st.ObservedGeneration)
		}
		ready := meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady)
		stalled := meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionStalled)
		reconciling := meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReconciling)
		if ready == (state != v1alpha1.DeliverySucceeded) || ready && stalled || reconciling != (!ready && !stalled) {
			t.Errorf("%q: Ready %v, Stalled %v, Reconciling %v", state, ready, stalled, reconciling)
		}
		for _, c := range st.Conditions {
			if !conditionReason.MatchString(c.Reason) || c.ObservedGeneration != 4 || c.Message == "" {
				t.Errorf("%q: condition %+v is not one the API server takes", state, c)
			}
		}
		// The next write in the same state keeps the transition times.
		again := Observe(st, 5, t1)
		for _, c := range again.Conditions {
			if !c.LastTransitionTime.Equal(&t0) || c.ObservedGeneration != 5 {
				t.Errorf("%q: %s moved to %v (generation %d) without a transition", state, c.Type, c.LastTransitionTime, c.ObservedGeneration)
			}
		}
	}
	// A transition moves the time of the conditions that changed only.
	waiting := Observe(v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryWaitingForApproval}, 1, t0)
	done := Observe(v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliverySucceeded, Conditions: waiting.Conditions}, 1, t1)
	if c := meta.FindStatusCondition(done.Conditions, v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("Ready after success: %+v", c)
	}
	if c := meta.FindStatusCondition(done.Conditions, v1alpha1.ConditionStalled); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("Stalled stayed False but its transition time moved: %+v", c)
	}
}

func TestStanding(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name       string
		conditions []metav1.Condition
		generation int64
		want       string
	}{
		{"no status yet", nil, 1, v1alpha1.ConditionReconciling},
		{"ready", SetConditions(nil, 2, now, true, false, "Delivered", "m"), 2, v1alpha1.ConditionReady},
		{"stalled", SetConditions(nil, 2, now, false, true, "TimedOut", "m"), 2, v1alpha1.ConditionStalled},
		{"moving", SetConditions(nil, 2, now, false, false, "WaitingForMembers", "m"), 2, v1alpha1.ConditionReconciling},
		{"ready for an older generation", SetConditions(nil, 1, now, true, false, "Delivered", "m"), 2, v1alpha1.ConditionReconciling},
		{"stalled for an older generation", SetConditions(nil, 1, now, false, true, "TimedOut", "m"), 2, v1alpha1.ConditionReconciling},
	} {
		if got := Standing(tc.conditions, tc.generation); got != tc.want {
			t.Errorf("%s: Standing = %s, want %s", tc.name, got, tc.want)
		}
	}
}
