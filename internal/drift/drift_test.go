package drift

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/workload"
)

func TestStatusOf(t *testing.T) {
	paused := Hold{Reason: "paused", Why: "the Deployment is paused", Until: "it is resumed (kubectl rollout resume)"}
	for _, tc := range []struct {
		name      string
		w         Workload
		byHash    map[string]int
		want      State
		wantHold  string
		wantStale bool
	}{
		{"every pod current", Workload{Template: "new", Wanted: "new"}, map[string]int{"new": 3}, Done, "", false},
		{"no pods at all", Workload{Template: "new", Wanted: "new"}, nil, Done, "", false},
		{"template not re-stamped yet", Workload{Template: "old", Wanted: "new"}, map[string]int{"old": 3}, Pending, "", true},
		{"template stamped, pods being replaced", Workload{Template: "new", Wanted: "new"}, map[string]int{"old": 2, "new": 2}, Progressing, "", true},
		{"a pod without a hash is stale", Workload{Template: "new", Wanted: "new"}, map[string]int{"": 1, "new": 1}, Progressing, "", true},
		{"paused: template stamped, pods kept", Workload{Template: "new", Wanted: "new", PodHold: paused}, map[string]int{"old": 2}, NotRolled, "paused", true},
		{"paused but already current", Workload{Template: "new", Wanted: "new", PodHold: paused}, map[string]int{"new": 2}, Done, "", false},
		{"opted out keeps its template", Workload{Template: "old", Wanted: "new", TemplateHold: OptedOut}, map[string]int{"old": 2}, NotRolled, "opted-out", true},
		{"opted out but nothing changed", Workload{Template: "same", Wanted: "same", TemplateHold: OptedOut}, map[string]int{"same": 2}, Done, "", false},
		{"a finished Job runs nothing stale", Workload{Template: "old", Wanted: "new", TemplateHold: JobImmutable}, nil, NotRolled, "job-immutable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StatusOf(tc.w, CountPods(tc.w.Wanted, tc.byHash))
			if s.State != tc.want || s.Hold.Reason != tc.wantHold || s.Stale() != tc.wantStale {
				t.Fatalf("StatusOf = %s (hold %q, stale %v), want %s (hold %q, stale %v)", s.State, s.Hold.Reason, s.Stale(), tc.want, tc.wantHold, tc.wantStale)
			}
		})
	}
}

func TestCountPods(t *testing.T) {
	p := CountPods("b", map[string]int{"a": 2, "b": 3, "": 1})
	if p.Current != 3 || p.Stale != 3 {
		t.Fatalf("CountPods = %+v, want 3 current, 3 stale", p)
	}
}

// Pods reach their workload through at most one object in between, which
// is how Deployments (ReplicaSets) and CronJobs (Jobs) own theirs; an
// object in between without a controller stands for itself.
func TestPodsByWorkload(t *testing.T) {
	apiVersions := map[string]string{"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1"}
	ref := func(kind, uid string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersions[kind], Kind: kind, UID: types.UID(uid), Controller: new(true)}
	}
	owners := Owners{"rs-1": ref("Deployment", "web"), "rs-2": ref("Deployment", "web"), "job-1": ref("CronJob", "nightly")}
	pods := []Pod{
		{Controller: ref("ReplicaSet", "rs-1"), Hash: "old"},
		{Controller: ref("ReplicaSet", "rs-2"), Hash: "new"},
		{Controller: ref("ReplicaSet", "rs-2"), Hash: "new"},
		{Controller: ref("Job", "job-1"), Hash: "x"},
		{Controller: ref("StatefulSet", "db"), Hash: "y"},
		{Controller: ref("ReplicaSet", "bare-rs"), Hash: "z"},
		{Hash: "bare pod"},
	}
	got := PodsByWorkload(pods, owners)
	want := map[types.UID]map[string]int{
		"web": {"old": 1, "new": 2}, "nightly": {"x": 1}, "db": {"y": 1}, "bare-rs": {"z": 1},
	}
	if len(got) != len(want) {
		t.Fatalf("PodsByWorkload = %v, want %v", got, want)
	}
	for uid, hashes := range want {
		for h, n := range hashes {
			if got[uid][h] != n {
				t.Fatalf("PodsByWorkload = %v, want %v", got, want)
			}
		}
	}
}

// wrap is the handle of a built-in workload.
func wrap(t *testing.T, obj client.Object) workload.Object {
	t.Helper()
	w, ok := workload.Builtin().For(obj)
	if !ok {
		t.Fatalf("%T is not a workload", obj)
	}
	return w
}

func TestPodHolds(t *testing.T) {
	d := &appsv1.Deployment{}
	if h := PodHoldOf(wrap(t, d)); h.Reason != "" {
		t.Fatalf("a plain Deployment is held: %+v", h)
	}
	d.Spec.Paused = true
	if h := PodHoldOf(wrap(t, d)); h.Reason != "paused" || h.Until != "it is resumed (kubectl rollout resume)" {
		t.Fatalf("paused: %+v", h)
	}
	if h := PodHoldOf(wrap(t, &batchv1.CronJob{})); h != StartedJobs {
		t.Fatalf("CronJob: %+v", h)
	}
}
