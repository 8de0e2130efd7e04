package delivery

import (
	"cmp"
	"slices"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// Want is the one decision of which revision of delivered config a
// consumer holds while a delivery is open. Every holder asks it: the stamp
// of a workload's template (a restart-based consumer: its pins), the
// channels controller (a hot wave's channel), and the gate, which waits
// until a started wave holds what Want gives it.

// Holder is what holds a revision of delivered config: a workload (Kind
// as records name it, and Name: a consumer of restart-based config, placed
// in a wave by Begin) or a wave (Wave: its channel of hot config).
type Holder struct {
	Kind, Name string
	Wave       string
}

// Ask is one question to Want: which revision of Config should Holder
// hold now?
type Ask struct {
	// Record is Config's latest delivery (nil: none yet). A record of
	// other config says nothing of Config.
	Record *v1alpha1.ConfigDelivery
	Config revision.Source
	// Current is the snapshot name of Config's content now.
	Current string
	Holder  Holder
	// Held is the snapshot Holder holds now: the one a workload's stored
	// template names, the content a channel holds ("" for none: a
	// template naming no snapshot reads the original, a channel not
	// written yet takes whatever Want gives).
	Held string
}

// Why says why a holder holds what Want gives it.
type Why string

const (
	// WhyCurrent: no open delivery holds the config back (its delivery is
	// finished or was cancelled): the content of now.
	WhyCurrent Why = "Current"
	// WhyKept: no delivery of the content of now has started (there is
	// none yet, or the content changed again and its delivery is still to
	// start): the holder keeps what it holds.
	WhyKept Why = "Kept"
	// WhyReached: the holder's wave has started: the delivered content.
	WhyReached Why = "Reached"
	// WhyWaiting: the holder's wave has not started: the revision the
	// delivery assigned it when it started (what it held then), or, where
	// none was kept, what it holds.
	WhyWaiting Why = "Waiting"
	// WhyRolledBack: the holder's wave failed and was rolled back: what it
	// held before the wave started.
	WhyRolledBack Why = "RolledBack"
)

// Wanted is Want's answer: the snapshot the holder should hold ("" where
// it keeps holding none) and why.
type Wanted struct {
	Revision string
	Why      Why
}

// Reached says that an open delivery has reached the holder: its wave
// started, rolled back or not. The delivery then waits until the holder
// holds exactly Revision, so a workload's whole stamp counts, not only its
// hash.
func (w Wanted) Reached() bool { return w.Why == WhyReached || w.Why == WhyRolledBack }

// Want decides which revision of a.Config a.Holder should hold now.
//
//   - No delivery of the content of now has started: the holder keeps
//     what it holds.
//   - That delivery is finished (or was cancelled): the content of now.
//   - It is open: a holder whose wave has started holds the delivered
//     content, unless the wave failed and was rolled back; any other holds
//     what it held when the delivery started (its From). A workload the
//     delivery did not place (created since) belongs to the last wave and
//     holds what most consumers held (the record's From); a wave the
//     record does not know (added to the policy since) goes with the last
//     wave, and a wave without a From takes the record's.
//
// Where no revision was kept for the holder (From ""), it keeps what it
// holds.
func Want(a Ask) Wanted {
	rec := a.Record
	if rec == nil || !delivers(rec, a.Config) {
		return Wanted{Revision: a.Held, Why: WhyKept}
	}
	if to := DeliveredTo(rec, a.Config); to == "" || to != a.Current {
		return Wanted{Revision: a.Held, Why: WhyKept}
	}
	if !Open(rec.Status.State) {
		return Wanted{Revision: a.Current, Why: WhyCurrent}
	}
	i, from := position(rec, a.Holder, a.Config)
	why := WhyWaiting
	if reached(rec, i) {
		if !RolledBack(rec, i) {
			return Wanted{Revision: a.Current, Why: WhyReached}
		}
		why = WhyRolledBack
	}
	return Wanted{Revision: cmp.Or(from, a.Held), Why: why}
}

// position is the index of the wave holder belongs to, and the revision
// of src the delivery assigned it when it started. A workload is found
// among the waves' targets: one no wave names (created during the
// delivery) belongs to the last wave with the record's From. A wave is
// found by name: one the record does not know goes with the last wave, and
// a wave without a From takes the record's (waveFrom).
func position(rec *v1alpha1.ConfigDelivery, h Holder, src revision.Source) (int, string) {
	waves := rec.Status.Waves
	if h.Wave == "" {
		i, t := Find(rec, h.Kind, h.Name)
		if t == nil {
			return len(waves) - 1, member(rec, src).From
		}
		return i, targetFrom(rec, t, src)
	}
	if len(waves) == 0 {
		return -1, ""
	}
	i := slices.IndexFunc(waves, func(w v1alpha1.WaveStatus) bool { return w.Name == h.Wave })
	if i < 0 {
		i = len(waves) - 1
	}
	return i, waveFrom(rec, &waves[i], src)
}

// Delivers is the config rec delivers: for a change set, its first
// member (Members lists them all).
func Delivers(rec *v1alpha1.ConfigDelivery) revision.Source {
	return revision.Source{Kind: refs.Kind(rec.Spec.Config.Kind), Name: rec.Spec.Config.Name}
}

// Placed says whether rec holds consumers back: its placement is written
// (Begin), and it is still open (rolling, waiting for a person, or
// halted). A record whose creator stopped before placing it holds nobody
// yet; the next look places it.
func Placed(rec *v1alpha1.ConfigDelivery) bool {
	return rec.Status.State != "" && Open(rec.Status.State)
}

// Latest is the newest of recs that delivers src (nil: none), by creation,
// then by sequence: the record every decision about src reads.
func Latest(recs []*v1alpha1.ConfigDelivery, src revision.Source) *v1alpha1.ConfigDelivery {
	var out *v1alpha1.ConfigDelivery
	for _, r := range recs {
		if delivers(r, src) && (out == nil || newer(r, out)) {
			out = r
		}
	}
	return out
}
