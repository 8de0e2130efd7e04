package deliveries

import (
	"testing"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

func TestWhat(t *testing.T) {
	rec := func(state v1alpha1.DeliveryState, to string, hot bool) *v1alpha1.ConfigDelivery {
		return &v1alpha1.ConfigDelivery{Spec: v1alpha1.ConfigDeliverySpec{Hot: hot}, Status: v1alpha1.ConfigDeliveryStatus{State: state, To: to}}
	}
	// A change set whose first member is other, and app the second: the
	// record's own To is other's.
	set := func(to string) *v1alpha1.ConfigDelivery {
		r := rec(v1alpha1.DeliveryProgressing, "x9", false)
		r.Spec.Config = v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "other"}
		r.Spec.Members = []v1alpha1.ConfigRef{{Kind: "ConfigMap", Name: "other"}, {Kind: "ConfigMap", Name: "app"}}
		r.Status.Members = []v1alpha1.MemberStatus{{Kind: "ConfigMap", Name: "other", To: "x9"}, {Kind: "ConfigMap", Name: "app", To: to}}
		return r
	}
	for _, tc := range []struct {
		name           string
		latest         *v1alpha1.ConfigDelivery
		delivered, hot bool
		want           action
	}{
		{"not delivered, no record", nil, false, false, none},
		{"no longer delivered, an open delivery: cancelled", rec(v1alpha1.DeliveryProgressing, "v2", false), false, false, cancel},
		{"no longer delivered, a halted delivery: cancelled", rec(v1alpha1.DeliveryHalted, "v2", false), false, false, cancel},
		{"no longer delivered, a finished delivery: nothing", rec(v1alpha1.DeliverySucceeded, "v2", false), false, false, none},
		{"no longer delivered, a record not placed yet: nothing", rec("", "", false), false, false, none},
		{"a record not placed: placed", rec("", "", false), true, false, place},
		{"no record yet: a delivery may start", nil, true, false, start},
		{"the content changed since the latest: a delivery may start", rec(v1alpha1.DeliverySucceeded, "v1", false), true, false, start},
		{"the latest was cancelled: a delivery may start", rec(v1alpha1.DeliveryCancelled, "v2", false), true, false, start},
		{"the config turned hot: a delivery through channels may start", rec(v1alpha1.DeliveryProgressing, "v2", false), true, true, start},
		{"the latest of the content of now is finished: pruned", rec(v1alpha1.DeliverySucceeded, "v2", false), true, false, prune},
		{"the latest of the content of now is open: advanced", rec(v1alpha1.DeliveryWaitingForApproval, "v2", false), true, false, advance},
		{"a change set delivers the content of now: advanced", set("v2"), true, false, advance},
		{"a change set delivers an older content: a delivery may start", set("v1"), true, false, start},
		{"a hot delivery of the content of now: advanced", rec(v1alpha1.DeliveryProgressing, "v2", true), true, true, advance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := what(tc.latest, revision.Source{Kind: refs.ConfigMap, Name: "app"}, tc.delivered, tc.hot, "v2"); got != tc.want {
				t.Fatalf("%d, want %d", got, tc.want)
			}
		})
	}
}
