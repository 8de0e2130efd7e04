package delivery

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Tools that wait for a change to land (kubectl wait, Flux's health
// checks, Helm's kstatus wait, Argo CD) read conditions, not a state field.
// The state is the one fact; the conditions say it in the kstatus
// convention, decided here once for every status the controller writes:
//
//	state               Ready  Reconciling  Stalled
//	(not placed yet)    False  True         False
//	Progressing         False  True         False
//	WaitingForApproval  False  True         False
//	Halted              False  False        True
//	Succeeded           True   False        False
//	Superseded          False  False        True
//	Cancelled           False  False        True
//
// Waiting for approval is not stalled: nothing failed, a person is to act,
// and a tool that waits keeps waiting (Argo CD's health check calls it
// Suspended). A superseded or cancelled delivery will never deliver its
// content itself, so it is stalled for whoever waits on that record;
// `configward delivery wait` on a config follows the config's newest
// delivery instead.

// Observe returns status with its conditions and observedGeneration set
// for a record of generation, keeping each condition's transition time
// where its status did not change.
func Observe(status v1alpha1.ConfigDeliveryStatus, generation int64, now metav1.Time) v1alpha1.ConfigDeliveryStatus {
	state, reason, message := status.State, status.Reason, status.Message
	if state == "" {
		state, reason, message = v1alpha1.DeliveryProgressing, "Placing", "the delivery's consumers are being placed into its waves"
	}
	if reason == "" {
		reason = string(state)
	}
	if message == "" {
		message = "the delivery is " + string(state)
	}
	out := status
	out.ObservedGeneration = generation
	out.Conditions = SetConditions(status.Conditions, generation, now, state == v1alpha1.DeliverySucceeded,
		state == v1alpha1.DeliveryHalted || state == v1alpha1.DeliverySuperseded || state == v1alpha1.DeliveryCancelled, camel(reason), message)
	return out
}

// SetConditions returns cs with Ready, Reconciling and Stalled set for
// generation, in the kstatus convention: Ready or Stalled as said (never
// both), Reconciling exactly when neither, each with reason and message,
// keeping the transition time of a condition whose status did not change.
// A ConfigSet's conditions are set here too.
func SetConditions(cs []metav1.Condition, generation int64, now metav1.Time, ready, stalled bool, reason, message string) []metav1.Condition {
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	stalled = stalled && !ready
	out := append([]metav1.Condition(nil), cs...)
	for _, c := range []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: status(ready)},
		{Type: v1alpha1.ConditionReconciling, Status: status(!ready && !stalled)},
		{Type: v1alpha1.ConditionStalled, Status: status(stalled)},
	} {
		c.ObservedGeneration, c.LastTransitionTime, c.Reason, c.Message = generation, now, reason, message
		meta.SetStatusCondition(&out, c)
	}
	return out
}

// camel keeps a condition's reason within what the API server accepts (a
// CamelCase word); the status' reasons already are one.
func camel(reason string) string {
	out := make([]byte, 0, len(reason))
	for i := 0; i < len(reason) && len(out) < 1024; i++ {
		c := reason[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			out = append(out, c)
		}
	}
	if len(out) == 0 || !(out[0] >= 'a' && out[0] <= 'z' || out[0] >= 'A' && out[0] <= 'Z') {
		return "Unknown"
	}
	return string(out)
}

// Standing reads back which of Ready, Stalled and Reconciling conditions
// (of an object of generation) say is true: Reconciling too while they
// describe an older generation, or none yet, as kstatus reads them.
func Standing(conditions []metav1.Condition, generation int64) string {
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionStalled} {
		if c := meta.FindStatusCondition(conditions, typ); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration >= generation {
			return typ
		}
	}
	return v1alpha1.ConditionReconciling
}
