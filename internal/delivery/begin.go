package delivery

// A record's first step (Begin: placement) and the step that ends it or
// halts it from outside the state machine (Finish).

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/revision"
)

// Begin is the first step of a new record: it places the consumers of the
// delivered config into the record's waves (Place) and starts delivering
// the snapshot to; the revision most of them read (MostCommon) is the one
// kept for consumers not reached yet. The status is built anew: the
// placement is a record's first write.
//
// A change set's record (IsSet) takes to for each member, and each
// consumer's Froms: every member has its own To and From, and every
// target the snapshot of each member it read.
func Begin(rec *v1alpha1.ConfigDelivery, to revision.Snapshots, consumers []Consumer, now time.Time) Step {
	c := change{rec: rec, now: metav1.NewTime(now)}
	s := &c.step.Status
	set := IsSet(rec)
	first := Delivers(rec)
	*s = v1alpha1.ConfigDeliveryStatus{
		State: v1alpha1.DeliveryProgressing, Reason: ReasonStarted,
		To: to[first], From: MostCommon(froms(consumers, first, set)),
		Waves:     Place(rec.Spec.Settings.Waves, consumers),
		StartedAt: c.stamp(),
	}
	what := fmt.Sprintf("%s %s", rec.Spec.Config.Kind, s.To)
	if set {
		var named []string
		for _, m := range Members(rec) {
			s.Members = append(s.Members, v1alpha1.MemberStatus{Kind: string(m.Kind), Name: m.Name, To: to[m], From: MostCommon(froms(consumers, m, true))})
			named = append(named, m.String()+" "+to[m])
		}
		what, s.MemberList = "the change set "+strings.Join(named, ", "), memberList(rec)
	}
	msg := fmt.Sprintf("delivering %s to %d workloads in %d waves", what, len(consumers), len(s.Waves))
	if s.From == "" {
		msg += "; no consumer's revision names a snapshot of the old content (revisions were turned on after they were last stamped), so pods created for consumers not reached yet read the new content"
	}
	s.Message = msg
	c.history("", v1alpha1.HistoryStarted, "", msg)
	c.step.Write = true
	c.event(corev1.EventTypeNormal, EventStarted, fmt.Sprintf("%s (ConfigDelivery %s)", msg, rec.Name))
	return c.then(soon)
}

// Finish moves a delivery to state, a final one or Halted, for reason
// (a Reason constant) with message; by is the person who asked, if one
// did. A halted delivery is not over: it keeps no FinishedAt.
func Finish(rec *v1alpha1.ConfigDelivery, state v1alpha1.DeliveryState, reason, message, by string, now time.Time) Step {
	c := change{rec: rec, now: metav1.NewTime(now), step: Step{Status: rec.Status}}
	c.finish(state, reason, message, by)
	return c.step
}
