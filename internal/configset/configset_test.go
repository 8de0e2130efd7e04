package configset

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

var (
	t0   = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	srcA = revision.Source{Kind: refs.ConfigMap, Name: "a"}
	srcB = revision.Source{Kind: refs.ConfigMap, Name: "b"}
)

func newSet(version string, generation int64) *v1alpha1.ConfigSet {
	return &v1alpha1.ConfigSet{ObjectMeta: metav1.ObjectMeta{Name: "checkout", Generation: generation},
		Spec: v1alpha1.ConfigSetSpec{Version: version, TimeoutSeconds: new(int32(60)),
			Members: []v1alpha1.ConfigSetMember{{Kind: "ConfigMap", Name: "b"}, {Kind: "ConfigMap", Name: "a"}}}}
}

func carrying(a, b string) Seen {
	return Seen{DeliveryOn: true, Members: map[revision.Source]Member{
		srcA: {Exists: true, Version: a, Delivered: true, Current: "a-" + a},
		srcB: {Exists: true, Version: b, Delivered: true, Current: "b-" + b},
	}}
}

func condition(st v1alpha1.ConfigSetStatus, typ string) string {
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

// A version waits for its members, stops at its timeout and stays
// stopped; a new generation starts over.
func TestJudgeWaitsThenStops(t *testing.T) {
	set := newSet("v2", 2)
	v := Judge(set, carrying("v2", "v1"), t0)
	if v.Start || !strings.HasPrefix(condition(v.Status, v1alpha1.ConditionReconciling), "True/WaitingForMembers: waiting for ConfigMap/b to carry version v2") ||
		len(v.Status.WaitingFor) != 1 || v.Requeue <= 0 {
		t.Fatalf("waiting: %+v", v)
	}
	set.Status = v.Status
	v = Judge(set, carrying("v2", "v1"), t0.Add(61*time.Second))
	if v.Start || !strings.HasPrefix(condition(v.Status, v1alpha1.ConditionStalled), "True/TimedOut: ConfigMap/b did not carry version v2 within 1m0s") {
		t.Fatalf("timed out: %s", condition(v.Status, v1alpha1.ConditionStalled))
	}
	set.Status = v.Status
	if v = Judge(set, carrying("v2", "v2"), t0.Add(62*time.Second)); v.Start || !strings.HasPrefix(condition(v.Status, v1alpha1.ConditionStalled), "True/TimedOut") {
		t.Fatalf("a late member started the version: %+v", v)
	}
	set.Status = v.Status
	set.Spec.Version, set.Generation = "v3", 3
	if v = Judge(set, carrying("v3", "v3"), t0.Add(63*time.Second)); !v.Start || !strings.HasPrefix(condition(v.Status, v1alpha1.ConditionReconciling), "True/Starting") {
		t.Fatalf("a new version: %+v", v)
	}
}

// Once delivered, the set says its delivery's state, and names a member
// whose content changed since without a new version.
func TestJudgeFollowsItsDelivery(t *testing.T) {
	set := newSet("v2", 2)
	rec := &v1alpha1.ConfigDelivery{ObjectMeta: metav1.ObjectMeta{Name: "configset-checkout-2"},
		Spec: v1alpha1.ConfigDeliverySpec{ConfigSet: &v1alpha1.ConfigSetVersion{Name: "checkout", Version: "v2", Generation: 2},
			Members: []v1alpha1.ConfigRef{{Kind: "ConfigMap", Name: "a"}, {Kind: "ConfigMap", Name: "b"}}},
		Status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliverySucceeded, Reason: "AllWavesHealthy", Message: "delivered",
			Members: []v1alpha1.MemberStatus{{Kind: "ConfigMap", Name: "a", To: "a-v2"}, {Kind: "ConfigMap", Name: "b", To: "b-v2"}}}}
	seen := carrying("v2", "v2")
	seen.Records = []*v1alpha1.ConfigDelivery{rec}
	v := Judge(set, seen, t0)
	if v.Start || v.Status.Delivery != rec.Name || condition(v.Status, v1alpha1.ConditionReady) != "True/AllWavesHealthy: ConfigDelivery configset-checkout-2: delivered" {
		t.Fatalf("delivered: %+v", v.Status)
	}
	drifted := seen.Members[srcB]
	drifted.Current = "b-edited"
	seen.Members[srcB] = drifted
	if got := condition(Judge(set, seen, t0).Status, v1alpha1.ConditionReady); !strings.Contains(got, "ConfigMap/b changed since without a new version: held until the set's next version") {
		t.Errorf("a member changed without a new version: %s", got)
	}
	// The same version written again (a new generation) is delivered again.
	set.Generation = 3
	if v := Judge(set, seen, t0); !v.Start {
		t.Error("a new generation of the set is not delivered")
	}
}

func TestJudgeRefusesWhatCannotMoveTogether(t *testing.T) {
	for name, tc := range map[string]struct {
		seen   func(Seen) Seen
		reason string
	}{
		"claimed by an older set": {func(s Seen) Seen { s.ClaimedBy = map[revision.Source]string{srcA: "older"}; return s }, ReasonMemberClaimed},
		"hot and restart-based":   {func(s Seen) Seen { m := s.Members[srcA]; m.Hot = true; s.Members[srcA] = m; return s }, ReasonMembersIncompatible},
		"one delivery cannot keep": {func(s Seen) Seen {
			m := s.Members[srcB]
			m.Delivered = false
			s.Members[srcB] = m
			return s
		}, ReasonMembersIncompatible},
	} {
		v := Judge(newSet("v2", 2), tc.seen(carrying("v2", "v2")), t0)
		if v.Start || !strings.HasPrefix(condition(v.Status, v1alpha1.ConditionStalled), "True/"+tc.reason) {
			t.Errorf("%s: start %v, %s", name, v.Start, condition(v.Status, v1alpha1.ConditionStalled))
		}
	}
}

// A set of hot config is delivered like any other (through its members'
// channels) once every member carries its version.
func TestJudgeStartsHotSets(t *testing.T) {
	seen := carrying("v2", "v2")
	for src, m := range seen.Members {
		m.Hot = true
		seen.Members[src] = m
	}
	if v := Judge(newSet("v2", 2), seen, t0); !v.Start {
		t.Errorf("a hot set whose members carry its version is not started: %s", condition(v.Status, v1alpha1.ConditionStalled))
	}
}

func TestClaimantIsTheOldest(t *testing.T) {
	older, newer := *newSet("v1", 1), *newSet("v1", 1)
	older.Name, newer.Name = "older", "newer"
	older.CreationTimestamp, newer.CreationTimestamp = metav1.NewTime(t0), metav1.NewTime(t0.Add(time.Second))
	if got := Claimant([]v1alpha1.ConfigSet{newer, older}, srcA); got == nil || got.Name != "older" {
		t.Errorf("claimant %v, want older", got)
	}
	if got := Claimant([]v1alpha1.ConfigSet{newer, older}, revision.Source{Kind: refs.Secret, Name: "a"}); got != nil {
		t.Errorf("a config no set lists is claimed by %s", got.Name)
	}
}
