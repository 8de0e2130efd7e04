package stamp

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

var (
	snapNow   = revision.Snapshots{{Kind: refs.ConfigMap, Name: "app"}: "app-now"}
	snapOld   = "ConfigMap/app=app-old"
	revisions = configpolicy.NamespacePolicy{Rollouts: true, Secrets: true, Revisions: true}
	plain     = configpolicy.DefaultNamespacePolicy
)

// factsNow are the facts of config whose hash is "now", with its snapshot.
func factsNow(p configpolicy.NamespacePolicy) Facts {
	return Facts{Policy: p, Hash: "now", Counted: 1, Snapshots: snapNow}
}

// stamped is a Deployment carrying s, with annotations on its metadata.
func stamped(s workload.Stamp, annotations map[string]string) workload.Object {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: annotations}}
	w := mustType(schema.GroupKind{Group: "apps", Kind: "Deployment"}).Wrap(d)
	w.SetStamp(s)
	return w
}

func mustType(gk schema.GroupKind) *workload.Type {
	t, ok := workload.Builtin().Type(gk)
	if !ok {
		panic(gk.String())
	}
	return t
}

// The decision of a controller's look at a stored workload.
func TestDecideLook(t *testing.T) {
	current := workload.Stamp{Hash: "now", Snapshots: snapNow.Encode()}
	staleWant := workload.Stamp{Hash: "now", Snapshots: snapNow.Encode()}
	for name, tc := range map[string]struct {
		w      workload.Object
		facts  Facts
		look   Look
		want   workload.Stamp
		hold   drift.Hold
		writes bool
	}{
		"stale: the config of now, marker dropped": {
			w: stamped(workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "then"}, nil), facts: factsNow(revisions),
			want: staleWant, writes: true},
		"current": {w: stamped(current, nil), facts: factsNow(revisions), want: current},
		"snapshots alone do not move a current hash (revisions turned on since)": {
			w: stamped(workload.Stamp{Hash: "now"}, nil), facts: factsNow(revisions), want: workload.Stamp{Hash: "now"}},
		"snapshots alone do not move a current hash (a key it does not read changed)": {
			w: stamped(workload.Stamp{Hash: "now", Snapshots: snapOld}, nil), facts: factsNow(revisions), want: workload.Stamp{Hash: "now", Snapshots: snapOld}},
		"a write that did not stick whole is written whole": {
			w: stamped(workload.Stamp{Hash: "now"}, nil), facts: factsNow(revisions), look: Look{Exact: true}, want: staleWant, writes: true},
		"a delivery that reached it waits for the exact revision": {
			w: stamped(workload.Stamp{Hash: "now", Snapshots: snapOld}, nil), facts: func() Facts { f := factsNow(revisions); f.Reached = true; return f }(),
			want: staleWant, writes: true},
		"never stamped, nothing changed: left to its own write": {
			w: stamped(workload.Stamp{}, nil), facts: factsNow(revisions), want: workload.Stamp{}},
		"never stamped, its config changed": {
			w: stamped(workload.Stamp{}, nil), facts: factsNow(revisions), look: Look{Changed: true}, want: staleWant, writes: true},
		"no config counted: nothing to be stale against": {
			w: stamped(workload.Stamp{Hash: "old"}, nil), facts: Facts{Policy: revisions}, want: workload.Stamp{Hash: "old"}},
		"rolled back from the config it still has": {
			w: stamped(workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "now"}, nil), facts: factsNow(revisions),
			want: workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "now"}, hold: drift.RolledBackHold},
		"a rollback marker means nothing without revisions": {
			w: stamped(workload.Stamp{Hash: "old", RolledBackFrom: "now"}, nil), facts: factsNow(plain),
			want: workload.Stamp{Hash: "now"}, writes: true},
		"opted out: held, stale against the config of now": {
			w: stamped(workload.Stamp{Hash: "old"}, map[string]string{v1alpha1.RolloutAnnotation: v1alpha1.RolloutDisabled}), facts: factsNow(plain),
			want: workload.Stamp{Hash: "now"}, hold: drift.OptedOut},
		"rollouts off by policy": {
			w: stamped(workload.Stamp{Hash: "old"}, nil), facts: factsNow(configpolicy.NamespacePolicy{Secrets: true}),
			want: workload.Stamp{Hash: "now"}, hold: drift.PolicyDisabled},
		"flapping config holds a stale one": {
			w: stamped(workload.Stamp{Hash: "old"}, nil), facts: factsNow(plain), look: Look{Flapping: true},
			want: workload.Stamp{Hash: "now"}, hold: drift.Flapping},
		"flapping config does not hold a current one": {
			w: stamped(workload.Stamp{Hash: "now"}, nil), facts: factsNow(plain), look: Look{Flapping: true}, want: workload.Stamp{Hash: "now"}},
		"a revision whose snapshots cannot be written is re-stamped without them": {
			w: stamped(current, nil), facts: func() Facts {
				f := factsNow(revisions)
				f.Policy.SnapshotsBlocked, f.Unwritten = "forbidden: refused", map[string]bool{"app-now": true}
				return f
			}(),
			want: workload.Stamp{Hash: "now"}, writes: true},
		"snapshots that are written stay where writes are blocked": {
			w: stamped(current, nil), facts: func() Facts {
				f := factsNow(revisions)
				f.Policy.SnapshotsBlocked, f.Unwritten = "forbidden: refused", map[string]bool{}
				return f
			}(),
			want: current},
		"config that is gone holds a stale workload": {
			w: stamped(workload.Stamp{Hash: "old"}, nil), facts: func() Facts {
				f := factsNow(plain)
				f.Missing = []revision.Source{{Kind: refs.ConfigMap, Name: "app"}}
				return f
			}(),
			want: workload.Stamp{Hash: "now"}, hold: drift.ConfigMissing},
		"the CSI record goes with a rollout": {
			w: stamped(workload.Stamp{Hash: "old", SecretVersions: "v1"}, nil), facts: func() Facts { f := factsNow(plain); f.Versions = "v2"; return f }(),
			want: workload.Stamp{Hash: "now", SecretVersions: "v2"}, writes: true},
	} {
		t.Run(name, func(t *testing.T) {
			carried := tc.w.Stamp()
			d := Decide(Input{Workload: tc.w, Facts: tc.facts, Look: tc.look})
			if d.Want != tc.want || d.Hold != tc.hold || d.Writes(carried) != tc.writes {
				t.Fatalf("want %+v hold %q writes %v; expected %+v hold %q writes %v", d.Want, d.Hold.Reason, d.Writes(carried), tc.want, tc.hold.Reason, tc.writes)
			}
		})
	}
}

// The decision of a write the webhook judges.
func TestDecideWrite(t *testing.T) {
	now := workload.Stamp{Hash: "now", Snapshots: snapNow.Encode()}
	old := workload.Stamp{Hash: "old", Snapshots: snapOld}
	for name, tc := range map[string]struct {
		written    workload.Stamp
		write      Write
		policy     configpolicy.NamespacePolicy
		want       workload.Stamp
		rolledBack bool
		// hashReset: the writer is told its hash was reset.
		hashReset bool
	}{
		"a create":                 {written: old, write: Write{}, policy: revisions, want: now},
		"a write keeping the hash": {written: now, write: Write{Update: true, Stored: now}, policy: revisions, want: now},
		"a stale hash kept by a write": {written: old, write: Write{Update: true, Stored: old, Restorable: true}, policy: revisions,
			want: now},
		"a rollback to a revision whose snapshots exist": {written: old, write: Write{Update: true, Stored: now, Restorable: true}, policy: revisions,
			want: workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "now"}, rolledBack: true},
		"a rollback to a revision without snapshots":   {written: old, write: Write{Update: true, Stored: now}, policy: revisions, want: now, hashReset: true},
		"a rollback without revisions":                 {written: old, write: Write{Update: true, Stored: now, Restorable: true}, policy: plain, want: workload.Stamp{Hash: "now"}, hashReset: true},
		"a write without a hash is stamped, not reset": {written: workload.Stamp{}, write: Write{Update: true, Stored: now}, policy: revisions, want: now},
		"a scale of a rolled-back workload": {written: workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "now"},
			write: Write{Update: true, Stored: old}, policy: revisions, want: workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "now"}},
		"config changed since the rollback": {written: workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "then"},
			write: Write{Update: true, Stored: old}, policy: revisions, want: now},
		"a new revision from the pipeline": {written: workload.Stamp{Hash: "old", Snapshots: snapOld, RolledBackFrom: "now"},
			write: Write{Update: true, Stored: old, TemplateChanged: true}, policy: revisions, want: now},
	} {
		t.Run(name, func(t *testing.T) {
			w := stamped(tc.written, nil)
			d := Decide(Input{Workload: w, Facts: factsNow(tc.policy), Write: &tc.write})
			if d.Want != tc.want || d.RolledBack != tc.rolledBack || d.Hold.Reason != "" || d.HashReset != tc.hashReset {
				t.Fatalf("%+v rolledBack=%v hold=%q hashReset=%v, want %+v rolledBack=%v hashReset=%v", d.Want, d.RolledBack, d.Hold.Reason, d.HashReset, tc.want, tc.rolledBack, tc.hashReset)
			}
		})
	}
	t.Run("no config counted takes the hash off", func(t *testing.T) {
		w := stamped(old, nil)
		d := Decide(Input{Workload: w, Facts: Facts{Policy: revisions}, Write: &Write{Update: true, Stored: old}})
		if d.Want != (workload.Stamp{}) {
			t.Fatalf("%+v", d.Want)
		}
	})
	t.Run("where snapshots cannot be written, a write names only those written", func(t *testing.T) {
		w := stamped(old, nil)
		f := factsNow(revisions)
		f.Policy.SnapshotsBlocked = "quota: exceeded quota"
		f.Unwritten = map[string]bool{"app-now": true}
		d := Decide(Input{Workload: w, Facts: f, Write: &Write{Update: true, Stored: old}})
		if d.Want != (workload.Stamp{Hash: "now"}) || len(d.Unpinned) != 1 {
			t.Fatalf("%+v unpinned %v", d.Want, d.Unpinned)
		}
	})
	t.Run("a bare Pod names only snapshots written", func(t *testing.T) {
		pod := mustType(schema.GroupKind{Kind: "Pod"}).Wrap(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"}})
		f := factsNow(revisions)
		f.Snapshots = revision.Snapshots{{Kind: refs.ConfigMap, Name: "app"}: "app-now", {Kind: refs.ConfigMap, Name: "db"}: "db-now"}
		f.Unwritten = map[string]bool{"db-now": true}
		d := Decide(Input{Workload: pod, Facts: f, Write: &Write{}})
		if d.Want.Snapshots != "ConfigMap/app=app-now" || len(d.Unpinned) != 1 {
			t.Fatalf("%+v unpinned %v", d.Want, d.Unpinned)
		}
	})
}

// What the object alone says.
func TestHeld(t *testing.T) {
	job := mustType(schema.GroupKind{Group: "batch", Kind: "Job"})
	pod := mustType(schema.GroupKind{Kind: "Pod"})
	owned := metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "1", Controller: new(true)}}}
	for name, tc := range map[string]struct {
		w     workload.Object
		write *Write
		want  drift.Hold
	}{
		"a Job is created with its hash":              {job.Wrap(&batchv1.Job{}), &Write{}, drift.Hold{}},
		"a Job's template never changes":              {job.Wrap(&batchv1.Job{}), &Write{Update: true}, drift.JobImmutable},
		"a look never re-stamps a Job":                {job.Wrap(&batchv1.Job{}), nil, drift.JobImmutable},
		"a Pod is created with its hash":              {pod.Wrap(&corev1.Pod{}), &Write{}, drift.Hold{}},
		"a Pod keeps the hash it started with":        {pod.Wrap(&corev1.Pod{}), &Write{Update: true}, PodStarted},
		"a controlled Pod is judged at its owner":     {pod.Wrap(&corev1.Pod{ObjectMeta: owned}), &Write{}, Controlled},
		"a plain Deployment":                          {mustType(schema.GroupKind{Group: "apps", Kind: "Deployment"}).Wrap(&appsv1.Deployment{}), nil, drift.Hold{}},
		"a declared kind of another group called Job": {declaredJob(t), nil, drift.Hold{}},
	} {
		t.Run(name, func(t *testing.T) {
			if got, _ := Held(tc.w, tc.write); got != tc.want {
				t.Fatalf("%q, want %q", got.Reason, tc.want.Reason)
			}
		})
	}
}

// What is decided before any fact is gathered.
func TestEarly(t *testing.T) {
	job := mustType(schema.GroupKind{Group: "batch", Kind: "Job"}).Wrap(&batchv1.Job{})
	optedOut := stamped(workload.Stamp{Hash: "old"}, map[string]string{v1alpha1.RolloutAnnotation: "disabled"})
	never := stamped(workload.Stamp{}, nil)
	off := configpolicy.NamespacePolicy{}
	for name, tc := range map[string]struct {
		w      workload.Object
		policy configpolicy.NamespacePolicy
		write  *Write
		look   Look
		early  bool
		hold   drift.Hold
	}{
		"opted out, a look":                       {w: optedOut, policy: revisions, early: true, hold: drift.OptedOut},
		"opted out, a write":                      {w: optedOut, policy: revisions, write: &Write{Update: true}, early: true, hold: drift.OptedOut},
		"a Job's write":                           {w: job, policy: revisions, write: &Write{Update: true}, early: true, hold: drift.JobImmutable},
		"a Job's look needs the facts to report":  {w: job, policy: revisions, look: Look{Changed: true}},
		"never stamped, nothing changed":          {w: never, policy: revisions, early: true},
		"never stamped, its config changed":       {w: never, policy: revisions, look: Look{Changed: true}},
		"never stamped, CSI rotations to read":    {w: never, policy: revisions, look: Look{Rotations: true}},
		"never stamped, a write":                  {w: never, policy: revisions, write: &Write{}},
		"rollouts off, a look":                    {w: stamped(workload.Stamp{Hash: "old"}, nil), policy: off, look: Look{Changed: true}, early: true, hold: drift.PolicyDisabled},
		"rollouts off, a write":                   {w: never, policy: off, write: &Write{}, early: true, hold: drift.PolicyDisabled},
		"stamped, rollouts on: gather and decide": {w: stamped(workload.Stamp{Hash: "old"}, nil), policy: revisions},
	} {
		t.Run(name, func(t *testing.T) {
			d, early := Early(Input{Workload: tc.w, Facts: Facts{Policy: tc.policy}, Write: tc.write, Look: tc.look})
			if early != tc.early || d.Hold != tc.hold || (early && d.Want != tc.w.Stamp()) {
				t.Fatalf("early=%v hold=%q want=%+v; want early=%v hold=%q, keeping what it carries", early, d.Hold.Reason, d.Want, tc.early, tc.hold.Reason)
			}
		})
	}
}

func TestUnpinnedBecause(t *testing.T) {
	blocked := func(unwritten ...string) Facts {
		f := factsNow(revisions)
		f.Policy.SnapshotsBlocked = "quota: exceeded quota"
		f.Unwritten = map[string]bool{}
		for _, u := range unwritten {
			f.Unwritten[u] = true
		}
		return f
	}
	for name, tc := range map[string]struct {
		facts   Facts
		carried workload.Stamp
		want    string
	}{
		"snapshots can be written":       {factsNow(revisions), workload.Stamp{Hash: "now"}, ""},
		"no config counted":              {Facts{Policy: blocked().Policy}, workload.Stamp{}, ""},
		"names snapshots not written":    {blocked("app-old"), workload.Stamp{Hash: "old", Snapshots: snapOld}, "its revision names snapshots that cannot be written (quota: exceeded quota): its new pods are refused until configward takes them out of its template"},
		"names none":                     {blocked(), workload.Stamp{Hash: "now"}, "config snapshots cannot be written in its namespace (quota: exceeded quota), so its revision reads the originals as they are now"},
		"names snapshots that are there": {blocked(), workload.Stamp{Hash: "old", Snapshots: snapOld}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.facts.UnpinnedBecause(tc.carried); got != tc.want {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}
}

// declaredJob is an object of a declared kind called Job in another group
// than batch: not immutable.
func declaredJob(t *testing.T) workload.Object {
	decls, err := workload.ParseDeclarations([]byte(`[{group: example.com, version: v1, kind: Job, resource: jobs, podTemplatePath: spec.template}]`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := workload.NewRegistry(decls)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Job")
	w, ok := reg.For(u)
	if !ok {
		t.Fatal("the declared Job is not a workload")
	}
	return w
}
