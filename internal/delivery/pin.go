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

// Pin returns the snapshot of the delivered config that a workload's
// template must name, or "" for the config's current content.
//
// rec is the latest delivery of the config (nil: none yet), current the
// snapshot name of the config's content now, stored the snapshot of the
// config that the workload's stored template names ("" for a workload
// being created, or one whose template names none).
//
//   - rec delivers the current content and is finished: the current
//     content.
//   - rec delivers the current content and is open: a workload whose wave
//     has started gets it, unless its wave failed and was rolled back; any
//     other keeps the revision the delivery assigned it when it started
//     (its target's From), and one created during the delivery, placed in
//     the last wave, the one most consumers read (rec's From).
//   - otherwise the content changed and its delivery has not started yet:
//     every workload keeps what it runs (stored).
//
// Where the assigned revision is "" (no copy of the old content was kept),
// the workload keeps what it runs.
func Pin(rec *v1alpha1.ConfigDelivery, current, kind, name, stored string) string {
	if rec == nil || rec.Status.To == "" || rec.Status.To != current {
		return stored
	}
	if !Open(rec.Status.State) {
		return ""
	}
	i, from := placed(rec, kind, name)
	if reached(rec, i) && !RolledBack(rec, i) {
		return ""
	}
	if from == "" {
		return stored
	}
	return from
}

// Reached reports whether rec, the latest delivery of a config whose
// content is current now, has reached the workload kind/name: it is open
// and the workload's wave has started (rolled back or not). The delivery
// then waits until the workload's template names exactly the snapshot Pin
// gives, so the whole of the template's stamp counts, not only its hash.
func Reached(rec *v1alpha1.ConfigDelivery, current, kind, name string) bool {
	if rec == nil || rec.Status.To == "" || rec.Status.To != current || !Open(rec.Status.State) {
		return false
	}
	i, _ := placed(rec, kind, name)
	return reached(rec, i)
}

// placed is the index of the wave the workload belongs to (the last one for
// a workload created during the delivery, which no wave names) and the
// revision the delivery assigned it when it started (rec's From for an
// unplaced one).
func placed(rec *v1alpha1.ConfigDelivery, kind, name string) (int, string) {
	i, t := Find(rec, kind, name)
	if t == nil {
		return len(rec.Status.Waves) - 1, rec.Status.From
	}
	return i, t.From
}

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
	return rec.Status.Waves[i].CompletedAt == nil || rec.Status.Bake != nil
}
