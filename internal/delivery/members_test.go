package delivery

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

var (
	memberA = revision.Source{Kind: refs.ConfigMap, Name: "a"}
	memberB = revision.Source{Kind: refs.Secret, Name: "b"}
)

// changeSetRecord is a record of the change set a (ConfigMap) and b
// (Secret), begun over three consumers: both (reads a and b, the canary),
// rest (reads a and b) and onlyB.
func changeSetRecord(t *testing.T) *v1alpha1.ConfigDelivery {
	t.Helper()
	rec := &v1alpha1.ConfigDelivery{ObjectMeta: metav1.ObjectMeta{Name: "configmap-a-3"}, Spec: v1alpha1.ConfigDeliverySpec{
		Config:  v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "a"},
		Members: []v1alpha1.ConfigRef{{Kind: "ConfigMap", Name: "a"}, {Kind: "Secret", Name: "b"}},
		Settings: v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{
			{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}}, {Name: "rest"}}},
	}}
	consumers := []Consumer{
		{Kind: "Deployment", Name: "both", Labels: map[string]string{"tier": "canary"}, Froms: revision.Snapshots{memberA: "a-1", memberB: "b-1"}},
		{Kind: "Deployment", Name: "rest", Froms: revision.Snapshots{memberA: "a-1", memberB: "b-1"}},
		{Kind: "Deployment", Name: "onlyB", Froms: revision.Snapshots{memberB: "b-0"}},
	}
	step := Begin(rec, revision.Snapshots{memberA: "a-2", memberB: "b-2"}, consumers, t0)
	rec.Status = step.Status
	if !strings.Contains(rec.Status.Message, "the change set ConfigMap/a a-2, Secret/b b-2 to 3 workloads in 2 waves") {
		t.Fatalf("Begin said %q", rec.Status.Message)
	}
	return rec
}

func TestChangeSetWant(t *testing.T) {
	rec := changeSetRecord(t)
	if got := rec.Status.Members; len(got) != 2 || got[0] != (v1alpha1.MemberStatus{Kind: "ConfigMap", Name: "a", To: "a-2", From: "a-1"}) ||
		got[1] != (v1alpha1.MemberStatus{Kind: "Secret", Name: "b", To: "b-2", From: "b-1"}) {
		t.Fatalf("members %+v: want each member's to and most common from", got)
	}
	if rec.Status.To != "a-2" || rec.Status.From != "a-1" {
		t.Errorf("to %s from %s: want the first member's", rec.Status.To, rec.Status.From)
	}
	if rec.Status.MemberList != "a,b" {
		t.Errorf("memberList %q: want a,b (what kubectl get shows)", rec.Status.MemberList)
	}
	ask := func(src revision.Source, current, name, held string) Wanted {
		return Want(Ask{Record: rec, Config: src, Current: current, Holder: Holder{Kind: "Deployment", Name: name}, Held: held})
	}
	for _, tc := range []struct {
		name string
		got  Wanted
		want Wanted
	}{
		{"waiting: a's from", ask(memberA, "a-2", "rest", "a-2"), Wanted{"a-1", WhyWaiting}},
		{"waiting: b's from", ask(memberB, "b-2", "rest", "b-2"), Wanted{"b-1", WhyWaiting}},
		{"only b: its own from", ask(memberB, "b-2", "onlyB", "b-2"), Wanted{"b-0", WhyWaiting}},
		{"created during: each member's common from", ask(memberB, "b-2", "fresh", ""), Wanted{"b-1", WhyWaiting}},
		{"a member changed again: kept", ask(memberB, "b-3", "rest", "b-1"), Wanted{"b-1", WhyKept}},
		{"a config not in the set: nothing said", ask(revision.Source{Kind: refs.ConfigMap, Name: "b"}, "b-2", "rest", "x"), Wanted{"x", WhyKept}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
	// Both members of a started wave at once, and back at once.
	now := metav1.NewTime(t0)
	rec.Status.Waves[0].StartedAt = &now
	if a, b := ask(memberA, "a-2", "both", "a-1"), ask(memberB, "b-2", "both", "b-1"); a != (Wanted{"a-2", WhyReached}) || b != (Wanted{"b-2", WhyReached}) {
		t.Errorf("started: a %+v, b %+v; want both delivered", a, b)
	}
	rec.Status.State, rec.Status.RolledBack = v1alpha1.DeliveryHalted, true
	if a, b := ask(memberA, "a-2", "both", "a-2"), ask(memberB, "b-2", "both", "b-2"); a != (Wanted{"a-1", WhyRolledBack}) || b != (Wanted{"b-1", WhyRolledBack}) {
		t.Errorf("rolled back: a %+v, b %+v; want both back", a, b)
	}
	if got := Latest([]*v1alpha1.ConfigDelivery{rec}, memberB); got != rec {
		t.Error("the record of a change set is the latest of each member")
	}
}

// The gate waits for a workload's template to hold every member it reads.
func TestChangeSetGate(t *testing.T) {
	rec := changeSetRecord(t)
	now := metav1.NewTime(t0)
	rec.Status.Waves[0].StartedAt, rec.Status.CurrentWave = &now, "canary"
	held := func(a, b string) Seen {
		d := deployment("both", "", "h2")
		d.SetStamp(workload.Stamp{Hash: "h2", Snapshots: revision.Snapshots{memberA: a, memberB: b}.Encode()})
		return Seen{Workloads: map[v1alpha1.DeliveryTarget]workload.Object{rec.Status.Waves[0].Workloads[0]: d},
			Pods: map[string][]*corev1.Pod{"a": {pod("both-1", "both", "h2", true)}}}
	}
	for _, tc := range []struct {
		name    string
		a, b    string
		healthy bool
	}{
		{"a new, b old: not there yet", "a-2", "b-1", false},
		{"a old, b new: not there yet", "a-1", "b-2", false},
		{"both new", "a-2", "b-2", true},
	} {
		g := Judge(rec, held(tc.a, tc.b), t0.Add(time.Second))
		if g.Healthy() != tc.healthy {
			t.Errorf("%s: healthy %v (%+v), want %v", tc.name, g.Healthy(), g, tc.healthy)
		}
	}
}
