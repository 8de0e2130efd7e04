package reports

import (
	"context"
	"fmt"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/workload"
)

// deliveryResults are the config-delivery results of the workloads of ns
// that open deliveries hold or move, by the workload's status.
func (d *driftController) deliveryResults(ctx context.Context, ns string, statuses []drift.Status) (map[int][]openreports.ReportResult, error) {
	var list v1alpha1.ConfigDeliveryList
	if err := d.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing configdeliveries: %w", err)
	}
	return heldResults(delivery.Positions(list.Items), statuses), nil
}

// heldResults are deliveryResults' results from where open deliveries
// stand (positions), decided without I/O so that they are tested without
// a cluster.
func heldResults(positions map[string][]delivery.Position, statuses []drift.Status) map[int][]openreports.ReportResult {
	if len(positions) == 0 {
		return nil
	}
	out := map[int][]openreports.ReportResult{}
	for i, s := range statuses {
		gv, _ := schema.ParseGroupVersion(s.APIVersion)
		for _, p := range positions[workload.RecordKindOf(gv.Group, s.Kind)+"/"+s.Name] {
			// A workload the delivery holds while it goes well gets its
			// result when its wave starts: a result for every held
			// workload at placement would rewrite a thousand Reports at
			// once, on the API server the canary's gate is judged through.
			if p.Started || p.State == v1alpha1.DeliveryHalted {
				out[i] = append(out[i], report.DeliveryResult(p))
			}
		}
	}
	return out
}
