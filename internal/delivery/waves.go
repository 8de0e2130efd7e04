package delivery

import (
	"github.com/configward/configward/internal/api/v1alpha1"
)

// Open reports whether a delivery in this state still holds consumers
// back: it is rolling, waiting for a person, or halted.
func Open(s v1alpha1.DeliveryState) bool {
	switch s {
	case v1alpha1.DeliveryProgressing, v1alpha1.DeliveryWaitingForApproval, v1alpha1.DeliveryHalted, "":
		return true
	}
	return false
}

// Find returns the index of the wave a workload is placed in and its
// target there; -1 when the delivery did not place it (it was created
// during the delivery).
func Find(rec *v1alpha1.ConfigDelivery, kind, name string) (int, *v1alpha1.DeliveryTarget) {
	for i := range rec.Status.Waves {
		w := &rec.Status.Waves[i]
		for j := range w.Workloads {
			if t := &w.Workloads[j]; t.Kind == kind && t.Name == name {
				return i, t
			}
		}
	}
	return -1, nil
}

// CurrentWave is the index of the wave rolling, soaking or waiting (the
// last one started, or -1 before any started).
func CurrentWave(rec *v1alpha1.ConfigDelivery) int {
	cur := -1
	for i, w := range rec.Status.Waves {
		if w.StartedAt != nil {
			cur = i
		}
	}
	return cur
}

// reached says whether wave of rec has started (rolled back or not); -1,
// no wave, has not.
func reached(rec *v1alpha1.ConfigDelivery, wave int) bool {
	return wave >= 0 && rec.Status.Waves[wave].StartedAt != nil
}

// RolledBack reports whether wave i of rec went back to what it ran
// before: a failed delivery with onFailure: Rollback takes back the waves
// that were being judged (the current one; every wave of an immediate
// delivery) and, when the bake after the last wave failed, every wave.
func RolledBack(rec *v1alpha1.ConfigDelivery, i int) bool {
	if !rec.Status.RolledBack || !reached(rec, i) {
		return false
	}
	return judged(rec.Status.Waves[i]) || rec.Status.Bake != nil
}

// Judged are the waves whose holders the gate judges: started and not
// completed. One wave, the current, but for an immediate delivery, which
// starts them all at once.
func Judged(rec *v1alpha1.ConfigDelivery) []int {
	var out []int
	for i := range rec.Status.Waves {
		if judged(rec.Status.Waves[i]) {
			out = append(out, i)
		}
	}
	return out
}

func judged(w v1alpha1.WaveStatus) bool { return w.StartedAt != nil && w.CompletedAt == nil }

// Moved are the waves whose holders rec moves now, for the controllers
// that move them (the rollout controllers re-stamp their workloads): the
// current wave (started, its holders take the delivered content; rolled
// back, they go back), every wave judged or rolled back with it (an
// immediate delivery's, a failed bake's), and, of a cancelled delivery,
// every wave, which plain rollouts take over. Earlier waves were moved when
// they started.
func Moved(rec *v1alpha1.ConfigDelivery) []int {
	var out []int
	switch {
	case rec.Status.State == v1alpha1.DeliveryCancelled:
		for i := range rec.Status.Waves {
			out = append(out, i)
		}
	case Open(rec.Status.State):
		cur := CurrentWave(rec)
		for i := range rec.Status.Waves {
			if i == cur || judged(rec.Status.Waves[i]) || RolledBack(rec, i) {
				out = append(out, i)
			}
		}
	}
	return out
}
