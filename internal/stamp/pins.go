package stamp

import (
	"cmp"
	"context"

	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// pinned is what the open deliveries say of one workload's template.
type pinned struct {
	// snapshots is the snapshot each delivered config it consumes must be
	// pinned to; configs read at their current content are left out.
	snapshots revision.Snapshots
	// reached: a delivery has reached the workload (delivery.Wanted.Reached).
	reached bool
}

// pins asks delivery.Want, for each delivered config of consumed (what
// s's pod spec consumes), which revision the workload must name: the
// webhook and the rollout controller stamp with the answer, so neither can
// move a consumer past its wave. The record is the cache's; a write that
// moves a delivered config to a snapshot other than the cache's answer is,
// as a rule, configward's controller acting on a wave that started (or was
// rolled back) a moment ago, which this process's cache has not seen yet:
// that config's record is then read from the API server, and the writer
// judged by it, so the controller's stamp sticks the first time.
func (src Sources) pins(ctx context.Context, s Subject, consumed []refs.Consumption) (pinned, error) {
	var out pinned
	if src.Records == nil || s.Policy.Delivery == nil || s.Unpinned {
		return out, nil
	}
	ns := s.Workload.Obj.GetNamespace()
	stored, written := snapshotsOf(s.Stored), snapshotsOf(s.Written)
	holder := delivery.Holder{Kind: s.Workload.Type.RecordKind(), Name: s.Workload.Obj.GetName()}
	for _, c := range consumed {
		config := revision.Source{Kind: c.Kind, Name: c.Name}
		o, err := src.Inventory.Get(ctx, c.Kind, ns, c.Name)
		if err != nil {
			return pinned{}, err
		}
		if !delivery.Delivered(o, s.Policy) {
			continue
		}
		rec, err := src.Records.Latest(ctx, ns, config)
		if err != nil {
			return pinned{}, err
		}
		current := src.Inventory.SnapshotName(s.Key, o)
		ask := delivery.Ask{Record: rec, Config: config, Current: current, Holder: holder, Held: stored[config]}
		want := delivery.Want(ask)
		if w := written[config]; src.Records.Live != nil && w != "" && w != stored[config] && w != cmp.Or(want.Revision, current) {
			if ask.Record, err = src.Records.LiveLatest(ctx, ns, config); err != nil {
				return pinned{}, err
			}
			want = delivery.Want(ask)
		}
		out.reached = out.reached || want.Reached()
		if want.Revision != "" && want.Revision != current {
			if out.snapshots == nil {
				out.snapshots = revision.Snapshots{}
			}
			out.snapshots[config] = want.Revision
		}
	}
	return out, nil
}
