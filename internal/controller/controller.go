// Package controller is configward's leader-elected controller process, one
// package per controller:
//
//   - rollouts: re-stamps the workloads whose config changed under them
//     (stamp.Decide), paced, batched, held where flapping config says so;
//   - reports: the drift controller, which judges which pods run which
//     config per namespace and publishes it as gauges and OpenReports
//     Reports, with the rules' findings on stored objects;
//   - deliveries: moves each ConfigDelivery on, wave by wave;
//   - revisions: writes the config snapshots revisions need and deletes
//     those nothing can read any more;
//   - policies: ConfigPolicy and ConfigSchema status, namespace labels, the
//     workload webhooks' matchConditions;
//   - changerecords: keeps the count of content changes that tells flapping
//     config, across restarts.
//
// This package holds only what they share to watch namespaces.
package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// namespaceDelay coalesces the events of one namespace (a rollout is dozens
// of pod updates) into one reconcile of it.
const namespaceDelay = 500 * time.Millisecond

// EveryNamespace is a request per namespace, for a change that concerns
// them all; why completes the log line when they cannot be listed.
func EveryNamespace(ctx context.Context, c client.Reader, why string) []reconcile.Request {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing namespaces "+why)
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, ns := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: ns.Name}}
	}
	return out
}

// NamespaceOf enqueues the namespace of whatever changed, a little later,
// so that the events of one rollout give one judgement. changed, if set,
// hears of the namespace first.
func NamespaceOf(changed func(namespace string)) handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if changed != nil {
			changed(o.GetNamespace())
		}
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}, namespaceDelay)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}
