package controller

import (
	"context"
	"fmt"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/workload"
)

// The drift controller answers "which pods run which config": for every
// stamped top-level workload it compares the hash its config gives now
// with the hash its pods started with, per namespace, and publishes the
// result as gauges and, where the OpenReports CRD is served, as one Report
// per workload. It writes nothing else and rolls nothing; the rollout
// controller does that.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=openreports.io,resources=reports,verbs=get;list;watch;create;update;delete

var (
	staleWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configward_stale_workloads",
		Help: "Stamped workloads with at least one running pod that started with config other than what its ConfigMaps and Secrets give now, by namespace.",
	}, []string{"namespace"})
	stalePods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configward_stale_pods",
		Help: "Running pods of stamped workloads that started with config other than what their ConfigMaps and Secrets give now, by namespace.",
	}, []string{"namespace"})
)

func init() { metrics.Registry.MustRegister(staleWorkloads, stalePods) }

// driftDelay coalesces the events of one namespace (a rollout is dozens of
// pod updates) into one judgement.
const driftDelay = 500 * time.Millisecond

// DriftOptions configure the drift controller.
type DriftOptions struct {
	Keys     *hashkey.Source
	Settings func(ctx context.Context, namespace string) (enabled, includeSecrets bool, err error)
	// Changes is the rollout controller's log of which config changed.
	Changes *drift.Changes
	// Reports turns on writing OpenReports Reports; the caller has checked
	// that their CRD is served and registered their informer.
	Reports bool
}

// SetupDrift registers the drift controller, which reconciles namespaces.
func SetupDrift(mgr ctrl.Manager, inv *inventory.Inventory, opts DriftOptions) error {
	d := &driftJudge{client: mgr.GetClient(), inv: inv, opts: opts, kinds: inventory.RolloutKinds()}
	b := ctrl.NewControllerManagedBy(mgr).Named("drift")
	watched := []client.Object{&corev1.Pod{}, &corev1.ConfigMap{}, &corev1.Secret{}}
	for _, k := range d.kinds {
		obj, _ := workload.New(k.Kind)
		watched = append(watched, obj)
	}
	if opts.Reports {
		// A Report edited or deleted by hand is put back.
		watched = append(watched, &openreports.Report{})
	}
	for _, obj := range watched {
		b = b.Watches(obj, namespaceOf())
	}
	return b.Complete(d)
}

// namespaceOf enqueues the namespace of whatever changed, a little later,
// so that the events of one rollout give one judgement.
func namespaceOf() handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}, driftDelay)
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

type driftJudge struct {
	client client.Client
	inv    *inventory.Inventory
	opts   DriftOptions
	kinds  []workload.Kind
}

func (d *driftJudge) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	var reports map[string]*openreports.Report
	if d.opts.Reports {
		var err error
		if reports, err = d.storedReports(ctx, ns); err != nil {
			return reconcile.Result{}, err
		}
	}
	statuses, err := d.judge(ctx, ns, reports)
	if err != nil {
		return reconcile.Result{}, err
	}
	publishGauges(ns, statuses)
	if d.opts.Reports {
		return reconcile.Result{}, d.writeReports(ctx, ns, statuses, reports)
	}
	return reconcile.Result{}, nil
}

// judge computes the drift of every stamped top-level workload of ns.
func (d *driftJudge) judge(ctx context.Context, ns string, reports map[string]*openreports.Report) ([]drift.Status, error) {
	byWorkload, err := d.podsByWorkload(ctx, ns)
	if err != nil {
		return nil, err
	}
	enabled, includeSecrets := true, true
	if d.opts.Settings != nil {
		if enabled, includeSecrets, err = d.opts.Settings(ctx, ns); err != nil {
			return nil, err
		}
	}
	key := d.opts.Keys.Current().Bytes()
	var out []drift.Status
	seen := map[drift.Key]bool{}
	for _, k := range d.kinds {
		list, _ := workload.NewList(k.Kind)
		if err := d.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.Resource, err)
		}
		for _, obj := range workload.Items(list) {
			template, stamped := workload.TemplateAnnotation(obj, v1alpha1.ConfigHashAnnotation)
			if !stamped || workload.Controlled(obj) || obj.GetDeletionTimestamp() != nil {
				continue
			}
			spec, _ := workload.PodSpec(obj)
			wanted, counted, err := d.inv.TemplateHash(ctx, key, ns, spec, includeSecrets)
			if err != nil {
				return nil, err
			}
			if counted == 0 {
				// It consumes no config configward counts any more: nothing
				// to be stale against.
				wanted = template
			}
			s := drift.Judge(drift.Workload{
				APIVersion: k.GroupVersionKind().GroupVersion().String(), Kind: k.Kind,
				Namespace: ns, Name: obj.GetName(), UID: obj.GetUID(),
				Template: template, Wanted: wanted,
				TemplateHold: drift.TemplateHoldOf(k.Kind, obj, enabled),
				PodHold:      drift.PodHoldOf(k.Kind, obj),
			}, drift.CountPods(wanted, byWorkload[obj.GetUID()]))
			dk := drift.Key{Group: k.Group, Kind: k.Kind, NamespacedName: client.ObjectKeyFromObject(obj)}
			seen[dk] = true
			s.Changed, s.ChangedAt = d.opts.Changes.Last(dk)
			if len(s.Changed) == 0 {
				s.Changed, s.ChangedAt = report.LastChange(reports[report.Name(obj.GetUID())], wanted)
			}
			out = append(out, s)
		}
	}
	d.opts.Changes.Retain(ns, func(k drift.Key) bool { return seen[k] })
	return out, nil
}

// podsByWorkload counts the running pods of ns by top-level workload and
// config hash.
func (d *driftJudge) podsByWorkload(ctx context.Context, ns string) (map[types.UID]map[string]int, error) {
	var pods corev1.PodList
	if err := d.client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var rss appsv1.ReplicaSetList
	if err := d.client.List(ctx, &rss, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing replicasets: %w", err)
	}
	var jobs batchv1.JobList
	if err := d.client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return drift.PodsOfCluster(pods.Items, rss.Items, jobs.Items), nil
}

// publishGauges sets the namespace's series, and removes them when it has
// no stamped workload left, so deleted namespaces leave no series behind.
func publishGauges(ns string, statuses []drift.Status) {
	if len(statuses) == 0 {
		staleWorkloads.DeleteLabelValues(ns)
		stalePods.DeleteLabelValues(ns)
		return
	}
	workloads, pods := 0, 0
	for _, s := range statuses {
		if s.Stale() {
			workloads++
		}
		pods += s.Pods.Stale
	}
	staleWorkloads.WithLabelValues(ns).Set(float64(workloads))
	stalePods.WithLabelValues(ns).Set(float64(pods))
}

// storedReports lists configward's Reports in ns, by name.
func (d *driftJudge) storedReports(ctx context.Context, ns string) (map[string]*openreports.Report, error) {
	var list openreports.ReportList
	if err := d.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{report.ManagedByLabel: report.Source}); err != nil {
		return nil, fmt.Errorf("listing reports: %w", err)
	}
	out := make(map[string]*openreports.Report, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// writeReports makes the stored Reports of ns say what statuses say,
// writing only those that differ, and deletes the Reports of workloads
// that are no longer stamped.
func (d *driftJudge) writeReports(ctx context.Context, ns string, statuses []drift.Status, stored map[string]*openreports.Report) error {
	now := time.Now()
	wanted := map[string]bool{}
	for _, s := range statuses {
		name := report.Name(s.UID)
		wanted[name] = true
		prev := stored[name]
		want := report.ForWorkload(s, prev, now)
		switch {
		case prev == nil:
			if err := d.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating report %s/%s: %w", ns, name, err)
			}
		case report.Differs(prev, want):
			want.ResourceVersion = prev.ResourceVersion
			if err := d.client.Update(ctx, want); err != nil {
				return fmt.Errorf("updating report %s/%s: %w", ns, name, err)
			}
		}
	}
	for name, r := range stored {
		if !wanted[name] {
			if err := d.client.Delete(ctx, r, client.Preconditions{UID: &r.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting report %s/%s: %w", ns, name, err)
			}
		}
	}
	return nil
}
