package delivery

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// Health states of one workload at a wave's gate.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Failed      = "Failed"
	// Unready: the workload runs the delivered revision everywhere, but
	// not every pod is ready and available. Before the wave was healthy
	// that is waiting; during its soak, pods that stopped being ready.
	Unready = "Unready"
	// Unverified: the workload cannot show health by itself (paused,
	// OnDelete, opted out, a CronJob until its next Job, a kind whose
	// status configward cannot read and whose pods it cannot find). It
	// neither blocks its wave nor passes it: a wave of only unverified
	// workloads passes on its soak time alone, and the record lists each.
	Unverified = "Unverified"
)

// HealthOf says where one workload of a started wave stands: its template
// must name, of each delivered config, the snapshot want gives it (the
// delivered revision: of every member of a change set at once), its own
// status must show the rollout complete, and its pods of that revision
// (pods, of which it keeps those carrying its template's config hash) must
// be ready without restarts.
func HealthOf(w workload.Object, want revision.Snapshots, pods []*corev1.Pod) (state, message string) {
	if w.RolloutsDisabled() {
		return Unverified, "opted out of rollouts (" + v1alpha1.RolloutAnnotation + "): configward does not roll it"
	}
	named, _ := w.TemplateAnnotation(v1alpha1.ConfigSnapshotsAnnotation)
	snaps, _ := revision.Decode(named)
	for src, to := range want {
		if snaps[src] != to {
			return Progressing, "waiting for its template to be stamped with the delivered revision"
		}
	}
	if hold := w.Hold(); hold.Reason != "" {
		return Unverified, hold.Why + ": running pods keep the old config until " + hold.Until
	}
	if w.Type.NextRunTakesTemplate {
		return Unverified, "its next Job takes the delivered revision; a CronJob shows no health until then"
	}
	hash, _ := w.ConfigHash()
	var ours []*corev1.Pod
	for _, p := range pods {
		if p.Annotations[v1alpha1.ConfigHashAnnotation] == hash && p.DeletionTimestamp == nil {
			ours = append(ours, p)
		}
	}
	for _, p := range ours {
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if cs.RestartCount > 0 {
				return Failed, fmt.Sprintf("pod %s of the delivered revision restarted (container %q, %d restarts)", p.Name, cs.Name, cs.RestartCount)
			}
		}
	}
	progress := w.Progress()
	switch {
	case progress.Failed != "":
		return Failed, progress.Failed
	case progress.Known && progress.Unready:
		return Unready, progress.Waiting
	case progress.Known && !progress.Done:
		return Progressing, progress.Waiting
	case !progress.Known && len(ours) == 0:
		if len(pods) == 0 {
			return Unverified, "configward cannot read this kind's rollout status and found none of its pods"
		}
		return Progressing, "no pod of the delivered revision yet"
	}
	for _, p := range ours {
		if !ready(p) {
			return Unready, fmt.Sprintf("pod %s of the delivered revision is not ready", p.Name)
		}
	}
	if !progress.Known && len(ours) < len(pods) {
		return Progressing, fmt.Sprintf("%d pods of an older revision left", len(pods)-len(ours))
	}
	return Healthy, ""
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
