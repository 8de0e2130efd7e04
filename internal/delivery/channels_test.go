package delivery

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
)

func pct(n int32) *int32 { return &n }

func TestWaveOf(t *testing.T) {
	canary := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout"}}
	waves := []v1alpha1.Wave{{Name: "canary", Selector: canary, PodPercent: pct(10)}, {Name: "rest"}}
	checkout := &PodOwner{Kind: "Deployment", Name: "checkout", Labels: map[string]string{"app": "checkout"}}
	other := &PodOwner{Kind: "Deployment", Name: "cart", Labels: map[string]string{"app": "cart"}}
	asked := 0
	for _, tc := range []struct {
		owner   *PodOwner
		inShare bool
		want    string
	}{
		{checkout, true, "canary"},
		{checkout, false, "rest"},
		{other, true, "rest"},
		{nil, true, "rest"},
	} {
		got, err := WaveOf(waves, tc.owner, func(i int) (bool, error) { asked++; return tc.inShare, nil })
		if err != nil || got != tc.want {
			t.Errorf("owner %+v, in share %v: %q, %v; want %q", tc.owner, tc.inShare, got, err, tc.want)
		}
	}
	if asked != 2 {
		t.Errorf("the share was asked %d times, want only for the canary's workload (2)", asked)
	}
	if _, err := WaveOf(waves, checkout, func(int) (bool, error) { return false, errors.New("no list") }); err == nil {
		t.Error("an error listing the pods is not passed on")
	}
}

// A workload's place in a percent wave depends on itself alone: adding
// and removing other workloads never moves it, and the share comes out
// near the percent.
func TestBucketIsStable(t *testing.T) {
	waves := []v1alpha1.Wave{{Name: "early", Percent: pct(25)}, {Name: "rest"}}
	place := func(n int) map[string]string {
		out := map[string]string{}
		for i := range n {
			o := &PodOwner{Kind: "Deployment", Name: fmt.Sprintf("app-%d", i)}
			out[o.Name], _ = WaveOf(waves, o, nil)
		}
		return out
	}
	few, many := place(100), place(1000)
	early := 0
	for name, w := range few {
		if many[name] != w {
			t.Errorf("%s moved from %s to %s as workloads were added", name, w, many[name])
		}
	}
	for _, w := range many {
		if w == "early" {
			early++
		}
	}
	if early < 200 || early > 300 {
		t.Errorf("25 percent of 1000 workloads placed %d in the wave", early)
	}
}

func TestShareTarget(t *testing.T) {
	for _, tc := range []struct {
		pct         int32
		total, want int
	}{{10, 1, 1}, {10, 10, 1}, {10, 11, 2}, {10, 20, 2}, {50, 2, 1}, {100, 3, 3}} {
		if got := ShareTarget(tc.pct, tc.total); got != tc.want {
			t.Errorf("ShareTarget(%d, %d) = %d, want %d", tc.pct, tc.total, got, tc.want)
		}
	}
}

func TestHotHealthOf(t *testing.T) {
	started := time.Now().Add(-time.Minute)
	readyCond := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	agent := []corev1.Container{{Name: reload.AgentContainer}}
	entry := func(content, result string) corev1.PodCondition {
		return reload.Condition([]reload.PodEntry{{Config: "ConfigMap/flags", Content: content, Result: result, Message: "bad value"}})
	}
	pod := func(withAgent bool, conds ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Conditions: conds}}
		if withAgent {
			p.Spec.InitContainers = agent
			p.Annotations = map[string]string{v1alpha1.ReloadAgentAnnotation: "watch"}
		}
		return p
	}
	checked := func(conds ...corev1.PodCondition) *corev1.Pod {
		p := pod(true, conds...)
		p.Annotations[v1alpha1.ReloadCheckAnnotation] = "http://localhost:2019/metrics#caddy_config_last_reload_successful"
		return p
	}
	restarted := pod(true, readyCond...)
	restarted.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 1,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(started.Add(time.Second))}}}}
	restartedBefore := pod(true, append(readyCond, entry("want", reload.Applied))...)
	restartedBefore.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 1,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(started.Add(-time.Hour))}}}}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		propagation time.Duration
		want        string
	}{
		{"applied and ready", pod(true, append(readyCond, entry("want", reload.Applied))...), 0, Healthy},
		{"rejected", pod(true, append(readyCond, entry("want", reload.Rejected))...), 0, Failed},
		{"seen, nothing checks", pod(true, append(readyCond, entry("want", reload.Seen))...), 0, Healthy},
		{"seen, its check never confirmed", checked(append(readyCond, entry("want", reload.Seen))...), 0, Failed},
		{"applied, checked", checked(append(readyCond, entry("want", reload.Applied))...), 0, Healthy},
		{"older content", pod(true, append(readyCond, entry("old", reload.Applied))...), 0, Progressing},
		{"no report yet", pod(true, readyCond...), 0, Progressing},
		{"applied, not ready", pod(true, entry("want", reload.Applied)), 0, Unready},
		{"restarted during the wave", restarted, 0, Failed},
		{"restarted before the wave", restartedBefore, 0, Healthy},
		{"no agent, within propagation", pod(false, readyCond...), 2 * time.Minute, Progressing},
		{"no agent, after propagation, ready", pod(false, readyCond...), 30 * time.Second, Unverified},
		{"no agent, after propagation, not ready", pod(false), 30 * time.Second, Unready},
	} {
		if got, msg := HotHealthOf(tc.pod, "ConfigMap/flags", "want", started, tc.propagation, time.Now()); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, msg, tc.want)
		}
	}
}
