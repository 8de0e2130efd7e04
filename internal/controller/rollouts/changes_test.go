package rollouts

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ConfigMap's creation is no change for a workload created in a later
// second: informers deliver in their own order, so its event may come
// after the consumer's even when it was created first.
func TestCreationChangesOnlyEarlierConsumers(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	cm := func(at time.Time) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at)}}
	}
	c := consumer{created: metav1.NewTime(t0)}
	for _, tc := range []struct {
		name string
		cm   time.Time
		want bool
	}{
		{"created after the workload: its pods started without it", t0.Add(5 * time.Second), true},
		{"created a second before the workload: its pods started with it", t0.Add(-1 * time.Second), false},
		{"created in the same second: the order is unknown, so a change", t0.Add(400 * time.Millisecond), true},
	} {
		if got := c.startedWithout(cm(tc.cm)); got != tc.want {
			t.Errorf("%s: startedWithout = %v, want %v", tc.name, got, tc.want)
		}
	}
}
