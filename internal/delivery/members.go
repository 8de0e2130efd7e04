package delivery

import (
	"cmp"
	"slices"
	"strings"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// A delivery delivers one config, or a change set: configs that workloads
// consume together and that changed together (within one batch window),
// delivered as one so that no template holds one member's new content with
// another's old. Every fact of a record about one config is read here, so
// a set needs no second decider.

// MaxMembers bounds a change set: configs beyond it (a namespace where
// every workload reads everything) are delivered on their own.
const MaxMembers = 64

// Members are the configs rec delivers, its first (Delivers) first.
func Members(rec *v1alpha1.ConfigDelivery) []revision.Source {
	if len(rec.Spec.Members) == 0 {
		return []revision.Source{Delivers(rec)}
	}
	out := make([]revision.Source, len(rec.Spec.Members))
	for i, m := range rec.Spec.Members {
		out[i] = revision.Source{Kind: refs.Kind(m.Kind), Name: m.Name}
	}
	return out
}

// IsSet says whether rec delivers a change set.
func IsSet(rec *v1alpha1.ConfigDelivery) bool { return len(rec.Spec.Members) > 0 }

// memberList names rec's members for `kubectl get`: "a,b" ("" for one
// config).
func memberList(rec *v1alpha1.ConfigDelivery) string {
	names := make([]string, 0, len(rec.Spec.Members))
	for _, m := range rec.Spec.Members {
		names = append(names, m.Name)
	}
	return strings.Join(names, ",")
}

// SortMembers orders the members of a change set: by kind, then name.
func SortMembers(srcs []revision.Source) {
	slices.SortFunc(srcs, func(a, b revision.Source) int {
		return cmp.Or(strings.Compare(string(a.Kind), string(b.Kind)), strings.Compare(a.Name, b.Name))
	})
}

// MembersNamed says the members of rec for messages: "ConfigMap a" alone,
// "ConfigMap/a, Secret/b" for a set.
func MembersNamed(rec *v1alpha1.ConfigDelivery) string {
	if !IsSet(rec) {
		return rec.Spec.Config.Kind + " " + rec.Spec.Config.Name
	}
	names := make([]string, 0, len(rec.Spec.Members))
	for _, m := range rec.Spec.Members {
		names = append(names, m.Kind+"/"+m.Name)
	}
	return "the change set " + strings.Join(names, ", ")
}

// delivers says whether rec delivers src, alone or in a set.
func delivers(rec *v1alpha1.ConfigDelivery, src revision.Source) bool {
	if !IsSet(rec) {
		return rec.Spec.Config.Kind == string(src.Kind) && rec.Spec.Config.Name == src.Name
	}
	return slices.ContainsFunc(rec.Spec.Members, func(m v1alpha1.ConfigRef) bool { return m.Kind == string(src.Kind) && m.Name == src.Name })
}

// member is src's status in rec: for a single config, the record's own To
// and From.
func member(rec *v1alpha1.ConfigDelivery, src revision.Source) v1alpha1.MemberStatus {
	if !IsSet(rec) {
		return v1alpha1.MemberStatus{Kind: string(src.Kind), Name: src.Name, To: rec.Status.To, From: rec.Status.From}
	}
	for _, m := range rec.Status.Members {
		if m.Kind == string(src.Kind) && m.Name == src.Name {
			return m
		}
	}
	return v1alpha1.MemberStatus{}
}

// DeliveredTo is the snapshot of src that rec delivers ("" when rec does
// not deliver src, or is not placed yet).
func DeliveredTo(rec *v1alpha1.ConfigDelivery, src revision.Source) string {
	return member(rec, src).To
}

// targetFrom is the snapshot of src that target t read when rec started.
func targetFrom(rec *v1alpha1.ConfigDelivery, t *v1alpha1.DeliveryTarget, src revision.Source) string {
	if !IsSet(rec) {
		return t.From
	}
	froms, _ := revision.Decode(t.Froms)
	return froms[src]
}

// DeliveredAt is the resourceVersion of src when rec started ("" when rec
// does not say).
func DeliveredAt(rec *v1alpha1.ConfigDelivery, src revision.Source) string {
	for _, m := range append([]v1alpha1.ConfigRef{rec.Spec.Config}, rec.Spec.Members...) {
		if m.Kind == string(src.Kind) && m.Name == src.Name {
			return m.ResourceVersion
		}
	}
	return ""
}

// MemberChannel is the channel of one member of a hot record in one wave.
type MemberChannel struct {
	Config  revision.Source
	Channel string
}

// WaveChannels are the channels of wave w of hot record rec, one per
// member, its first member's first: a set's wave holds every member's
// channel, and the gate waits until each holds the set's content.
func WaveChannels(rec *v1alpha1.ConfigDelivery, w *v1alpha1.WaveStatus) []MemberChannel {
	if !IsSet(rec) {
		return []MemberChannel{{Config: Delivers(rec), Channel: w.Channel}}
	}
	members := Members(rec)
	out := make([]MemberChannel, len(members))
	for i, m := range members {
		out[i] = MemberChannel{Config: m, Channel: channel.Name(m.Name, w.Name)}
	}
	return out
}

// waveFrom is the snapshot of src the channel of wave w held when rec
// started ("" when none was kept): for a change set, from the wave's
// Froms (a declared set of one member has none: its wave's From is its
// first member's), else the member's From.
func waveFrom(rec *v1alpha1.ConfigDelivery, w *v1alpha1.WaveStatus, src revision.Source) string {
	if !IsSet(rec) {
		return cmp.Or(w.From, rec.Status.From)
	}
	froms, _ := revision.Decode(w.Froms)
	if f := froms[src]; f != "" {
		return f
	}
	if src == Delivers(rec) && w.From != "" {
		return w.From
	}
	return member(rec, src).From
}
