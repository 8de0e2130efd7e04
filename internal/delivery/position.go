package delivery

import (
	"strings"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Position is where one workload stands in one open delivery.
type Position struct {
	// Record is the ConfigDelivery; Config its config ("ConfigMap/app";
	// every member of a change set: "ConfigMap/a+Secret/b").
	Record, Config string
	// Wave is the workload's wave, Index its place (from 0) of Waves.
	Wave         string
	Index, Waves int
	// Started: its wave has started (it has the delivered revision, or is
	// getting it); RolledBack: its wave failed and went back. Hot: the
	// delivery is of hot config, whose waves are groups of pods (a
	// workload may have pods in several).
	Started, RolledBack, Hot bool
	// State and CurrentWave are the delivery's; Message what its current
	// wave waits for.
	State       v1alpha1.DeliveryState
	CurrentWave string
	Message     string
	// Checks are what the analysis checks of the workload's wave (or of
	// the bake) measured last, where its wave is the current one.
	Checks []v1alpha1.CheckStatus
}

// Positions maps each workload ("Kind/name", Kind as records name it: workload.RecordKindOf) that an
// open delivery among recs holds or moves to where it stands; workloads of
// waves already completed are left out (delivered: nothing to say).
func Positions(recs []v1alpha1.ConfigDelivery) map[string][]Position {
	out := map[string][]Position{}
	for i := range recs {
		d := &recs[i]
		if !Placed(d) {
			continue
		}
		cur := CurrentWave(d)
		for wi, w := range d.Status.Waves {
			if wi < cur {
				continue
			}
			p := Position{Record: d.Name, Config: configsOf(d), Wave: w.Name, Index: wi, Waves: len(d.Status.Waves),
				Started: w.StartedAt != nil, RolledBack: RolledBack(d, wi), Hot: d.Spec.Hot,
				State: d.Status.State, CurrentWave: d.Status.CurrentWave, Message: d.Status.Message}
			if wi == cur {
				p.Checks = w.Checks
				if d.Status.Bake != nil {
					p.Checks = d.Status.Bake.Checks
				}
			}
			for _, t := range w.Workloads {
				out[t.Kind+"/"+t.Name] = append(out[t.Kind+"/"+t.Name], p)
			}
		}
	}
	return out
}

// configsOf names the configs d delivers, joined with "+".
func configsOf(d *v1alpha1.ConfigDelivery) string {
	members := Members(d)
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.String()
	}
	return strings.Join(names, "+")
}
