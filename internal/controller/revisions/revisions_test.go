package revisions

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// The decisions of the revisions controller and the Snapshotter that need
// no cluster; suite_test.go runs the controller against kube-apiserver.

func TestAddCountsWhatAnAnnotationNames(t *testing.T) {
	app := revision.Source{Kind: refs.ConfigMap, Name: "app"}
	creds := revision.Source{Kind: refs.Secret, Name: "creds"}
	both := revision.Snapshots{app: "app-1111111111", creds: "creds-2222222222"}
	for _, tc := range []struct {
		name       string
		annotation string
		creates    bool
		snapshots  []revision.Source
		creators   []revision.Snapshots
	}{
		{name: "nothing named", annotation: ""},
		{name: "a value configward did not write names nothing", annotation: "ConfigMap/app=app-1111111111,bogus", creates: true},
		{name: "a kind that gets no snapshots names nothing", annotation: "Service/app=app-1111111111", creates: true},
		{
			name: "what can create pods names its snapshots, by their own names, and needs them written", annotation: both.Encode(), creates: true,
			snapshots: []revision.Source{{Kind: refs.ConfigMap, Name: "app-1111111111"}, {Kind: refs.Secret, Name: "creds-2222222222"}},
			creators:  []revision.Snapshots{both},
		},
		{
			name: "a pod names its snapshots but writes none", annotation: both.Encode(),
			snapshots: []revision.Source{{Kind: refs.ConfigMap, Name: "app-1111111111"}, {Kind: refs.Secret, Name: "creds-2222222222"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := named{snapshots: map[revision.Source]bool{}}
			n.add(tc.annotation, tc.creates)
			if len(n.snapshots) != len(tc.snapshots) {
				t.Errorf("names %v, want %v", n.snapshots, tc.snapshots)
			}
			for _, s := range tc.snapshots {
				if !n.snapshots[s] {
					t.Errorf("does not name %v; names %v", s, n.snapshots)
				}
			}
			if fmt.Sprint(n.creators) != fmt.Sprint(tc.creators) {
				t.Errorf("creators %v, want %v", n.creators, tc.creators)
			}
		})
	}
}

func TestDeliveryNamesWhatAHotDeliveryMayWriteBack(t *testing.T) {
	rec := func(hot bool) *v1alpha1.ConfigDelivery {
		return &v1alpha1.ConfigDelivery{
			Spec: v1alpha1.ConfigDeliverySpec{Hot: hot, Config: v1alpha1.ConfigRef{Kind: "Secret", Name: "live"}},
			Status: v1alpha1.ConfigDeliveryStatus{From: "live-old", To: "live-new", Waves: []v1alpha1.WaveStatus{
				{Name: "canary", From: "live-canary-before"}, {Name: "rest", From: "live-rest-before"}}},
		}
	}
	got := map[revision.Source]bool{}
	for _, s := range deliveryNames(rec(true)) {
		got[s] = true
	}
	for _, name := range []string{"live-old", "live-new", "live-canary-before", "live-rest-before"} {
		if !got[revision.Source{Kind: refs.Secret, Name: name}] {
			t.Errorf("a hot delivery does not keep Secret %s (a rollback or a later wave writes it back); keeps %v", name, got)
		}
	}
	if names := deliveryNames(rec(false)); len(names) != 0 {
		t.Errorf("a delivery of rollout config keeps %v: its revisions name their own snapshots", names)
	}
}

func TestReadsOriginals(t *testing.T) {
	app := revision.Source{Kind: refs.ConfigMap, Name: "app"}
	named := revision.Snapshots{app: "app-1111111111"}.Encode()
	pod := func(annotation string, cms ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.ConfigSnapshotsAnnotation: annotation}}}
		c := corev1.Container{Name: "app"}
		for _, cm := range cms {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
		}
		p.Spec.Containers = []corev1.Container{c}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{name: "pinned: it reads the snapshot its revision names", pod: pod(named, "app-1111111111")},
		{name: "unpinned: it reads the original of a snapshot its revision names", pod: pod(named, "app", "other"), want: []string{"ConfigMap/app"}},
		{name: "a pod of no revision reads originals as it should", pod: pod("", "app")},
		{name: "an annotation configward did not write says nothing", pod: pod("ConfigMap/app", "app")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := readsOriginals(tc.pod)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("reads originals %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGraceLeft(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	grace := time.Minute
	for _, tc := range []struct {
		name           string
		since, created time.Time
		want           time.Duration
	}{
		{name: "unnamed just now: kept the whole grace", since: now, created: now.Add(-time.Hour), want: grace},
		{name: "unnamed for part of the grace", since: now.Add(-40 * time.Second), created: now.Add(-time.Hour), want: 20 * time.Second},
		{name: "unnamed for the whole grace: deleted", since: now.Add(-grace), created: now.Add(-time.Hour), want: 0},
		{name: "unnamed long ago: deleted", since: now.Add(-time.Hour), created: now.Add(-2 * time.Hour), want: -59 * time.Minute},
		// A template naming a snapshot just written may not be in the
		// cache yet: the grace counts from its creation.
		{name: "created after it was first seen unnamed", since: now.Add(-time.Hour), created: now.Add(-10 * time.Second), want: 50 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := graceLeft(tc.since, tc.created, grace, now); got != tc.want {
				t.Errorf("graceLeft = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestProbeAgainWhileBlocked(t *testing.T) {
	for requeue, want := range map[time.Duration]time.Duration{
		0:                blockedProbes, // nothing to collect: probe anyway
		3 * time.Second:  3 * time.Second,
		blockedProbes:    blockedProbes,
		10 * time.Minute: blockedProbes, // a long grace must not delay the probe
	} {
		if got := probeAgain(requeue); got != want {
			t.Errorf("probeAgain(%s) = %s, want %s", requeue, got, want)
		}
	}
}

func TestBlockedReasons(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	quota := apierrors.NewForbidden(cm, "app-1111111111", errors.New(`exceeded quota: cms, requested: configmaps=1, used: configmaps=2, limited: configmaps=2`))
	rbac := apierrors.NewForbidden(cm, "app-1111111111", errors.New(`User "configward" cannot create resource "configmaps"`))
	for _, tc := range []struct {
		name    string
		err     error
		reason  string
		blocked bool
	}{
		{name: "written", err: nil, reason: ""},
		{name: "a quota", err: &blocked{"quota", quota}, reason: "quota", blocked: true},
		{name: "RBAC or a webhook", err: &blocked{"forbidden", rbac}, reason: "forbidden", blocked: true},
		{name: "wrapped, still blocked", err: fmt.Errorf("ensuring: %w", &blocked{"quota", quota}), reason: "quota", blocked: true},
		// The original moved on or is gone: that revision's snapshot can
		// never be written, but other writes can; the namespace is not marked.
		{name: "the original changed", err: &blocked{"changed", errors.New("changed again")}, reason: "changed"},
		{name: "the original is gone", err: readFailed(revision.Source{Kind: refs.ConfigMap, Name: "app"}, "shop", apierrors.NewNotFound(cm, "app")), reason: "missing"},
		{name: "a passing error", err: readFailed(revision.Source{Kind: refs.ConfigMap, Name: "app"}, "shop", apierrors.NewTimeoutError("slow", 1)), reason: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BlockedReason(tc.err); got != tc.reason {
				t.Errorf("BlockedReason = %q, want %q", got, tc.reason)
			}
			if got := Blocked(tc.err); got != tc.blocked {
				t.Errorf("Blocked = %v, want %v", got, tc.blocked)
			}
		})
	}
	if !isQuota(quota) || isQuota(rbac) || isQuota(errors.New("exceeded quota")) {
		t.Error("isQuota tells a ResourceQuota's refusal by the API server's status message alone")
	}
	if !strings.Contains(refusalHint(errors.New(`admission webhook "validate.configward.dev" denied the request`)), "--configward-service-accounts") {
		t.Error("a webhook's refusal does not point at configward's own webhook's setting")
	}
	if !strings.Contains(refusalHint(rbac), "RBAC") {
		t.Error("an RBAC refusal does not point at RBAC")
	}
}

func TestBlockedNote(t *testing.T) {
	short := &blocked{"quota", errors.New("a ResourceQuota refused it")}
	if got := blockedNote(short); got != "quota: a ResourceQuota refused it" {
		t.Errorf("blockedNote = %q", got)
	}
	long := blockedNote(&blocked{"forbidden", errors.New(strings.Repeat("x", 2*maxBlockedNote))})
	if len(long) != maxBlockedNote || !strings.HasPrefix(long, "forbidden: x") || !strings.HasSuffix(long, "x...") {
		t.Errorf("a long refusal's note is %d bytes (%q...), want %d ending in ...", len(long), long[:20], maxBlockedNote)
	}
}
