package delivery

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/revision"
)

// Every holder of delivered config asks Want: a workload's template (its
// pins), a hot wave's channel, the gate. One table for both kinds of
// holder.
func TestWant(t *testing.T) {
	now := metav1.Now()
	cfg := revision.Source{Kind: "ConfigMap", Name: "app"}
	record := func(state v1alpha1.DeliveryState, started int, rolledBack bool) *v1alpha1.ConfigDelivery {
		r := &v1alpha1.ConfigDelivery{
			Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "app"}},
			Status: v1alpha1.ConfigDeliveryStatus{State: state, To: "new", From: "common", RolledBack: rolledBack,
				Waves: []v1alpha1.WaveStatus{
					{Name: "canary", From: "canary-old", Workloads: []v1alpha1.DeliveryTarget{{Kind: "Deployment", Name: "c", From: "old-c"}}},
					{Name: "rest", Workloads: []v1alpha1.DeliveryTarget{{Kind: "Deployment", Name: "r", From: "old-r"}, {Kind: "Deployment", Name: "bare"}}},
				}}}
		for i := range started {
			r.Status.Waves[i].StartedAt = &now
		}
		return r
	}
	open := record(v1alpha1.DeliveryProgressing, 1, false)
	otherConfig := open.DeepCopy()
	otherConfig.Spec.Config.Name = "other"
	unplaced := &v1alpha1.ConfigDelivery{Spec: open.Spec}
	workload := func(name string) Holder { return Holder{Kind: "Deployment", Name: name} }
	wave := func(name string) Holder { return Holder{Wave: name} }
	for _, tc := range []struct {
		name    string
		rec     *v1alpha1.ConfigDelivery
		current string
		holder  Holder
		held    string
		want    Wanted
	}{
		// Workloads (their templates' pins).
		{"no delivery: keeps what it runs", nil, "new", workload("r"), "old-r", Wanted{"old-r", WhyKept}},
		{"no delivery, nothing named: keeps reading the original", nil, "new", workload("r"), "", Wanted{"", WhyKept}},
		{"a record of other config says nothing", otherConfig, "new", workload("r"), "old-r", Wanted{"old-r", WhyKept}},
		{"a record not placed yet holds nobody back", unplaced, "new", workload("r"), "old-r", Wanted{"old-r", WhyKept}},
		{"a change not delivered yet: keeps what it runs", open, "newer", workload("c"), "new", Wanted{"new", WhyKept}},
		{"started wave: the delivered content", open, "new", workload("c"), "old-c", Wanted{"new", WhyReached}},
		{"wave not started: its assigned revision, whatever it names now", open, "new", workload("r"), "new", Wanted{"old-r", WhyWaiting}},
		{"created during the delivery: the common one until the last wave", open, "new", workload("fresh"), "", Wanted{"common", WhyWaiting}},
		{"created during the delivery, the last wave started: the delivered content", record(v1alpha1.DeliveryProgressing, 2, false), "new", workload("fresh"), "", Wanted{"new", WhyReached}},
		{"assigned none: keeps what it runs", open, "new", workload("bare"), "x", Wanted{"x", WhyWaiting}},
		{"rolled-back wave: its old revision", record(v1alpha1.DeliveryHalted, 1, true), "new", workload("c"), "new", Wanted{"old-c", WhyRolledBack}},
		{"halted, not rolled back: the started wave keeps the delivered content", record(v1alpha1.DeliveryHalted, 1, false), "new", workload("c"), "new", Wanted{"new", WhyReached}},
		{"finished: the content of now", record(v1alpha1.DeliverySucceeded, 2, false), "new", workload("r"), "old-r", Wanted{"new", WhyCurrent}},
		// Waves (their channels).
		{"no delivery: a channel keeps what it holds", nil, "new", wave("canary"), "old", Wanted{"old", WhyKept}},
		{"no delivery: a new channel holds none (its writer takes the content of now)", nil, "new", wave("canary"), "", Wanted{"", WhyKept}},
		{"changed again, its delivery not started", record(v1alpha1.DeliverySucceeded, 2, false), "newer", wave("rest"), "new", Wanted{"new", WhyKept}},
		{"a started wave takes it", open, "new", wave("canary"), "canary-old", Wanted{"new", WhyReached}},
		{"a wave not started holds what its channel held when the delivery started", record(v1alpha1.DeliveryProgressing, 0, false), "new", wave("canary"), "x", Wanted{"canary-old", WhyWaiting}},
		{"a wave not started and without a From: the record's From", open, "new", wave("rest"), "x", Wanted{"common", WhyWaiting}},
		{"a rolled-back wave gets its From back", record(v1alpha1.DeliveryHalted, 1, true), "new", wave("canary"), "new", Wanted{"canary-old", WhyRolledBack}},
		{"halted: later waves keep the old", record(v1alpha1.DeliveryHalted, 1, false), "new", wave("rest"), "common", Wanted{"common", WhyWaiting}},
		{"succeeded: every channel", record(v1alpha1.DeliverySucceeded, 2, false), "new", wave("rest"), "old", Wanted{"new", WhyCurrent}},
		{"cancelled (delivery off): the content of now", record(v1alpha1.DeliveryCancelled, 1, false), "new", wave("rest"), "old", Wanted{"new", WhyCurrent}},
		{"cancelled, changed since: kept until the next delivery starts", record(v1alpha1.DeliveryCancelled, 1, false), "newer", wave("rest"), "old", Wanted{"old", WhyKept}},
		{"a wave added since goes with the last", open, "new", wave("late"), "old", Wanted{"common", WhyWaiting}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Want(Ask{Record: tc.rec, Config: cfg, Current: tc.current, Holder: tc.holder, Held: tc.held})
			if got != tc.want {
				t.Fatalf("Want = %+v, want %+v", got, tc.want)
			}
			if reached := tc.want.Why == WhyReached || tc.want.Why == WhyRolledBack; got.Reached() != reached {
				t.Errorf("Reached = %v", got.Reached())
			}
		})
	}
}

func TestLatest(t *testing.T) {
	at := func(sec int64, seq int64, name string) *v1alpha1.ConfigDelivery {
		return &v1alpha1.ConfigDelivery{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(sec, 0)},
			Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "app"}, Sequence: seq}}
	}
	other := at(9, 9, "other")
	other.Spec.Config.Name = "other"
	recs := []*v1alpha1.ConfigDelivery{at(1, 1, "a-1"), at(2, 2, "a-2"), at(2, 3, "a-3"), other, at(1, 4, "late-seq")}
	if got := Latest(recs, revision.Source{Kind: "ConfigMap", Name: "app"}); got.Name != "a-3" {
		t.Errorf("Latest = %s, want a-3 (the newest created; in one second the highest sequence)", got.Name)
	}
	if got := Latest(recs, revision.Source{Kind: "Secret", Name: "app"}); got != nil {
		t.Errorf("Latest of a config without records = %s", got.Name)
	}
	SortNewestFirst(recs)
	if recs[0].Name != "other" || recs[1].Name != "a-3" || recs[len(recs)-1].Name != "a-1" {
		t.Errorf("sorted %s, %s ... %s", recs[0].Name, recs[1].Name, recs[len(recs)-1].Name)
	}
}
