package deliveries

// Change sets: configs that workloads consume together and that changed
// together are delivered by one record (delivery.Members), so no
// workload's template ever holds one member's new content with another's
// old, and a person approves, halts or rolls back all of them at once.

import (
	"context"
	"slices"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/stamp"
)

// changeSet is what one delivery delivers: its members (the first names
// the record), the content of each now, each as the look saw it, and the
// records of every member (newest first, each once).
type changeSet struct {
	members  []revision.Source
	currents revision.Snapshots
	configs  map[revision.Source]inventory.Object
	recs     []*v1alpha1.ConfigDelivery
	// declared is the ConfigSet version delivered (nil: a change the
	// batch window grouped).
	declared *v1alpha1.ConfigSetVersion
}

// set reports whether cs's record names its members: more than one, or
// a declared set (of one member, too).
func (cs *changeSet) set() bool { return len(cs.members) > 1 || cs.declared != nil }

// single is the change set of src alone.
func single(src revision.Source, current string, config inventory.Object, recs []*v1alpha1.ConfigDelivery) *changeSet {
	return &changeSet{members: []revision.Source{src}, currents: revision.Snapshots{src: current},
		configs: map[revision.Source]inventory.Object{src: config}, recs: recs}
}

// gatherSet grows the change of src (its batch window passed) into its
// change set. A config joins when a consumer of a member also reads it, it
// is delivered the same way in the namespace (hot: through channels;
// otherwise restart-based), and it changed too: no delivery of its content
// now has started, and some consumer of the set is behind it (hot: one of
// its channels holds other content). A config an open delivery of a member
// also delivers joins as well, with its content now, so superseding that
// delivery loses none of its members. Members are found transitively, up
// to delivery.MaxMembers; a flapping config is left to deliver on its own
// once it settles, and a declared set's member moves with its set only.
func (d *deliveries) gatherSet(ctx context.Context, ns string, first *changeSet, s configpolicy.NamespacePolicy, hot bool) (*changeSet, error) {
	cs := first
	src := first.members[0]
	seenRecs := map[string]bool{}
	for _, r := range first.recs {
		seenRecs[r.Name] = true
	}
	considered := map[revision.Source]bool{src: true}
	// join adds c when it is delivered as src is and, unless forced (an
	// open delivery of a member delivers it), changed and behind.
	join := func(c revision.Source, forced bool, behind func(current string) bool) (bool, error) {
		if considered[c] || len(cs.members) >= delivery.MaxMembers {
			return false, nil
		}
		o, err := d.inv.Get(ctx, c.Kind, ns, c.Name)
		if err != nil || !o.Exists || delivery.Channelled(o, s) != hot || !hot && !delivery.Delivered(o, s) {
			return false, err
		}
		// A declared set's member moves with its set's version only.
		if owner, err := d.claimant(ctx, ns, c); err != nil || owner != nil {
			return false, err
		}
		if _, flapping := d.opts.Flapping.Object(s.Flapping, ns, c.Kind, c.Name); flapping {
			return false, nil
		}
		current := d.inv.SnapshotName(d.opts.Keys.Current().Bytes(), o)
		recs, err := d.opts.Records.Of(ctx, ns, c)
		if err != nil {
			return false, err
		}
		latest := delivery.Latest(recs, c)
		changed := latest == nil || delivery.DeliveredTo(latest, c) != current || latest.Status.State == v1alpha1.DeliveryCancelled
		if !forced && (!changed || !behind(current)) {
			return false, nil
		}
		considered[c] = true
		cs.members = append(cs.members, c)
		cs.currents[c], cs.configs[c] = current, o
		for _, r := range recs {
			if !seenRecs[r.Name] {
				seenRecs[r.Name] = true
				cs.recs = append(cs.recs, r)
			}
		}
		return true, nil
	}
	for i := 0; i < len(cs.members); i++ {
		m := cs.members[i]
		// The open delivery this one supersedes: its other members come
		// along.
		if latest := delivery.Latest(cs.recs, m); latest != nil && delivery.Placed(latest) {
			for _, o := range delivery.Members(latest) {
				if _, err := join(o, true, nil); err != nil {
					return nil, err
				}
			}
		}
		ws, err := d.consumersOf(ctx, ns, m)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			spec, _ := w.PodSpec()
			carried := stamp.Snapshots(w.Stamp())
			for _, c := range refs.ConsumedBy(spec) {
				other := revision.Source{Kind: c.Kind, Name: c.Name}
				if other.Kind != refs.ConfigMap && other.Kind != refs.Secret {
					continue
				}
				behind := func(current string) bool { return carried[other] != current }
				if hot {
					behind = func(current string) bool { return d.channelBehind(ctx, ns, other, current) }
				}
				if _, err := join(other, false, behind); err != nil {
					return nil, err
				}
			}
		}
	}
	delivery.SortMembers(cs.members)
	delivery.SortNewestFirst(cs.recs)
	return cs, nil
}

// channelBehind says whether a channel of src holds other content than
// current (a list the cache cannot answer says no: the config is left to
// deliver on its own).
func (d *deliveries) channelBehind(ctx context.Context, ns string, src revision.Source, current string) bool {
	held, err := channel.List(ctx, d.cache, ns, src.Kind, src.Name)
	if err != nil {
		return false
	}
	for _, h := range held {
		if h.Content != current {
			return true
		}
	}
	return false
}

// setConsumers lists the top-level workloads that consume any member of
// cs, each once, with the snapshot of each member its template names.
func (d *deliveries) setConsumers(ctx context.Context, ns string, cs *changeSet) ([]delivery.Consumer, error) {
	byName := map[[2]string]int{}
	var out []delivery.Consumer
	for _, m := range cs.members {
		ws, err := d.consumersOf(ctx, ns, m)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			key := [2]string{w.Type.RecordKind(), w.Obj.GetName()}
			i, found := byName[key]
			if !found {
				i = len(out)
				byName[key] = i
				out = append(out, delivery.Consumer{Kind: key[0], Name: key[1], Labels: w.Obj.GetLabels(), Froms: revision.Snapshots{}})
			}
			out[i].Froms[m] = stamp.Snapshots(w.Stamp())[m]
		}
	}
	return out, nil
}

// setBreakGlass is the break-glass write a change set's delivery honours:
// only when every member's change was one (each with its own reason, as
// delivery.BreakGlass decides for one config), so one emergency write
// cannot carry its neighbours' ordinary changes past their approvals. The
// reason names each member's.
func setBreakGlass(members []revision.Source, each func(revision.Source) *v1alpha1.BreakGlassDelivery) *v1alpha1.BreakGlassDelivery {
	var out *v1alpha1.BreakGlassDelivery
	for _, m := range members {
		bg := each(m)
		if bg == nil {
			return nil
		}
		if out == nil {
			out = &v1alpha1.BreakGlassDelivery{Reason: m.String() + ": " + bg.Reason, Immediate: bg.Immediate}
			continue
		}
		out.Reason += "; " + m.String() + ": " + bg.Reason
		out.Immediate = out.Immediate && bg.Immediate
	}
	return out
}

// memberRefs are the members as a record's spec names them, each with its
// resourceVersion as the look saw it.
func memberRefs(members []revision.Source, configs map[revision.Source]inventory.Object) []v1alpha1.ConfigRef {
	out := make([]v1alpha1.ConfigRef, len(members))
	for i, m := range members {
		out[i] = v1alpha1.ConfigRef{Kind: string(m.Kind), Name: m.Name, ResourceVersion: configs[m].ResourceVersion}
	}
	return slices.Clip(out)
}
