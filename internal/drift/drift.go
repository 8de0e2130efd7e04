// Package drift answers, for one workload, "which config do its pods run,
// and will that change": the hash its config gives now, the hash on its pod
// template, how many of its pods started with which, and what happens next.
// It is pure, so that the controller (for its gauges and Reports) and
// `configward status` (reading the cluster with the user's credentials)
// judge from the same rules.
package drift

import (
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/workload"
)

// State is where a workload stands between its config and its pods.
type State string

const (
	// Done: every pod runs the config the workload's config gives now.
	Done State = "done"
	// Pending: the config changed and configward has not yet put the new
	// hash on the pod template (the batch window, the rollout rate).
	Pending State = "pending"
	// Progressing: the template carries the new hash and the workload's
	// own controller is replacing its pods.
	Progressing State = "progressing"
	// NotRolled: some pods run old config and nothing will replace them
	// until someone acts (a paused Deployment, OnDelete, a Job, opted out).
	NotRolled State = "not-rolled"
	// RolledBack: the workload was rolled back (kubectl rollout undo) to
	// an earlier revision, whose pods read that revision's config
	// snapshots; it stays there until its config changes again or a new
	// revision is deployed. Its pods are counted against that revision.
	RolledBack State = "rolled-back"
)

// Hold says why configward leaves a workload's template or pods as they are,
// in the words of its Events: "running pods keep the old config: <Why>;
// they get the new one when <Until>". The zero Hold holds nothing. Its
// Reason is a short label (opted-out, policy-disabled, job-immutable,
// paused, on-delete, replicaset, declared, cronjob), the label of metrics
// and Reports: the rollout controller, the drift controller and `configward
// status` all speak it.
type Hold = workload.Hold

// Holds for a template configward does not re-stamp. A pod replacement
// hold (paused, OnDelete) comes from the workload's kind (workload.Object.Hold).
var (
	OptedOut       = Hold{Reason: "opted-out", Why: "the workload opts out of rollouts (configward.dev/rollout: disabled)", Until: "the annotation is removed and the workload is rolled"}
	PolicyDisabled = Hold{Reason: "policy-disabled", Why: "a ConfigPolicy turns rollouts off in this namespace", Until: "rollouts are turned on again"}
	// Flapping is a workload's that consumes config changing content past
	// its ConfigPolicy's flapping threshold (the ConfigFlapping Event on
	// that object names it and its writer).
	Flapping = Hold{Reason: "flapping", Why: "config it consumes changes content too often (see the ConfigFlapping Event on it): configward does not roll it for those changes",
		Until: "that config has been unchanged for its threshold's window"}
	JobImmutable = Hold{Reason: "job-immutable", Why: "a Job's pod template cannot change", Until: "a new Job is started"}
	// StartedJobs is a CronJob's: its template gets the new hash, which
	// the next Job uses, and Jobs already started keep theirs.
	// RolledBackHold is a workload's that was rolled back to a revision
	// whose config snapshots exist (revisions on).
	RolledBackHold = Hold{Reason: "rolled-back", Why: "it was rolled back (kubectl rollout undo) to an earlier revision, whose pods read that revision's config snapshots",
		Until: "its config changes again or a new revision is deployed"}
	// ConfigMissing is a workload's that requires a ConfigMap or Secret
	// that does not exist, with no snapshot of it in the revision it runs:
	// rolled, its new pods could not start.
	ConfigMissing = Hold{Reason: "config-missing", Why: "a ConfigMap or Secret it requires does not exist, so new pods could not start",
		Until: "the config exists again, or the workload stops naming it"}
	StartedJobs = Hold{Reason: "cronjob", Why: "Jobs already started keep the config they started with", Until: "they finish; the next Job uses the new config"}
)

// Workload is what the judge needs of one top-level workload.
type Workload struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
	// Template is the config hash on its pod template.
	Template string
	// Wanted is the hash its config gives now.
	Wanted string
	// TemplateHold is set when configward does not re-stamp the template
	// (opted out, rollouts off by policy, a Job).
	TemplateHold Hold
	// PodHold is set when a new template does not replace running pods
	// (paused, OnDelete, a bare ReplicaSet, a CronJob's started Jobs).
	PodHold Hold
}

// Pods counts a workload's running pods by the config hash they started
// with.
type Pods struct {
	Current int            `json:"current"`
	Stale   int            `json:"stale"`
	ByHash  map[string]int `json:"byHash,omitempty"`
}

// Status is one workload's drift: what it is, what its pods run, and what
// happens next.
type Status struct {
	Workload
	Pods  Pods
	State State
	// Hold is why the state is NotRolled.
	Hold Hold
	// Changed names the config objects whose last change reached this
	// workload ("ConfigMap/web-config"), and ChangedAt when the first of
	// them was seen; both empty when unknown (before the controller saw a
	// change, or after it restarted without a Report to read them from).
	Changed   []string
	ChangedAt time.Time
	// Unpinned, where revisions are on, says why the revision it runs is
	// not pinned to snapshots of its config: they cannot be written in its
	// namespace now (a quota, RBAC, an admission webhook); "" otherwise.
	Unpinned string
}

// CountPods sorts a workload's pods by hash: Current are those that
// started with wanted, Stale the rest (a pod without a hash started before
// the workload was stamped, so not with wanted either).
func CountPods(wanted string, byHash map[string]int) Pods {
	p := Pods{ByHash: byHash}
	for h, n := range byHash {
		if h == wanted {
			p.Current += n
		} else {
			p.Stale += n
		}
	}
	return p
}

// StatusOf decides a workload's state from its hashes, holds and pods.
func StatusOf(w Workload, pods Pods) Status {
	s := Status{Workload: w, Pods: pods}
	switch {
	case w.TemplateHold == RolledBackHold:
		s.State, s.Hold = RolledBack, w.TemplateHold
	case w.Template != w.Wanted && w.TemplateHold.Reason != "":
		s.State, s.Hold = NotRolled, w.TemplateHold
	case w.Template != w.Wanted:
		s.State = Pending
	case pods.Stale == 0:
		s.State = Done
	case w.PodHold.Reason != "":
		s.State, s.Hold = NotRolled, w.PodHold
	default:
		s.State = Progressing
	}
	return s
}

// Stale reports whether any running pod started with config other than
// what the workload's config gives now. A workload with no pods runs
// nothing stale, whatever its template says.
func (s Status) Stale() bool { return s.Pods.Stale > 0 }

// Pod is what the counting needs of one pod.
type Pod struct {
	// Controller is the pod's controlling owner, nil for a bare Pod.
	Controller *metav1.OwnerReference
	// Hash is the config hash it started with ("" for none).
	Hash string
}

// Owners maps the UIDs of the objects that stand between a pod and its
// workload (a Deployment's ReplicaSets, a CronJob's Jobs) to their own
// controller.
type Owners map[types.UID]*metav1.OwnerReference

// PodsByWorkload counts pods by the UID of the top-level workload they
// belong to, and by hash: a pod's controller, or that controller's own
// controller when it has one (ReplicaSet → Deployment, Job → CronJob).
func PodsByWorkload(pods []Pod, owners Owners) map[types.UID]map[string]int {
	out := map[types.UID]map[string]int{}
	for _, p := range pods {
		if p.Controller == nil {
			continue
		}
		top := owners.Top(p.Controller)
		if out[top] == nil {
			out[top] = map[string]int{}
		}
		out[top][p.Hash]++
	}
	return out
}

// Hashes lists the hashes of a Pods in a stable order, for printing.
func (p Pods) Hashes() []string { return slices.Sorted(maps.Keys(p.ByHash)) }

// PodHoldOf says why a new template does not replace w's running pods, if
// it does not: its kind's reasons (built-in, and a declared kind's
// notRolledWhen), and the runs a kind whose next run takes the template (a
// CronJob) has already started.
func PodHoldOf(w workload.Object) Hold {
	if w.Type.NextRunTakesTemplate {
		return StartedJobs
	}
	return w.Hold()
}

// PodsOfCluster counts the running pods of pods by top-level workload UID
// and hash, reaching workloads through rss and jobs. Pods that finished
// run nothing; pods being deleted still run what they started with.
func PodsOfCluster(pods []corev1.Pod, rss []appsv1.ReplicaSet, jobs []batchv1.Job) map[types.UID]map[string]int {
	running := make([]Pod, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		if !Live(p) {
			continue
		}
		running = append(running, Pod{Controller: metav1.GetControllerOf(p), Hash: p.Annotations[v1alpha1.ConfigHashAnnotation]})
	}
	return PodsByWorkload(running, OwnersOf(rss, jobs))
}

// LivePods groups the live pods of pods by the UID of their top-level
// workload, reached through owners; bare pods are left out.
func LivePods(pods []corev1.Pod, owners Owners) map[types.UID][]*corev1.Pod {
	out := map[types.UID][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if c := metav1.GetControllerOf(p); c != nil && Live(p) {
			top := owners.Top(c)
			out[top] = append(out[top], p)
		}
	}
	return out
}

// Live says a pod has not finished: a Succeeded or Failed pod runs no
// config and mounts nothing.
func Live(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// OwnersOf maps each ReplicaSet and Job that has a controller to it.
func OwnersOf(rss []appsv1.ReplicaSet, jobs []batchv1.Job) Owners {
	owners := Owners{}
	for i := range rss {
		if ref := metav1.GetControllerOf(&rss[i]); ref != nil {
			owners[rss[i].UID] = ref
		}
	}
	for i := range jobs {
		if ref := metav1.GetControllerOf(&jobs[i]); ref != nil {
			owners[jobs[i].UID] = ref
		}
	}
	return owners
}

// Top is the UID of the top-level workload behind a pod's controller: the
// controller, or its own controller when it has one (workload.TopOwner).
func (o Owners) Top(controller *metav1.OwnerReference) types.UID {
	return workload.TopOwner(controller, func(ref *metav1.OwnerReference) *metav1.OwnerReference { return o[ref.UID] }).UID
}
