package delivery

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
)

// BeginHot is the first step of a new record of hot config: its waves are
// the policy's, each with the channels its pods mount, what each channel
// holds now (its From, and for a change set each member's in Froms) and
// the workloads with pods in it (waves, built by the controller); to is
// the snapshot delivered of each member and from what most of its
// channels hold. Unlike a restart-based delivery, a wave with no pod now
// is kept: a pod created during the delivery joins it, and its channels
// must still wait for their turn.
//
// outside names the pods that mount an original itself (created before
// delivery was on, or while the Pod path was down): they get every change
// at once, and the record says so.
func BeginHot(rec *v1alpha1.ConfigDelivery, to, from revision.Snapshots, waves []v1alpha1.WaveStatus, pods int, outside []string, now time.Time) Step {
	c := change{rec: rec, now: metav1.NewTime(now)}
	s := &c.step.Status
	first := Delivers(rec)
	*s = v1alpha1.ConfigDeliveryStatus{
		State: v1alpha1.DeliveryProgressing, Reason: ReasonStarted,
		To: to[first], From: from[first], Waves: waves, StartedAt: c.stamp(),
	}
	what := fmt.Sprintf("hot %s %s", rec.Spec.Config.Kind, s.To)
	if IsSet(rec) {
		var named []string
		for _, m := range Members(rec) {
			s.Members = append(s.Members, v1alpha1.MemberStatus{Kind: string(m.Kind), Name: m.Name, To: to[m], From: from[m]})
			named = append(named, m.String()+" "+to[m])
		}
		what, s.MemberList = "the hot change set "+strings.Join(named, ", "), memberList(rec)
	}
	msg := fmt.Sprintf("delivering %s to %d pods in %d waves through their channels", what, pods, len(waves))
	if len(outside) > 0 {
		names := outside
		if len(names) > 5 {
			names = append(slices.Clone(names[:5]), fmt.Sprintf("and %d more", len(outside)-5))
		}
		msg += fmt.Sprintf("; %d pods mount %s directly and are outside the waves (they read every change at once; created before delivery was on, or while configward's webhook was down): %s",
			len(outside), MembersNamed(rec), strings.Join(names, ", "))
	}
	s.Message = msg
	c.history("", v1alpha1.HistoryStarted, "", msg)
	c.step.Write = true
	c.event(corev1.EventTypeNormal, EventStarted, fmt.Sprintf("%s (ConfigDelivery %s)", msg, rec.Name))
	return c.then(soon)
}

// HotHealthOf says where one pod of a started wave of hot config stands.
// config is the hot config as the pod's reload condition names it
// ("ConfigMap/<original>": a channel's reports speak for its original),
// want the ContentID of the content the wave delivers, started when
// the wave wrote its channel, and propagation how long the kubelet may
// take to swap the content in (DeliverySettings.PropagationSeconds).
//
//   - A container that restarted after the wave started fails it.
//   - With a reload agent: a rejection of the content fails the wave, and
//     so does a report its check did not confirm (reload.Checked: the
//     program never showed it acted on the content, as a program whose
//     file watcher gave up on a syntax error does); the pod waits
//     (Progressing) until it reports the content, then must be ready.
//   - Without one, nothing can say when the pod has the content: it waits
//     for propagation, then must be ready, and passes Unverified.
func HotHealthOf(p *corev1.Pod, config, want string, started time.Time, propagation time.Duration, now time.Time) (state, message string) {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if t := cs.LastTerminationState.Terminated; t != nil && !t.FinishedAt.Time.Before(started) {
			return Failed, fmt.Sprintf("container %q restarted after the wave wrote its channel (%d restarts)", cs.Name, cs.RestartCount)
		}
	}
	if !reload.ReportsHotConfig(p) {
		if left := started.Add(propagation).Sub(now); left > 0 {
			return Progressing, fmt.Sprintf("no reload agent: waiting %s more for the kubelet to deliver the content", left.Round(time.Second))
		}
		if !ready(p) {
			return Unready, "not ready"
		}
		return Unverified, fmt.Sprintf("no reload agent: nothing confirms it applied the content; ready and not restarted %s after the wave started", propagation)
	}
	st, e := reload.StateOf(p, reload.EntriesOf(p), config, want)
	switch st {
	case reload.StateRejected:
		return Failed, "its program rejected the content: " + e.Message
	case reload.StateOlder, reload.StatePending:
		return Progressing, "has not reported the content yet"
	case reload.StateUnconfirmed:
		if reload.Checked(p) {
			return Failed, "its reload check never showed the program applied the content: " + e.Message
		}
	}
	if !ready(p) {
		return Unready, "not ready"
	}
	return Healthy, ""
}
