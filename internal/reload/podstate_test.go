package reload

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
)

// A pod's condition reads back as written, and a pod stands with a config
// by what its entry says against the content current now.
func TestPodStates(t *testing.T) {
	key := []byte("installation key")
	v1 := ContentID(key, "shop", "ConfigMap", "flags", digest.KeyDigests(map[string]string{"a": "1"}, nil))
	v2 := ContentID(key, "shop", "ConfigMap", "flags", digest.KeyDigests(map[string]string{"a": "2"}, nil))
	if v1 == v2 || v1 != ContentID(key, "shop", "ConfigMap", "flags", digest.KeyDigests(map[string]string{"a": "1"}, nil)) {
		t.Fatal("content ids do not tell contents apart, or are not stable")
	}
	if ContentID([]byte("other key"), "shop", "ConfigMap", "flags", digest.KeyDigests(map[string]string{"a": "1"}, nil)) == v1 {
		t.Fatal("a content id does not depend on the key")
	}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	pod := func(name string, agent bool, entries ...PodEntry) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if agent {
			p.Spec.InitContainers = []corev1.Container{{Name: AgentContainer}}
			p.Annotations = map[string]string{v1alpha1.ReloadAgentAnnotation: "watch"}
		}
		if entries != nil {
			p.Status.Conditions = []corev1.PodCondition{Condition(entries)}
		}
		return p
	}
	entry := func(content, result, msg string) PodEntry {
		return PodEntry{Config: "ConfigMap/flags", Content: content, Result: result, Message: msg, SwappedAt: at, At: at}
	}
	certOnly := pod("h-agent-for-certificates-only", true)
	certOnly.Annotations = map[string]string{v1alpha1.ServingCertAnnotation: "8443"}
	pods := []*corev1.Pod{
		pod("a-applied", true, entry(v2, Applied, "")),
		pod("b-rejected", true, entry(v2, Rejected, "line 1: bad")),
		pod("c-older", true, entry(v1, Applied, "")),
		pod("d-unknown-content", true, entry("", Applied, "")),
		pod("e-pending", true),
		pod("f-no-agent", false),
		pod("g-seen", true, entry(v2, Seen, "")),
		// Its agent only checks a served certificate: it says nothing of
		// hot config, and must not hold a wait up as pending.
		certOnly,
	}
	got := Count(pods, "ConfigMap/flags", v2)
	want := map[PodState]int{StateApplied: 1, StateRejected: 1, StateOlder: 2, StatePending: 1, StateNoAgent: 2, StateUnconfirmed: 1}
	for _, s := range States {
		if got.Pods[s] != want[s] {
			t.Errorf("%s: %d pods, want %d", s, got.Pods[s], want[s])
		}
	}
	if len(got.Rejections) != 1 || got.Rejections[0] != (Rejection{Pod: "b-rejected", Message: "line 1: bad"}) {
		t.Errorf("rejections %+v", got.Rejections)
	}
	if got.Done() || got.Stale() != 3 {
		t.Errorf("done %v stale %d, want not done, 3 stale", got.Done(), got.Stale())
	}
	if done := Count(pods[5:], "ConfigMap/flags", v2); !done.Done() {
		t.Errorf("pods without an agent and unconfirmed ones hold up a wait: %+v", done)
	}

	for name, tc := range map[string]struct {
		entries []PodEntry
		status  corev1.ConditionStatus
		reason  string
	}{
		"every config applied":        {[]PodEntry{entry(v2, Applied, "")}, corev1.ConditionTrue, ReasonApplied},
		"one rejected wins":           {[]PodEntry{{Config: "ConfigMap/a", Content: "", Result: Applied}, {Config: "ConfigMap/b", Content: v2, Result: Rejected}}, corev1.ConditionFalse, ReasonRejected},
		"a content configward lacked": {[]PodEntry{{Config: "ConfigMap/a", Result: Applied}, {Config: "ConfigMap/b", Content: v2, Result: Seen}}, corev1.ConditionUnknown, ReasonNotCurrent},
		"nothing confirms":            {[]PodEntry{entry(v2, Triggered, "")}, corev1.ConditionUnknown, ReasonUnconfirmed},
	} {
		c := Condition(tc.entries)
		if c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: %s %s, want %s %s", name, c.Status, c.Reason, tc.status, tc.reason)
		}
		back := EntriesOf(&corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{c}}})
		if len(back) != len(tc.entries) {
			t.Errorf("%s: %d entries read back, want %d", name, len(back), len(tc.entries))
		}
	}
	if got := EntriesOf(&corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: Condition(nil).Type, Message: "not json"}}}}); len(got) != 0 {
		t.Errorf("a condition configward did not write reads as %v", got)
	}
}

func TestAgentTokenMountedElsewhere(t *testing.T) {
	token := func(audience string) corev1.Volume {
		return corev1.Volume{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, Path: "token"}}}}}}
	}
	mount := []corev1.VolumeMount{{Name: "t", MountPath: "/t"}}
	agent := corev1.Container{Name: AgentContainer, VolumeMounts: mount}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want string
	}{
		{"the agent alone", corev1.PodSpec{Volumes: []corev1.Volume{token(Audience)}, InitContainers: []corev1.Container{agent}, Containers: []corev1.Container{{Name: "app"}}}, ""},
		{"the program too", corev1.PodSpec{Volumes: []corev1.Volume{token(Audience)}, InitContainers: []corev1.Container{agent}, Containers: []corev1.Container{{Name: "app", VolumeMounts: mount}}}, "app"},
		{"a container named as the agent, not the agent's init container", corev1.PodSpec{Volumes: []corev1.Volume{token(Audience)}, Containers: []corev1.Container{agent}}, AgentContainer},
		{"an init container", corev1.PodSpec{Volumes: []corev1.Volume{token(Audience)}, InitContainers: []corev1.Container{agent, {Name: "setup", VolumeMounts: mount}}}, "setup"},
		{"an ephemeral container", corev1.PodSpec{Volumes: []corev1.Volume{token(Audience)}, InitContainers: []corev1.Container{agent},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", VolumeMounts: mount}}}}, "debug"},
		{"a token of another audience", corev1.PodSpec{Volumes: []corev1.Volume{token("vault")}, Containers: []corev1.Container{{Name: "app", VolumeMounts: mount}}}, ""},
	} {
		if got := AgentTokenMountedElsewhere(&tc.spec); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
