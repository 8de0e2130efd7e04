package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// A wave rolled back holds its old revision only while its delivery is
// halted: every step that leaves the halt (promote, resume) takes the
// rollback back. The gate, which Next asks for only while a delivery
// progresses, therefore never judges a rolled-back wave, and judges every
// started wave against the delivered revision (Want's Reached); the
// branches that asked the gate for a rolled-back wave's old revision were
// dead, and are gone. This walks every status Next can reach from a new
// delivery (with a rollback on failure, checks, a bake, approvals, a
// break-glass immediate delivery) under every request and every gate, and
// holds both facts on each.
func TestRolledBackOnlyWhileHalted(t *testing.T) {
	gates := map[string]*Gate{
		"healthy":     {},
		"progressing": {Progressing: []string{progressingA}},
		"unready":     {Unready: []string{unreadyA}},
		"failed":      {Failed: "Deployment a: crashed"},
	}
	measurements := map[string][]Measurement{"none": nil, "passed": {passed}, "failed": {tooHigh}}
	requests := []v1alpha1.DeliveryAction{"", v1alpha1.ActionPromote, v1alpha1.ActionHalt, v1alpha1.ActionResume}
	starts := map[string]*v1alpha1.ConfigDelivery{
		"waves":     record(onFailureRollback, defaultCheck, withBake(60)),
		"approval":  record(onFailureRollback, canaryApproval),
		"immediate": record(onFailureRollback, defaultCheck, breakGlass(true)),
	}
	type node struct {
		rec *v1alpha1.ConfigDelivery
		at  time.Time
	}
	seen := map[string]bool{}
	var queue []node
	for _, r := range starts {
		queue = append(queue, node{r, t0})
	}
	steps, reqID := 0, 0
	for len(queue) > 0 && steps < 200000 {
		n := queue[0]
		queue = queue[1:]
		if key := signature(n.rec); seen[key] {
			continue
		} else {
			seen[key] = true
		}
		for _, action := range requests {
			rec := n.rec.DeepCopy()
			if action != "" {
				reqID++
				rec.Spec.Request = &v1alpha1.DeliveryRequest{Action: action, ID: fmt.Sprint("req-", reqID), RequestedBy: "alice"}
			}
			// Each look is late enough for any soak, check interval or
			// deadline to have passed, or not at all.
			for _, later := range []time.Duration{time.Second, 20 * time.Minute} {
				now := n.at.Add(later)
				step := Next(rec, Observation{Now: now})
				steps++
				if !step.NeedsGate {
					check(t, rec, step)
					queue = append(queue, node{withStatus(rec, step), now})
					continue
				}
				if rec.Status.State != v1alpha1.DeliveryProgressing || rec.Status.RolledBack {
					t.Fatalf("Next asked for the gate of a %s delivery (rolled back: %v)", rec.Status.State, rec.Status.RolledBack)
				}
				for _, g := range gates {
					for _, ms := range measurements {
						gate := *g
						step := Next(rec, Observation{Now: now, Gate: &gate, Measurements: ms})
						steps++
						check(t, rec, step)
						queue = append(queue, node{withStatus(rec, step), now})
					}
				}
			}
		}
	}
	if len(queue) > 0 {
		t.Fatalf("the walk stopped after %d steps with %d statuses left", steps, len(queue))
	}
	if len(seen) < 50 {
		t.Fatalf("only %d statuses reached: the walk does not explore", len(seen))
	}
	t.Logf("%d statuses reached in %d steps", len(seen), steps)
}

func check(t *testing.T, rec *v1alpha1.ConfigDelivery, step Step) {
	t.Helper()
	if s := step.Status; s.RolledBack && s.State != v1alpha1.DeliveryHalted {
		t.Fatalf("a %s delivery keeps a rollback (from %s, %s, request %v)", s.State, rec.Status.State, rec.Status.Reason, rec.Spec.Request)
	}
}

// withStatus is rec after step, its request handled or not as the step
// says.
func withStatus(rec *v1alpha1.ConfigDelivery, step Step) *v1alpha1.ConfigDelivery {
	next := rec.DeepCopy()
	next.Status = *step.Status.DeepCopy()
	return next
}

// signature is what tells two statuses apart for the walk: where the
// delivery stands, not when.
func signature(rec *v1alpha1.ConfigDelivery) string {
	s := rec.Status
	sig := fmt.Sprintf("%s/%s/%s/rb=%v/req=%v", s.State, s.Reason, s.CurrentWave, s.RolledBack, rec.Spec.Request != nil && rec.Spec.Request.ID != s.HandledRequest)
	for _, w := range s.Waves {
		sig += fmt.Sprintf("|%v%v%v%d", w.StartedAt != nil, w.HealthySince != nil, w.CompletedAt != nil, len(w.Checks))
	}
	if b := s.Bake; b != nil {
		sig += fmt.Sprintf("|bake%v%d", b.CompletedAt != nil, len(b.Checks))
	}
	return sig
}
