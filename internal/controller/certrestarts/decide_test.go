package certrestarts

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
)

// Which pod of a workload is evicted for a stale certificate, and when
// none is.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	grace := 5 * time.Minute
	pod := func(name string, restart, ready bool, staleFor time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}}}
		if restart {
			p.Annotations[v1alpha1.OnStaleCertAnnotation] = v1alpha1.OnStaleCertRestart
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		e := reload.CertEntry{Port: 8443, Secret: "web-tls", Result: reload.CertCurrent, Presented: &reload.Leaf{Serial: "0B"}, Mounted: reload.Leaf{Serial: "0B"}, Since: now.Add(-time.Hour)}
		if staleFor > 0 {
			e.Result, e.Presented, e.Since = reload.CertStale, &reload.Leaf{Serial: "0A"}, now.Add(-staleFor)
		}
		p.Status.Conditions = append(p.Status.Conditions, reload.CertCondition([]reload.CertEntry{e}))
		return p
	}
	terminating := pod("web-d", true, true, 0)
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	for name, tc := range map[string]struct {
		pods  []*corev1.Pod
		last  *evicted
		evict string
		wait  time.Duration
		why   string
	}{
		"stale within the grace: looked at again when it ends": {pods: []*corev1.Pod{pod("web-a", true, true, 2*time.Minute), pod("web-b", true, true, 0)},
			wait: 3 * time.Minute, why: "no pod has presented"},
		"past the grace, the others ready: the longest stale goes first": {pods: []*corev1.Pod{pod("web-a", true, true, 6*time.Minute), pod("web-b", true, true, 9*time.Minute), pod("web-c", true, true, 0)},
			evict: "web-b"},
		"without on-stale-cert: Restart, only reported":   {pods: []*corev1.Pod{pod("web-a", false, true, time.Hour), pod("web-b", false, true, 0)}, why: "no pod"},
		"another pod not ready: none":                     {pods: []*corev1.Pod{pod("web-a", true, true, time.Hour), pod("web-b", true, false, 0)}, wait: lookAgain, why: "web-b is not ready"},
		"a pod terminating: none":                         {pods: []*corev1.Pod{pod("web-a", true, true, time.Hour), terminating}, wait: lookAgain, why: "web-d is terminating"},
		"the pod evicted last still there: none":          {pods: []*corev1.Pod{pod("web-a", true, true, time.Hour), pod("web-b", true, true, time.Hour)}, last: &evicted{pod: "uid-web-b", pods: 2}, wait: lookAgain, why: "replacement"},
		"its replacement not created yet: none":           {pods: []*corev1.Pod{pod("web-a", true, true, time.Hour)}, last: &evicted{pod: "uid-web-x", pods: 2}, wait: lookAgain, why: "replacement"},
		"its replacement ready: the next":                 {pods: []*corev1.Pod{pod("web-a", true, true, time.Hour), pod("web-y", true, true, 0)}, last: &evicted{pod: "uid-web-x", pods: 2}, evict: "web-a"},
		"one replica: evicted, nothing else to wait for":  {pods: []*corev1.Pod{pod("web-a", true, true, time.Hour)}, evict: "web-a"},
		"the stale pod itself not ready is still evicted": {pods: []*corev1.Pod{pod("web-a", true, false, time.Hour), pod("web-b", true, true, 0)}, evict: "web-a"},
	} {
		t.Run(name, func(t *testing.T) {
			var last evicted
			if tc.last != nil {
				last = *tc.last
			}
			d := decide(tc.pods, grace, now, last, tc.last != nil)
			got := ""
			if d.Pod != nil {
				got = d.Pod.Name
				if d.Stale.Result != reload.CertStale {
					t.Errorf("evicted for %+v", d.Stale)
				}
			}
			if got != tc.evict || (tc.evict == "" && (d.Wait != tc.wait || !strings.Contains(d.Why, tc.why))) {
				t.Errorf("evict %q, wait %s, why %q; want %q, %s, %q", got, d.Wait, d.Why, tc.evict, tc.wait, tc.why)
			}
		})
	}
}
