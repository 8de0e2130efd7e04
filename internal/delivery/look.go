package delivery

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// Seen is what one look at an open delivery saw, gathered once by the
// controller (the waves Looked names): Judge decides the gate from it, and
// Groups the pods and workloads each check measures.
type Seen struct {
	// Workloads are the targets of the waves looked at, as the cache has
	// them; a target that is gone is absent.
	Workloads map[v1alpha1.DeliveryTarget]workload.Object
	// Pods are the pods that read the delivered config, by the name they
	// read it through: the original (every revision of restart-based
	// config, pinned to a snapshot or not; for a change set, the pods that
	// read any member, under the first member's name), or one of its
	// channels (hot config). Pods that ended are left out; pods being
	// deleted are not.
	Pods map[string][]*corev1.Pod
	// Channels is what each channel of the record's waves holds (its
	// content's snapshot), by channel name; one not written is absent.
	Channels map[string]string
	// Contents are the content IDs (reload.ContentID) of the snapshots the
	// judged waves' channels take, by snapshot: what their pods' reload
	// agents report; a snapshot not in the cache yet is absent.
	Contents map[string]string
	// Squatted are the channels of the judged waves whose name an object
	// configward did not write holds (the pipeline's, say): configward
	// cannot write the channel, and the wave's pods would read the
	// squatter's content.
	Squatted []string
}

// Reads is what a look at a delivery reads, decided before it reads
// anything (ToRead), so the controller reads each once.
type Reads struct {
	// Targets are the workloads of the waves looked at (restart-based
	// config).
	Targets []v1alpha1.DeliveryTarget
	// Names are the names pods read restart-based config through: the
	// original.
	Names []string
	// Members are the configs whose readers are the pods of restart-based
	// config: every member of a change set (Seen.Pods keeps them under the
	// first member's name).
	Members []revision.Source
	// Channels are, for hot config, the channels of the waves looked at,
	// one per member: the pods that mount them are read.
	Channels []MemberChannel
	// Judged are the channels of the judged waves: what each holds is
	// read (and whether another object holds its name); Snapshots are
	// those whose content they take.
	Judged    []MemberChannel
	Snapshots []MemberSnapshot
}

// MemberSnapshot is a snapshot of one member's content.
type MemberSnapshot struct {
	Config   revision.Source
	Snapshot string
}

// ToRead says what a look at rec at now reads: for the waves Looked
// names, the workloads of restart-based config and the channels of hot
// config, and the pods that read it through them; for the gate of hot
// config, what the channels hold and the snapshots Want gives the judged
// waves, for every member.
func ToRead(rec *v1alpha1.ConfigDelivery, now time.Time) Reads {
	src := Delivers(rec)
	var r Reads
	for _, i := range Looked(rec, now) {
		w := &rec.Status.Waves[i]
		if rec.Spec.Hot {
			r.Channels = append(r.Channels, WaveChannels(rec, w)...)
			continue
		}
		r.Targets = append(r.Targets, w.Workloads...)
	}
	if !rec.Spec.Hot {
		r.Names, r.Members = []string{src.Name}, Members(rec)
		return r
	}
	for _, i := range Judged(rec) {
		w := &rec.Status.Waves[i]
		for _, c := range WaveChannels(rec, w) {
			r.Judged = append(r.Judged, c)
			want := Want(Ask{Record: rec, Config: c.Config, Current: DeliveredTo(rec, c.Config), Holder: Holder{Wave: w.Name}})
			if s := (MemberSnapshot{Config: c.Config, Snapshot: want.Revision}); !slices.Contains(r.Snapshots, s) {
				r.Snapshots = append(r.Snapshots, s)
			}
		}
	}
	return r
}

// Looked are the waves of rec whose workloads and pods a look at now
// reads: those the gate judges, and where checks are due, the groups they
// measure (the current wave and the rest after it; every wave in the bake).
func Looked(rec *v1alpha1.ConfigDelivery, now time.Time) []int {
	out := Judged(rec)
	if due, _ := Due(rec, now); len(due) == 0 {
		return out
	}
	from := max(CurrentWave(rec), 0)
	if rec.Status.Bake != nil {
		from = 0
	}
	for i := from; i < len(rec.Status.Waves); i++ {
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// Judge is the gate of rec's judged waves, as seen: each workload of a
// restart-based wave by HealthOf, each pod of a hot wave by HotHealthOf.
// What each must hold is Want's answer.
func Judge(rec *v1alpha1.ConfigDelivery, seen Seen, now time.Time) Gate {
	var g Gate
	src := Delivers(rec)
	for _, i := range Judged(rec) {
		wave := &rec.Status.Waves[i]
		if rec.Spec.Hot {
			judgeHot(rec, wave, seen, now, &g)
			continue
		}
		for _, t := range wave.Workloads {
			w, found := seen.Workloads[t]
			if !found {
				continue // deleted: nothing to wait for
			}
			state, msg := HealthOf(w, wanted(rec, w, t), PodsOf(w, seen.Pods[src.Name]))
			g.Add(t, state, msg)
		}
	}
	return g
}

// wanted is what the template of w, target t of rec, must name of each
// config rec delivers (Want's answers): of a change set, the members its
// template or its record names a snapshot of (a workload may read some
// members only; the stamp names every member it reads at once).
func wanted(rec *v1alpha1.ConfigDelivery, w workload.Object, t v1alpha1.DeliveryTarget) revision.Snapshots {
	out := revision.Snapshots{}
	named, _ := w.TemplateAnnotation(v1alpha1.ConfigSnapshotsAnnotation)
	snaps, _ := revision.Decode(named)
	for _, m := range Members(rec) {
		if _, reads := snaps[m]; IsSet(rec) && !reads && targetFrom(rec, &t, m) == "" {
			continue
		}
		out[m] = Want(Ask{Record: rec, Config: m, Current: DeliveredTo(rec, m), Holder: Holder{Kind: t.Kind, Name: t.Name}}).Revision
	}
	return out
}

// judgeHot judges the pods of one started wave of hot config into g: they
// can have the delivered content only once their channel holds it, and,
// for a change set, once every member's channel holds the set's: a pod is
// judged on each member it mounts, and stands where its worst member does.
func judgeHot(rec *v1alpha1.ConfigDelivery, wave *v1alpha1.WaveStatus, seen Seen, now time.Time, g *Gate) {
	type member struct {
		MemberChannel
		content string
	}
	var members []member
	for _, c := range WaveChannels(rec, wave) {
		if slices.Contains(seen.Squatted, c.Channel) {
			g.Failed = fmt.Sprintf("%s %s/%s has the name of this wave's channel but is not configward's channel: configward cannot write the channel, so the delivery cannot reach the wave. "+
				"Delete or rename it (only configward writes channels); then resume the delivery.", c.Config.Kind, rec.Namespace, c.Channel)
			return
		}
		held := seen.Channels[c.Channel]
		want := Want(Ask{Record: rec, Config: c.Config, Current: DeliveredTo(rec, c.Config), Holder: Holder{Wave: wave.Name}, Held: held}).Revision
		content, cached := seen.Contents[want]
		switch {
		case !cached:
			g.Progressing = append(g.Progressing, "the snapshot "+want+" the channel "+c.Channel+" takes (not in the cache yet)")
			return
		case held != want:
			g.Progressing = append(g.Progressing, "channel "+c.Channel+" (not written with the content yet)")
			return
		}
		members = append(members, member{c, content})
	}
	s := configpolicy.DeliveryDefaults(rec.Spec.Settings)
	propagation := time.Duration(*s.PropagationSeconds) * time.Second
	judged := map[string]bool{} // by name: the pods of one namespace
	for _, m := range members {
		for _, p := range seen.Pods[m.Channel] {
			if judged[p.Name] || p.DeletionTimestamp != nil || !channel.Placed(p, m.Channel, wave.Name) {
				continue
			}
			judged[p.Name] = true
			state, msg := "", ""
			for _, o := range members {
				if !channel.Placed(p, o.Channel, wave.Name) {
					continue // a member this pod does not mount
				}
				// Reports name a channel's content as its original's.
				st, m := HotHealthOf(p, o.Config.String(), o.content, wave.StartedAt.Time, propagation, now)
				if IsSet(rec) && m != "" {
					m = o.Config.String() + ": " + m
				}
				if state == "" || worse(st, state) {
					state, msg = st, m
				}
			}
			g.Add(v1alpha1.DeliveryTarget{Kind: "Pod", Name: p.Name}, state, msg)
		}
	}
}

// PodsOf are the pods of pods that w's selector selects in its namespace:
// a workload without a selector, or with an empty one, selects none.
func PodsOf(w workload.Object, pods []*corev1.Pod) []*corev1.Pod {
	sel := w.Selector()
	if sel == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Namespace == w.Obj.GetNamespace() && s.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// Group is what one check measurement is about: the pods and workloads of
// a wave, of the rest, or of every wave.
type Group struct {
	Pods, Workloads []string
	Targets         []v1alpha1.DeliveryTarget
}

// Groups are the groups a measurement of rec's checks compares, as seen:
// the current wave's and the rest's (the waves after it), or, in the bake,
// every wave's (no rest). A restart-based wave's pods are its workloads'
// live ones; a hot wave's, those mounting its channel.
func Groups(rec *v1alpha1.ConfigDelivery, seen Seen, bake bool) (wave, rest Group) {
	cur := CurrentWave(rec)
	src := Delivers(rec)
	for i := range rec.Status.Waves {
		g := &rest
		switch {
		case bake || i == cur:
			g = &wave
		case i < cur:
			continue
		}
		w := &rec.Status.Waves[i]
		for _, t := range w.Workloads {
			g.Workloads = append(g.Workloads, t.Name)
			g.Targets = append(g.Targets, t)
		}
		var pods []*corev1.Pod
		if rec.Spec.Hot {
			pods = mountingAny(seen, WaveChannels(rec, w))
		} else {
			for _, t := range w.Workloads {
				if o, found := seen.Workloads[t]; found {
					pods = append(pods, PodsOf(o, seen.Pods[src.Name])...)
				}
			}
		}
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				g.Pods = append(g.Pods, p.Name)
			}
		}
	}
	return wave, rest
}

// mountingAny are the pods that mount any of channels, each once.
func mountingAny(seen Seen, channels []MemberChannel) []*corev1.Pod {
	var out []*corev1.Pod
	in := map[string]bool{}
	for _, c := range channels {
		for _, p := range seen.Pods[c.Channel] {
			if !in[p.Name] {
				in[p.Name] = true
				out = append(out, p)
			}
		}
	}
	return out
}
