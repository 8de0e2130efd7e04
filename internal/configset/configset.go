// Package configset decides where a ConfigSet's version stands: which
// members it waits for, when it stops, when its delivery starts, and the
// conditions pipelines wait on. It reads nothing: the delivery controller
// gathers what it sees (Seen) and writes what it returns.
package configset

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// Reasons of a ConfigSet's conditions, besides its delivery's.
const (
	// ReasonWaitingForMembers: some members do not carry the version yet.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonTimedOut: they did not within timeoutSeconds; nothing of the
	// version is delivered.
	ReasonTimedOut = "TimedOut"
	// ReasonMemberClaimed: a member belongs to an older set.
	ReasonMemberClaimed = "MemberClaimed"
	// ReasonMembersIncompatible: the members do not share a reload mode,
	// or one cannot be delivered (a Secret without revisions.secrets).
	ReasonMembersIncompatible = "MembersIncompatible"
	// ReasonStarting: every member carries the version; its delivery is
	// being started.
	ReasonStarting = "Starting"
	// ReasonMembersReady: every member carries the version, and delivery
	// is off in the namespace: each rolled out as it was written.
	ReasonMembersReady = "MembersReady"
	// ReasonNothingToDeliver: every member carries the version and no
	// workload reads any of them.
	ReasonNothingToDeliver = "NothingToDeliver"
)

// Member is what one look saw of one member.
type Member struct {
	Exists bool
	// Version is its configward.dev/config-set-version annotation.
	Version string
	// Hot: it reloads in place (hot config); its changes go through
	// channels.
	Hot bool
	// Delivered: its changes are delivered in waves in the namespace:
	// delivery is on and its content is kept (delivery.Delivered; for hot
	// config, copied into channels: delivery.Channelled).
	Delivered bool
	// Current is the snapshot name of its content now.
	Current string
}

// Seen is what one look at a set saw.
type Seen struct {
	Members map[revision.Source]Member
	// Records are the deliveries of this set's versions, newest first.
	Records []*v1alpha1.ConfigDelivery
	// DeliveryOn: a ConfigPolicy turns delivery on in the namespace.
	DeliveryOn bool
	// ClaimedBy names, for a member an older set lists too, that set.
	ClaimedBy map[revision.Source]string
	// NoConsumers: no workload reads any member (the look that would
	// start the delivery found none).
	NoConsumers bool
}

// Verdict is what to write and do.
type Verdict struct {
	Status v1alpha1.ConfigSetStatus
	// Start: every member carries the version and no delivery of it
	// exists: start one, of every member.
	Start bool
	// Requeue is when to look again (0: when something changes).
	Requeue time.Duration
}

// Members are the set's members as sources.
func Members(set *v1alpha1.ConfigSet) []revision.Source {
	out := make([]revision.Source, len(set.Spec.Members))
	for i, m := range set.Spec.Members {
		out[i] = revision.Source{Kind: refs.Kind(m.Kind), Name: m.Name}
	}
	delivery.SortMembers(out)
	return out
}

// Hot says whether a member of reload mode m reloads in place: hot config
// reaches pods through channels and reload agents, the rest by re-stamping
// their workloads, and one delivery cannot move a set both ways. Members
// are told apart by this alone, wherever they are judged.
func Hot(m inventory.Mode) bool { return m == inventory.Hot }

// Lists says whether set lists src.
func Lists(set *v1alpha1.ConfigSet, src revision.Source) bool {
	return slices.ContainsFunc(set.Spec.Members, func(m v1alpha1.ConfigSetMember) bool { return m.Kind == string(src.Kind) && m.Name == src.Name })
}

// Claimant is the set among sets that src belongs to: the oldest that
// lists it (then by name), nil when none does. A newer set that lists it
// too is stalled (MemberClaimed), whichever webhook replica let it in.
func Claimant(sets []v1alpha1.ConfigSet, src revision.Source) *v1alpha1.ConfigSet {
	var out *v1alpha1.ConfigSet
	for i := range sets {
		s := &sets[i]
		if s.DeletionTimestamp == nil && Lists(s, src) && (out == nil || older(s, out)) {
			out = s
		}
	}
	return out
}

func older(a, b *v1alpha1.ConfigSet) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// Of is the delivery of set's version among recs (newest first), nil when
// none: each generation of the set is delivered once, so a version
// written again (a rollback to it) is delivered again.
func Of(set *v1alpha1.ConfigSet, recs []*v1alpha1.ConfigDelivery) *v1alpha1.ConfigDelivery {
	for _, r := range recs {
		if c := r.Spec.ConfigSet; c != nil && c.Name == set.Name && c.Version == set.Spec.Version && c.Generation == set.Generation {
			return r
		}
	}
	return nil
}

// Latest is the newest delivery of the ConfigSet named set among recs,
// nil when none.
func Latest(recs []*v1alpha1.ConfigDelivery, set string) *v1alpha1.ConfigDelivery {
	var out *v1alpha1.ConfigDelivery
	for _, r := range recs {
		if c := r.Spec.ConfigSet; c != nil && c.Name == set && (out == nil || c.Generation > out.Spec.ConfigSet.Generation) {
			out = r
		}
	}
	return out
}

// Timeout is the set's timeoutSeconds (300 where unset).
func Timeout(set *v1alpha1.ConfigSet) time.Duration {
	if set.Spec.TimeoutSeconds == nil {
		return 300 * time.Second
	}
	return time.Duration(*set.Spec.TimeoutSeconds) * time.Second
}

// Judge decides where set's version stands at now, from what one look saw.
//
//   - A member an older set lists: stalled (a config belongs to one set).
//   - Members that do not share a reload mode, or one delivery cannot
//     keep: stalled, saying which.
//   - A version already stopped (timed out) stays stopped: a member that
//     arrives late delivers nothing; a new version (or any new generation
//     of the set) starts over.
//   - Members that do not carry the version: waiting, naming them, until
//     timeoutSeconds after the set was first seen at this generation; then
//     stopped, nothing of the version delivered.
//   - Every member carries it: delivery off, ready (each rolled out as
//     written); no delivery of the version yet, start one; else what its
//     delivery says (delivery.Observe's conditions), and any member whose
//     content changed since without a new version is named: it is held
//     until the set's next version.
func Judge(set *v1alpha1.ConfigSet, seen Seen, now time.Time) Verdict {
	st := v1alpha1.ConfigSetStatus{Version: set.Spec.Version, Conditions: set.Status.Conditions, WaitingSince: set.Status.WaitingSince}
	fresh := set.Status.ObservedGeneration != set.Generation || set.Status.Version != set.Spec.Version || st.WaitingSince == nil
	if fresh {
		t := metav1.NewTime(now)
		st.WaitingSince = &t
	}
	st.ObservedGeneration = set.Generation
	v := Verdict{}
	members := Members(set)
	var missing, claimed, hot, cold, undelivered []string
	for _, m := range members {
		seenM := seen.Members[m]
		if !seenM.Exists || seenM.Version != set.Spec.Version {
			missing = append(missing, m.String())
			st.WaitingFor = append(st.WaitingFor, v1alpha1.ConfigSetMember{Kind: string(m.Kind), Name: m.Name})
		}
		if other := seen.ClaimedBy[m]; other != "" {
			claimed = append(claimed, fmt.Sprintf("%s (ConfigSet %s)", m, other))
		}
		if !seenM.Exists {
			continue
		}
		if seenM.Hot {
			hot = append(hot, m.String())
		} else {
			cold = append(cold, m.String())
		}
		if seen.DeliveryOn && !seenM.Delivered {
			undelivered = append(undelivered, m.String())
		}
	}
	stopped := !fresh && isStalled(set.Status.Conditions, ReasonTimedOut)
	rec := Of(set, seen.Records)
	if rec != nil {
		st.Delivery = rec.Name
	}
	switch {
	case len(claimed) > 0:
		st.Conditions = conditions(st.Conditions, set.Generation, now, stalledState, ReasonMemberClaimed,
			"a config belongs to one set, and these belong to an older one: "+strings.Join(claimed, ", ")+". Take them out of one of the sets.")
	case len(hot) > 0 && len(cold) > 0:
		st.Conditions = conditions(st.Conditions, set.Generation, now, stalledState, ReasonMembersIncompatible,
			fmt.Sprintf("members share their reload mode: %s reload in place (hot) and %s roll their workloads; nothing of the set is delivered until they agree", strings.Join(hot, ", "), strings.Join(cold, ", ")))
	case len(undelivered) > 0:
		st.Conditions = conditions(st.Conditions, set.Generation, now, stalledState, ReasonMembersIncompatible,
			strings.Join(undelivered, ", ")+" cannot be delivered in waves (a Secret needs revisions.secrets in the namespace's ConfigPolicy): nothing of the set is delivered")
	case stopped:
		// Kept as it was: the version stopped for good.
	case len(missing) > 0:
		deadline := st.WaitingSince.Add(Timeout(set))
		if !now.Before(deadline) {
			st.Conditions = conditions(st.Conditions, set.Generation, now, stalledState, ReasonTimedOut,
				fmt.Sprintf("%s did not carry version %s within %s: nothing of the version is delivered. Write the set with a new version to try again.",
					strings.Join(missing, ", "), set.Spec.Version, Timeout(set)))
			break
		}
		st.Conditions = conditions(st.Conditions, set.Generation, now, reconcilingState, ReasonWaitingForMembers,
			fmt.Sprintf("waiting for %s to carry version %s (%s: %s); nothing moves until every member does",
				strings.Join(missing, ", "), set.Spec.Version, v1alpha1.ConfigSetVersionAnnotation, set.Spec.Version))
		v.Requeue = deadline.Sub(now) + time.Second
	case !seen.DeliveryOn:
		st.Conditions = conditions(st.Conditions, set.Generation, now, readyState, ReasonMembersReady,
			"every member carries version "+set.Spec.Version+"; delivery is off in the namespace, so each rolled out as it was written")
	case rec == nil && seen.NoConsumers:
		st.Conditions = conditions(st.Conditions, set.Generation, now, readyState, ReasonNothingToDeliver,
			"every member carries version "+set.Spec.Version+" and no workload reads any of them: there is nothing to deliver")
	case rec == nil:
		v.Start = true
		st.Conditions = conditions(st.Conditions, set.Generation, now, reconcilingState, ReasonStarting,
			"every member carries version "+set.Spec.Version+": starting its delivery")
	default:
		observed := delivery.Observe(rec.Status, rec.Generation, metav1.NewTime(now))
		c := meta.FindStatusCondition(observed.Conditions, v1alpha1.ConditionReady)
		state := reconcilingState
		switch {
		case meta.IsStatusConditionTrue(observed.Conditions, v1alpha1.ConditionReady):
			state = readyState
		case meta.IsStatusConditionTrue(observed.Conditions, v1alpha1.ConditionStalled):
			state = stalledState
		}
		message := "ConfigDelivery " + rec.Name + ": " + c.Message
		var drifted []string
		for _, m := range members {
			if to := delivery.DeliveredTo(rec, m); to != "" && seen.Members[m].Current != to {
				drifted = append(drifted, m.String())
			}
		}
		if len(drifted) > 0 {
			message += "; " + strings.Join(drifted, ", ") + " changed since without a new version: held until the set's next version"
		}
		st.Conditions = conditions(st.Conditions, set.Generation, now, state, c.Reason, message)
	}
	v.Status = st
	return v
}

type state int

const (
	reconcilingState state = iota
	readyState
	stalledState
)

// conditions sets Ready, Reconciling and Stalled for state, as a
// record's are set (delivery.SetConditions).
func conditions(cs []metav1.Condition, generation int64, now time.Time, s state, reason, message string) []metav1.Condition {
	return delivery.SetConditions(cs, generation, metav1.NewTime(now), s == readyState, s == stalledState, reason, message)
}

// isStalled says whether cs say Stalled for reason.
func isStalled(cs []metav1.Condition, reason string) bool {
	c := meta.FindStatusCondition(cs, v1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}
