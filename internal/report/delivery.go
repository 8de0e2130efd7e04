package report

import (
	"fmt"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
)

// ConfigDelivery is the rule of the results that say where a workload
// stands in an open config delivery.
const ConfigDelivery = "config-delivery"

// DeliveryResult is one workload's place in one open delivery: fail when
// its wave halted the delivery, warn while a halted delivery holds it back
// (or its wave has not started), pass while its own wave rolls. The description names the workload's own wave, not the
// gate's progress or the wave in progress, so a delivery of a thousand
// workloads rewrites each Report when that workload's place changes, not
// at every step of the others.
func DeliveryResult(p delivery.Position) openreports.ReportResult {
	res := openreports.ReportResult{
		Policy: Policy, Rule: ConfigDelivery, Category: "Config delivery", Result: "pass",
		Properties: map[string]string{"delivery": p.Record, "config": p.Config, "wave": p.Wave},
	}
	where := fmt.Sprintf("%s: ConfigDelivery %s, wave %s (%d of %d)", p.Config, p.Record, p.Wave, p.Index+1, p.Waves)
	// Hot config's waves are groups of pods, not whole workloads.
	workload, has, keeps, back := "the workload", "has the delivered revision", "keeps its revision", "went back to its previous revision"
	if p.Hot {
		workload, has, keeps, back = "the workload's pods in this wave", "have the delivered content", "keep the content they have", "got the content they had back"
	}
	switch {
	case p.Started && p.State == v1alpha1.DeliveryHalted && p.Wave == p.CurrentWave:
		res.Result, res.Severity = "fail", "medium"
		res.Description = where + ": the delivery halted in this wave"
		if p.RolledBack {
			res.Description += "; " + workload + " " + back
		}
		// Why: a failed check's query, value and threshold, or the
		// gate's reason, as the record says it.
		res.Description += ". " + p.Message
		for _, c := range p.Checks {
			res.Properties["check/"+c.Name] = fmt.Sprintf("%s: %s (%d measured, %d failed)", c.Result, c.Message, c.Measurements, c.Failures)
		}
	case p.Started:
		res.Description = where + ": " + workload + " " + has + "; its wave is being judged"
	case p.State == v1alpha1.DeliveryHalted:
		res.Result, res.Severity = "warn", "low"
		res.Description = fmt.Sprintf("%s: %s %s; the delivery halted at wave %s", where, workload, keeps, p.CurrentWave)
	default:
		// Not the wave in progress: a held workload's result changes when
		// its own wave starts, not with every wave before it.
		res.Result, res.Severity = "warn", "low"
		res.Description = where + ": " + workload + " " + keeps + " until this wave starts"
	}
	return res
}
