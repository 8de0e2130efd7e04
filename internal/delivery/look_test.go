package delivery

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// deployment is Deployment name of the record's namespace, selecting its
// pods by app=name, its template stamped with snapshot snap of ConfigMap
// app and hash, its rollout done.
func deployment(name, snap, hash string) workload.Object {
	t, _ := workload.Builtin().Type(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Generation: 2},
		Spec:   appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}}
	w := t.Wrap(d)
	w.SetStamp(workload.Stamp{Hash: hash, Snapshots: "ConfigMap/app=" + snap})
	return w
}

// pod is a live pod of app in the record's namespace, with the config hash
// of its revision, ready or not.
func pod(name, app, hash string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": app},
		Annotations: map[string]string{v1alpha1.ConfigHashAnnotation: hash}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
}

func TestPodsOf(t *testing.T) {
	a := deployment("a", "app-2b", "h2")
	other := pod("b-1", "b", "h2", true)
	elsewhere := pod("a-x", "a", "h2", true)
	elsewhere.Namespace = "other"
	got := PodsOf(a, []*corev1.Pod{pod("a-1", "a", "h2", true), other, elsewhere, pod("a-2", "a", "h1", false)})
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"a-1", "a-2"}) {
		t.Errorf("PodsOf = %v, want the pods its selector selects in its namespace", names)
	}
	none := deployment("n", "app-2b", "h2")
	none.Obj.(*appsv1.Deployment).Spec.Selector = &metav1.LabelSelector{}
	if got := PodsOf(none, []*corev1.Pod{other}); got != nil {
		t.Errorf("an empty selector selects %d pods, want none", len(got))
	}
}

// The gate of a restart-based wave: each workload by HealthOf against the
// revision Want gives it, its pods found among those that read the config.
func TestJudgeRestartBased(t *testing.T) {
	rec := record(started(1, time.Minute)) // the early wave (b, c) started
	seen := Seen{
		Workloads: map[v1alpha1.DeliveryTarget]workload.Object{
			{Kind: "Deployment", Name: "b", From: "app-1a"}: deployment("b", "app-2b", "h2"),
			{Kind: "Deployment", Name: "c", From: "app-1a"}: deployment("c", "app-1a", "h1"),
		},
		Pods: map[string][]*corev1.Pod{"app": {pod("b-1", "b", "h2", false), pod("c-1", "c", "h1", true)}},
	}
	g := Judge(rec, seen, t0)
	if g.Healthy() || g.Failed != "" {
		t.Fatalf("gate %+v: want waiting", g)
	}
	want := []string{
		"Deployment b (pod b-1 of the delivered revision is not ready)",
		"Deployment c (waiting for its template to be stamped with the delivered revision)",
	}
	if got := append(slices.Clone(g.Unready), g.Progressing...); !slices.Equal(got, want) {
		t.Errorf("waiting for %q, want %q", got, want)
	}
	// Stamped and ready: healthy. A target deleted is not waited for.
	seen.Workloads[v1alpha1.DeliveryTarget{Kind: "Deployment", Name: "c", From: "app-1a"}] = deployment("c", "app-2b", "h2")
	seen.Pods["app"] = []*corev1.Pod{pod("b-1", "b", "h2", true), pod("c-1", "c", "h2", true)}
	delete(seen.Workloads, v1alpha1.DeliveryTarget{Kind: "Deployment", Name: "b", From: "app-1a"})
	if g := Judge(rec, seen, t0); !g.Healthy() {
		t.Errorf("gate %+v: want healthy", g)
	}
	// The canary, completed, is not judged again.
	if g := Judge(record(started(1, time.Minute)), Seen{}, t0); !g.Healthy() {
		t.Errorf("gate %+v: want healthy (no workload of the judged wave left)", g)
	}
}

// The gate of a hot wave: its channel must hold the delivered snapshot,
// whose content its pods' agents report.
func TestJudgeHot(t *testing.T) {
	soak := int32(0)
	prop := int32(30)
	rec := &v1alpha1.ConfigDelivery{
		Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "flags"}, Hot: true,
			Settings: v1alpha1.DeliverySettings{SoakSeconds: &soak, PropagationSeconds: &prop}},
		Status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryProgressing, To: "flags-2b", From: "flags-1a", Waves: []v1alpha1.WaveStatus{
			{Name: "canary", Channel: "flags-ch-canary", From: "flags-1a", StartedAt: ago(time.Minute)},
			{Name: "rest", Channel: "flags-ch-rest", From: "flags-1a"},
		}},
	}
	// agentPod is a pod the Pod path placed on the canary's channel: its
	// wave marked, the channel in a volume.
	agentPod := func(name, content, result string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
			Annotations: map[string]string{v1alpha1.ChannelWaveAnnotation: "canary", v1alpha1.ChannelPlacedAnnotation: channel.PlacementSeal([]byte("k"), "req-"+name, "shop", "canary"),
				v1alpha1.ReloadAgentAnnotation: "watch"}},
			Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: reload.AgentContainer}}, Containers: []corev1.Container{{Name: "app"}},
				Volumes: []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "flags-ch-canary"}}}}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				reload.Condition([]reload.PodEntry{{Config: "ConfigMap/flags", Content: content, Result: result}})}}}
		return p
	}
	deleting := agentPod("p-gone", "other", reload.Applied)
	deleting.DeletionTimestamp = ago(0)
	// Pods that name the canary's channel but that the Pod path did not
	// place there: their creator named it (in env, or in a volume of a pod
	// without the wave's mark). They are nobody's wave, whatever they say.
	inEnv := agentPod("p-env", "c1", reload.Rejected)
	inEnv.Spec.Volumes = nil
	inEnv.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "flags-ch-canary"}}}}
	unmarked := agentPod("p-own", "c1", reload.Rejected)
	unmarked.Annotations = nil
	unsealed := agentPod("p-unsealed", "c1", reload.Rejected)
	delete(unsealed.Annotations, v1alpha1.ChannelPlacedAnnotation)
	otherWave := agentPod("p-rest", "c1", reload.Rejected)
	otherWave.Annotations[v1alpha1.ChannelWaveAnnotation] = "rest"
	for _, tc := range []struct {
		name string
		seen Seen
		want string
	}{
		{"the delivered snapshot not in the cache yet", Seen{Channels: map[string]string{"flags-ch-canary": "flags-2b"}},
			"progressing: the snapshot flags-2b the channel flags-ch-canary takes (not in the cache yet)"},
		{"the channel not written yet", Seen{Channels: map[string]string{"flags-ch-canary": "flags-1a"}, Contents: map[string]string{"flags-2b": "c2"}},
			"progressing: channel flags-ch-canary (not written with the content yet)"},
		{"a pod has not reported it", Seen{Channels: map[string]string{"flags-ch-canary": "flags-2b"}, Contents: map[string]string{"flags-2b": "c2"},
			Pods: map[string][]*corev1.Pod{"flags-ch-canary": {agentPod("p-1", "c2", reload.Applied), agentPod("p-2", "c1", reload.Applied)}}},
			"progressing: Pod p-2 (has not reported the content yet)"},
		{"every pod applied it; one being deleted is not judged", Seen{Channels: map[string]string{"flags-ch-canary": "flags-2b"}, Contents: map[string]string{"flags-2b": "c2"},
			Pods: map[string][]*corev1.Pod{"flags-ch-canary": {agentPod("p-1", "c2", reload.Applied), deleting}, "flags-ch-rest": {agentPod("p-3", "c1", reload.Applied)}}},
			"healthy"},
		{"a pod rejected it", Seen{Channels: map[string]string{"flags-ch-canary": "flags-2b"}, Contents: map[string]string{"flags-2b": "c2"},
			Pods: map[string][]*corev1.Pod{"flags-ch-canary": {agentPod("p-1", "c2", reload.Rejected)}}},
			"failed: Pod p-1: its program rejected the content: "},
		{"an object configward did not write holds the channel's name", Seen{Channels: map[string]string{}, Contents: map[string]string{"flags-2b": "c2"}, Squatted: []string{"flags-ch-canary"},
			Pods: map[string][]*corev1.Pod{"flags-ch-canary": {agentPod("p-1", "c2", reload.Applied)}}},
			"failed: ConfigMap /flags-ch-canary has the name of this wave's channel but is not configward's channel: configward cannot write the channel, so the delivery cannot reach the wave. Delete or rename it (only configward writes channels); then resume the delivery."},
		{"pods that name the channel but were not placed on it are not judged", Seen{Channels: map[string]string{"flags-ch-canary": "flags-2b"}, Contents: map[string]string{"flags-2b": "c2"},
			Pods: map[string][]*corev1.Pod{"flags-ch-canary": {agentPod("p-1", "c2", reload.Applied), inEnv, unmarked, unsealed, otherWave}}},
			"healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gateSaid(Judge(rec, tc.seen, t0)); got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}

// gateSaid says a gate in one line: healthy, failed or what it waits for.
func gateSaid(g Gate) string {
	switch {
	case g.Failed != "":
		return "failed: " + g.Failed
	case !g.Healthy():
		return "progressing: " + strings.Join(append(g.Progressing, g.Unready...), ", ")
	}
	return "healthy"
}

func TestLookedAndGroups(t *testing.T) {
	rec := record(defaultCheck, started(1, 5*time.Minute), soaking(2*time.Minute)) // early soaks; its check is due
	if got := Looked(rec, t0); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("Looked = %v, want the judged wave and the rest after it (its checks compare with them)", got)
	}
	if got := Looked(record(started(1, 5*time.Minute)), t0); !slices.Equal(got, []int{1}) {
		t.Errorf("Looked without checks = %v, want the judged wave only", got)
	}
	seen := Seen{
		Workloads: map[v1alpha1.DeliveryTarget]workload.Object{},
		Pods:      map[string][]*corev1.Pod{"app": {pod("b-1", "b", "h2", true), pod("c-1", "c", "h2", true), pod("d-1", "d", "h1", true)}},
	}
	for _, w := range rec.Status.Waves {
		for _, t := range w.Workloads {
			seen.Workloads[t] = deployment(t.Name, "app-1a", "h1")
		}
	}
	gone := pod("d-2", "d", "h1", true)
	gone.DeletionTimestamp = ago(0)
	seen.Pods["app"] = append(seen.Pods["app"], gone)
	wave, rest := Groups(rec, seen, false)
	if !slices.Equal(wave.Workloads, []string{"b", "c"}) || !slices.Equal(wave.Pods, []string{"b-1", "c-1"}) || len(wave.Targets) != 2 {
		t.Errorf("wave %+v", wave)
	}
	if !slices.Equal(rest.Workloads, []string{"d"}) || !slices.Equal(rest.Pods, []string{"d-1"}) {
		t.Errorf("rest %+v: want d's live pods, not the canary's (completed) nor one being deleted", rest)
	}
	all, none := Groups(rec, seen, true)
	if len(all.Workloads) != 4 || len(none.Workloads) != 0 {
		t.Errorf("the bake's groups: %+v and %+v, want every wave and no rest", all, none)
	}
}

func TestToRead(t *testing.T) {
	restart := ToRead(record(defaultCheck, started(1, 5*time.Minute), soaking(2*time.Minute)), t0)
	if len(restart.Targets) != 3 || !slices.Equal(restart.Names, []string{"app"}) || len(restart.Channels) != 0 || len(restart.Snapshots) != 0 {
		t.Errorf("restart-based: %+v, want the workloads of early and rest, the pods reading app, no channel", restart)
	}
	hot := &v1alpha1.ConfigDelivery{
		Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "flags"}, Hot: true},
		Status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryProgressing, To: "flags-2b", From: "flags-1a", Waves: []v1alpha1.WaveStatus{
			{Name: "canary", Channel: "flags-ch-canary", StartedAt: ago(time.Minute)},
			{Name: "rest", Channel: "flags-ch-rest"},
		}},
	}
	flags, limits := revision.Source{Kind: refs.ConfigMap, Name: "flags"}, revision.Source{Kind: refs.ConfigMap, Name: "limits"}
	got := ToRead(hot, t0)
	canary := []MemberChannel{{Config: flags, Channel: "flags-ch-canary"}}
	if len(got.Targets) != 0 || len(got.Names) != 0 || !slices.Equal(got.Channels, canary) || !slices.Equal(got.Judged, canary) ||
		!slices.Equal(got.Snapshots, []MemberSnapshot{{Config: flags, Snapshot: "flags-2b"}}) {
		t.Errorf("hot: %+v, want the canary's channel, its pods and the delivered snapshot", got)
	}

	set := hotSet()
	got = ToRead(set, t0)
	canary = []MemberChannel{{Config: flags, Channel: "flags-ch-canary"}, {Config: limits, Channel: "limits-ch-canary"}}
	if !slices.Equal(got.Channels, canary) || !slices.Equal(got.Judged, canary) ||
		!slices.Equal(got.Snapshots, []MemberSnapshot{{Config: flags, Snapshot: "flags-2b"}, {Config: limits, Snapshot: "limits-2b"}}) {
		t.Errorf("hot set: %+v, want every member's canary channel and each member's delivered snapshot", got)
	}
}

// hotSet is an open delivery of the hot change set ConfigMaps flags and
// limits whose canary wave started a minute ago; the rest's channels held
// flags-1a and limits-0z when it started.
func hotSet() *v1alpha1.ConfigDelivery {
	soak, prop := int32(0), int32(30)
	return &v1alpha1.ConfigDelivery{
		Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "flags"}, Hot: true,
			Members:  []v1alpha1.ConfigRef{{Kind: "ConfigMap", Name: "flags"}, {Kind: "ConfigMap", Name: "limits"}},
			Settings: v1alpha1.DeliverySettings{SoakSeconds: &soak, PropagationSeconds: &prop}},
		Status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryProgressing, To: "flags-2b", From: "flags-1a",
			Members: []v1alpha1.MemberStatus{{Kind: "ConfigMap", Name: "flags", To: "flags-2b", From: "flags-1a"}, {Kind: "ConfigMap", Name: "limits", To: "limits-2b", From: "limits-1a"}},
			Waves: []v1alpha1.WaveStatus{
				{Name: "canary", Channel: "flags-ch-canary", From: "flags-1a", Froms: "ConfigMap/flags=flags-1a,ConfigMap/limits=limits-1a", StartedAt: ago(time.Minute)},
				{Name: "rest", Channel: "flags-ch-rest", From: "flags-1a", Froms: "ConfigMap/flags=flags-1a,ConfigMap/limits=limits-0z"},
			}},
	}
}

// The gate of a wave of a hot change set waits until every member's
// channel holds the set's content and each pod reports it for every member
// it mounts; each wave keeps what each of its member channels held.
func TestJudgeHotSet(t *testing.T) {
	rec := hotSet()
	placed := func(name string, mounts []string, reports ...reload.PodEntry) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name),
			Annotations: map[string]string{v1alpha1.ChannelWaveAnnotation: "canary", v1alpha1.ChannelPlacedAnnotation: channel.PlacementSeal([]byte("k"), "req-"+name, "shop", "canary"),
				v1alpha1.ReloadAgentAnnotation: "watch"}},
			Spec:   corev1.PodSpec{InitContainers: []corev1.Container{{Name: reload.AgentContainer}}, Containers: []corev1.Container{{Name: "app"}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, reload.Condition(reports)}}}
		for _, m := range mounts {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: m, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: m}}}})
		}
		return p
	}
	both := []string{"flags-ch-canary", "limits-ch-canary"}
	written := map[string]string{"flags-ch-canary": "flags-2b", "limits-ch-canary": "limits-2b"}
	contents := map[string]string{"flags-2b": "f2", "limits-2b": "l2"}
	applied := func(config, content string) reload.PodEntry {
		return reload.PodEntry{Config: config, Content: content, Result: reload.Applied}
	}
	pods := func(ps ...*corev1.Pod) map[string][]*corev1.Pod {
		out := map[string][]*corev1.Pod{}
		for _, p := range ps {
			for _, v := range p.Spec.Volumes {
				out[v.ConfigMap.Name] = append(out[v.ConfigMap.Name], p)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		seen Seen
		want string
	}{
		{"one member's channel not written yet", Seen{Channels: map[string]string{"flags-ch-canary": "flags-2b", "limits-ch-canary": "limits-1a"}, Contents: contents},
			"progressing: channel limits-ch-canary (not written with the content yet)"},
		{"a pod reported one member's content, not the other's", Seen{Channels: written, Contents: contents,
			Pods: pods(placed("p-1", both, applied("ConfigMap/flags", "f2"), applied("ConfigMap/limits", "l1")))},
			"progressing: Pod p-1 (ConfigMap/limits: has not reported the content yet)"},
		{"every pod reported every member it mounts, one pod mounting one member", Seen{Channels: written, Contents: contents,
			Pods: pods(placed("p-1", both, applied("ConfigMap/flags", "f2"), applied("ConfigMap/limits", "l2")),
				placed("p-2", both[1:], applied("ConfigMap/limits", "l2")))},
			"healthy"},
		{"a pod rejected one member", Seen{Channels: written, Contents: contents,
			Pods: pods(placed("p-1", both, applied("ConfigMap/flags", "f2"), reload.PodEntry{Config: "ConfigMap/limits", Content: "l2", Result: reload.Rejected}))},
			"failed: Pod p-1: ConfigMap/limits: its program rejected the content: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gateSaid(Judge(rec, tc.seen, t0)); got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		wave, config, held, want string
	}{
		{"canary", "flags", "flags-2b", "flags-2b"},
		{"rest", "flags", "flags-2b", "flags-1a"},
		{"rest", "limits", "limits-2b", "limits-0z"},
	} {
		src := revision.Source{Kind: refs.ConfigMap, Name: tc.config}
		if got := Want(Ask{Record: rec, Config: src, Current: DeliveredTo(rec, src), Holder: Holder{Wave: tc.wave}, Held: tc.held}).Revision; got != tc.want {
			t.Errorf("wave %s's channel of %s: want says %s, want %s", tc.wave, tc.config, got, tc.want)
		}
	}
	// A declared set of one member: its waves name no Froms, their From is
	// the member's.
	one := hotSet()
	one.Spec.Members = one.Spec.Members[:1]
	one.Status.Members = one.Status.Members[:1]
	one.Status.Waves[1].Froms, one.Status.Waves[1].From = "", "flags-0z"
	flags := revision.Source{Kind: refs.ConfigMap, Name: "flags"}
	if got := Want(Ask{Record: one, Config: flags, Current: "flags-2b", Holder: Holder{Wave: "rest"}, Held: "flags-2b"}).Revision; got != "flags-0z" {
		t.Errorf("the rest's channel of a one-member set: want says %s, want its wave's From flags-0z", got)
	}
}
