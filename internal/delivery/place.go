// Package delivery decides how a content change of shared config reaches
// its consumers in waves: where each consumer is placed (Place), which
// revision of the config a consumer's template must name while a delivery
// is open (Pin), whether a wave's workloads are healthy (HealthOf), and how
// a ConfigDelivery moves from state to state (Next, Begin, Finish). The
// decisions are pure; Records and the Pinner read the records from a cache.
// The delivery controller moves deliveries on with these answers; stamps
// (internal/stamp) take Pin's through the Pinner.
package delivery

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/revision"
)

// Consumer is one workload that consumes the delivered config.
type Consumer struct {
	// Kind is its kind as records name it (workload.Type.RecordKind).
	Kind, Name string
	Labels     map[string]string
	// From is the snapshot of the delivered config its template names now
	// ("" when none).
	From string
	// Froms, for a change set, are the snapshots of the members its
	// template names now (a member it names none of is absent).
	Froms revision.Snapshots
}

// Place puts consumers into waves. Consumers are taken in the order of
// kind, then name, so the same consumers are always placed the same way.
// A wave takes, of the consumers not placed yet, those its selector
// matches, or its percent of them (rounded up, at least one), or, with
// neither, all of them; consumers no wave takes go to the last wave. Waves
// left empty are left out.
func Place(waves []v1alpha1.Wave, consumers []Consumer) []v1alpha1.WaveStatus {
	left := slices.Clone(consumers)
	slices.SortFunc(left, func(a, b Consumer) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	out := make([]v1alpha1.WaveStatus, len(waves))
	for i, w := range waves {
		out[i] = v1alpha1.WaveStatus{Name: w.Name, Approval: w.Approval}
		var taken []Consumer
		switch {
		case w.Selector != nil:
			sel, err := metav1.LabelSelectorAsSelector(w.Selector)
			if err != nil {
				sel = labels.Nothing() // refused at admission; selects nobody
			}
			taken, left = split(left, func(c Consumer) bool { return sel.Matches(labels.Set(c.Labels)) })
		case w.Percent != nil:
			n := (len(left)*int(*w.Percent) + 99) / 100
			if n == 0 && len(left) > 0 {
				n = 1
			}
			taken, left = left[:n:n], left[n:]
		default:
			taken, left = left, nil
		}
		out[i].Workloads = targets(taken)
	}
	if len(left) > 0 && len(out) > 0 {
		last := &out[len(out)-1]
		last.Workloads = append(last.Workloads, targets(left)...)
	}
	return slices.DeleteFunc(out, func(w v1alpha1.WaveStatus) bool { return len(w.Workloads) == 0 })
}

func split(cs []Consumer, take func(Consumer) bool) (taken, left []Consumer) {
	for _, c := range cs {
		if take(c) {
			taken = append(taken, c)
		} else {
			left = append(left, c)
		}
	}
	return taken, left
}

func targets(cs []Consumer) []v1alpha1.DeliveryTarget {
	out := make([]v1alpha1.DeliveryTarget, len(cs))
	for i, c := range cs {
		out[i] = v1alpha1.DeliveryTarget{Kind: c.Kind, Name: c.Name, From: c.From}
		if len(c.Froms) > 0 {
			named := revision.Snapshots{}
			for src, snap := range c.Froms {
				if snap != "" {
					named[src] = snap
				}
			}
			out[i].Froms = named.Encode()
		}
	}
	return out
}

// MostCommon is the most common of snapshots (the first by name of equally
// common ones), "" when none is named: the revision a consumer created
// during a delivery keeps, or the content most channels hold.
func MostCommon(snapshots []string) string {
	n := map[string]int{}
	best := ""
	for _, s := range snapshots {
		if s != "" {
			n[s]++
		}
	}
	for s, k := range n {
		if best == "" || k > n[best] || (k == n[best] && s < best) {
			best = s
		}
	}
	return best
}

// froms lists the snapshots of src consumers' templates name.
func froms(cs []Consumer, src revision.Source, set bool) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.From
		if set {
			out[i] = c.Froms[src]
		}
	}
	return out
}
