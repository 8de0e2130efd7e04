// Package reports is the drift controller. It answers "which pods run
// which config", per namespace: for every stamped top-level workload it
// compares the stamp its config gives now (stamp.Decide) with the hash its
// pods started with, and publishes the result as gauges and, where the
// OpenReports CRD is served, in one Report per object, with what the rules
// find on existing workloads and the schemas on stored ConfigMaps
// (findings.go) and where open deliveries hold each workload. It writes
// nothing else and rolls nothing; the rollout controller does that.
package reports

import (
	"context"
	"fmt"
	"slices"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/controller"
	"github.com/configward/configward/internal/csiversions"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

// The drift controller answers "which pods run which config": for every
// stamped top-level workload it compares the hash its config gives now
// with the hash its pods started with, per namespace, and publishes the
// result as gauges and, where the OpenReports CRD is served, in one Report
// per object, with what the rules find on existing workloads and the
// schemas on stored ConfigMaps (findings.go). It writes nothing else and
// rolls nothing; the rollout controller does that.
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

// driftWorkers is how many namespaces are judged at once.
const driftWorkers = 4

// Options configure the drift controller.
type Options struct {
	Keys *hashkey.Source
	// Causes is the rollout controller's log of which config changed.
	Causes *drift.Causes
	// Reports turns on writing OpenReports Reports; the caller has checked
	// that their CRD is served and registered their informer.
	Reports bool
	// Policies give each namespace's rollout settings and the rules whose
	// findings on existing workloads the Reports carry.
	Policies *configpolicy.Store
	// Records are the delivery records, which say which consumers a
	// delivery keeps on their revision.
	Records *deliveryrecords.Reader
	// Flapping tells the config whose changes hold its consumers' rollouts.
	Flapping *flapping.Tracker
	// Certs judge what pods serve (configward.dev/serving-cert).
	Certs report.CertSettings
}

// Setup registers the drift controller, which reconciles namespaces.
func Setup(mgr ctrl.Manager, inv *inventory.Inventory, opts Options) error {
	d := &driftController{client: mgr.GetClient(), inv: inv, opts: opts}
	for _, k := range inv.WatchedKinds() {
		if t, _ := inv.Registry().Type(k.GroupKind()); t.Rolled() {
			d.types = append(d.types, t) // built-in and declared custom kinds
		}
	}
	// Namespaces are judged side by side: a change of the policies that
	// reaches a namespace of thousands of workloads evaluates every rule on
	// each of them again (seconds), and must not hold up the judgement of
	// every other namespace behind it. One namespace is never judged twice
	// at once (the work queue).
	b := ctrl.NewControllerManagedBy(mgr).Named("drift").WithOptions(crcontroller.Options{MaxConcurrentReconciles: driftWorkers})
	watched := []client.Object{&corev1.Pod{}, &appsv1.ReplicaSet{}, &batchv1.Job{}, &v1alpha1.ConfigDelivery{}}
	if inv.CSIClasses() {
		// A rotation the driver reports is drift before any rollout.
		watched = append(watched, csiversions.PodStatusObject())
	}
	for _, t := range d.types {
		watched = append(watched, t.New())
	}
	var configChanged func(namespace string)
	if opts.Reports {
		informer, err := mgr.GetCache().GetInformer(context.Background(), &v1alpha1.ConfigSchema{})
		if err != nil {
			return fmt.Errorf("starting the ConfigSchema informer: %w", err)
		}
		schemas := configschema.New(mgr.GetCache())
		if _, err := schemas.Watch(informer); err != nil {
			return err
		}
		d.findings = newFindingsEvaluator(mgr.GetCache(), mgr.GetAPIReader(), inv, opts.Policies, schemas)
		configChanged = d.findings.changed
		// A Report edited or deleted by hand is put back; a schema change
		// judges its ConfigMaps again.
		watched = append(watched, &openreports.Report{}, &v1alpha1.ConfigSchema{})
		policiesChanged := make(chan event.GenericEvent, 1)
		opts.Policies.OnChange(func() {
			select {
			case policiesChanged <- event.GenericEvent{Object: &corev1.Namespace{}}:
			default: // one pending re-evaluation covers every change before it
			}
		})
		b = b.WatchesRawSource(source.Channel(policiesChanged, handler.EnqueueRequestsFromMapFunc(d.everyNamespace))).
			// Labels select ConfigPolicies, which set the rules' actions.
			Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				d.findings.changed(o.GetName())
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
			}))
	}
	for _, obj := range watched {
		b = b.Watches(obj, controller.NamespaceOf(nil))
	}
	for _, obj := range inv.ConfigKinds() {
		b = b.Watches(obj, controller.NamespaceOf(configChanged))
	}
	return b.Complete(d)
}

// everyNamespace enqueues every namespace, when the rules in force change.
func (d *driftController) everyNamespace(ctx context.Context, _ client.Object) []reconcile.Request {
	return controller.EveryNamespace(ctx, d.client, "to judge them again after the ConfigPolicies in force changed")
}

type driftController struct {
	client client.Client
	inv    *inventory.Inventory
	opts   Options
	// types are the rolled kinds: every top-level workload has one.
	types []*workload.Type
	// findings evaluates rules and schemas on existing objects, for the
	// Reports; nil when Reports are off.
	findings *findingsEvaluator
	// served are the served-certificate series published.
	served servedSeries
}

func (d *driftController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	var reports map[string]*openreports.Report
	if d.opts.Reports {
		var err error
		if reports, err = d.storedReports(ctx, ns); err != nil {
			return reconcile.Result{}, err
		}
	}
	pods, rss, jobs, err := drift.PodsAndOwners(ctx, d.client, client.InNamespace(ns))
	if err != nil {
		return reconcile.Result{}, err
	}
	statuses, objs, err := d.statuses(ctx, ns, drift.PodsOfCluster(pods, rss, jobs), reports)
	if err != nil {
		return reconcile.Result{}, err
	}
	publishGauges(ns, statuses)
	livePods := drift.LivePods(pods, drift.OwnersOf(rss, jobs))
	reloads, err := d.reloads(ctx, ns, objs, livePods)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := time.Now()
	served, changes := d.servedCerts(ns, objs, livePods, now)
	// A verdict that changes by time alone (a stale certificate's grace
	// ends, a presented one nears its end) is judged again then.
	var again reconcile.Result
	if !changes.IsZero() {
		again.RequeueAfter = changes.Sub(now) + time.Second
	}
	if !d.opts.Reports {
		return again, nil
	}
	results, err := d.findings.namespace(ctx, ns, objs)
	if err != nil {
		return reconcile.Result{}, err
	}
	delivered, err := d.deliveryResults(ctx, ns, statuses)
	if err != nil {
		return reconcile.Result{}, err
	}
	for i, s := range statuses {
		uid := s.UID
		results[uid] = append(results[uid], subjectResults{subject: report.Subject(s.APIVersion, s.Kind, ns, s.Name, uid),
			results: append([]openreports.ReportResult{report.ConfigCurrentResult(s)}, delivered[i]...)})
	}
	for _, r := range append(reloads, served...) {
		results[r.subject.UID] = append(results[r.subject.UID], r)
	}
	return again, d.writeReports(ctx, ns, results, reports)
}

// subjectResults are results about one object.
type subjectResults struct {
	subject corev1.ObjectReference
	results []openreports.ReportResult
}

// judge computes the drift of every stamped top-level workload of ns, and
// returns every top-level workload too, for the rules.
func (d *driftController) statuses(ctx context.Context, ns string, byWorkload map[types.UID]map[string]int, reports map[string]*openreports.Report) ([]drift.Status, []workload.Object, error) {
	settings, err := d.opts.Policies.For(ctx, d.client, ns)
	if err != nil {
		return nil, nil, err
	}
	csi := csiversions.Look{Client: d.client, Inventory: d.inv, Key: d.opts.Keys.Current()}
	key := csi.Key.Bytes()
	var out []drift.Status
	var objs []workload.Object
	seen := map[drift.Key]bool{}
	for _, t := range d.types {
		k := t.Kind
		list := t.NewList()
		if err := d.client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("listing %s: %w", k.Resource, err)
		}
		for _, obj := range workload.Items(list) {
			w := t.Wrap(obj)
			if w.Controlled() || obj.GetDeletionTimestamp() != nil {
				continue
			}
			objs = append(objs, w)
			dk := drift.Key{Group: k.Group, Kind: k.Kind, NamespacedName: client.ObjectKeyFromObject(obj)}
			// Unstamped workloads too: the rollout controller may be about
			// to stamp one for a change it logged.
			seen[dk] = true
			template, stamped := w.ConfigHash()
			if !stamped {
				continue
			}
			// A template that is no pod spec reads as empty: it counts no
			// config, so it is never stale (its Report says why it cannot
			// be judged).
			spec, _ := w.PodSpec()
			var versions csiversions.Versions
			if csiversions.Mounts(w, spec) {
				// Judged on what the pods report now, not on the record
				// alone: a rotation the rollout controller has not rolled
				// (paced, or the workload opts out) is drift.
				if versions, err = csi.Versions(ctx, w, spec, settings.Secrets); err != nil {
					return nil, nil, err
				}
			}
			carried := w.Stamp()
			facts, err := stamp.Sources{Inventory: d.inv, Records: d.opts.Records}.Gather(ctx, stamp.Subject{Workload: w, Spec: spec,
				Policy: settings, Key: key, Versions: carried.SecretVersions, Rolled: versions.Rolled, Stored: &carried})
			if err != nil {
				return nil, nil, err
			}
			_, _, isFlapping := d.opts.Flapping.Input(settings.Flapping, ns, spec, d.inv.Rolls(ctx, ns))
			decided := stamp.Decide(stamp.Input{Workload: w, Facts: facts, Look: stamp.Look{Changed: true, Flapping: isFlapping}})
			// A consumer a delivery has not reached is judged against the
			// revision the delivery keeps it on, one whose pods report
			// rotated secret versions against the rotation, and a
			// rolled-back one against the revision configward keeps.
			wanted, templateHold := decided.Want.Hash, decided.Hold
			s := drift.StatusOf(drift.Workload{
				APIVersion: k.GroupVersionKind().GroupVersion().String(), Kind: k.Kind,
				Namespace: ns, Name: obj.GetName(), UID: obj.GetUID(),
				Template: template, Wanted: wanted,
				TemplateHold: templateHold,
				PodHold:      drift.PodHoldOf(w),
			}, drift.CountPods(wanted, byWorkload[obj.GetUID()]))
			s.Unpinned = facts.UnpinnedBecause(carried)
			s.Changed, s.ChangedAt = d.opts.Causes.Last(dk)
			s.Changed, s.ChangedAt = lastChange(s.Changed, s.ChangedAt, reports[report.Name(obj.GetUID())], wanted, csiversions.Causes(versions.Rotated), time.Now())
			out = append(out, s)
		}
	}
	d.opts.Causes.Retain(ns, func(k drift.Key) bool { return seen[k] })
	return out, objs, nil
}

// lastChange is what a workload's Report names as its last config change:
// what the rollout controller logged, else what the stored Report says for
// the hash wanted now (a restarted controller logged nothing), unless
// either misses a rotation of CSI secrets the pods report (rotated): then
// the rotation, first seen now. Its own function so that the choice is
// tested without a cluster.
func lastChange(logged []string, loggedAt time.Time, stored *openreports.Report, wanted string, rotated []string, now time.Time) ([]string, time.Time) {
	changed, at := logged, loggedAt
	if len(changed) == 0 || !names(changed, rotated) {
		changed, at = report.LastChange(stored, wanted)
	}
	if !names(changed, rotated) {
		// A rotation no rollout logged (the workload opts out): it is the
		// last change, first seen now.
		changed, at = rotated, now
	}
	return changed, at
}

// publishGauges sets the namespace's series, and removes them when it has
// no stamped workload left, so deleted namespaces leave no series behind.
func publishGauges(ns string, statuses []drift.Status) {
	if len(statuses) == 0 {
		staleWorkloads.DeleteLabelValues(ns)
		stalePods.DeleteLabelValues(ns)
		return
	}
	workloads, pods := staleCounts(statuses)
	staleWorkloads.WithLabelValues(ns).Set(float64(workloads))
	stalePods.WithLabelValues(ns).Set(float64(pods))
}

// staleCounts are the gauges' values: the workloads with a stale pod, and
// their stale pods. Its own function so that it is tested without a
// cluster.
func staleCounts(statuses []drift.Status) (workloads, pods int) {
	for _, s := range statuses {
		if s.Stale() {
			workloads++
		}
		pods += s.Pods.Stale
	}
	return workloads, pods
}

// storedReports lists configward's Reports in ns, by name.
func (d *driftController) storedReports(ctx context.Context, ns string) (map[string]*openreports.Report, error) {
	var list openreports.ReportList
	if err := d.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{report.ManagedByLabel: report.Source}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing reports: %w", err)
	}
	out := make(map[string]*openreports.Report, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// reportWriters bounds the Report writes of one namespace in flight: the
// first judgement of a namespace of thousands of workloads creates a Report
// each, and one at a time that took tens of seconds.
const reportWriters = 8

// writeReports makes the stored Reports of ns say what results say,
// one Report per object with results, writing only those that differ, and
// deletes the Reports of objects with nothing left to report.
func (d *driftController) writeReports(ctx context.Context, ns string, results map[types.UID][]subjectResults, stored map[string]*openreports.Report) error {
	creates, updates, deletes := reportWrites(results, stored, time.Now())
	// The group's context ends when Wait returns: only the writes use it.
	writes, writeCtx := errgroup.WithContext(ctx)
	writes.SetLimit(reportWriters)
	for _, want := range creates {
		writes.Go(func() error {
			if err := d.client.Create(writeCtx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating report %s/%s: %w", ns, want.Name, err)
			}
			return nil
		})
	}
	for _, want := range updates {
		writes.Go(func() error {
			if err := d.client.Update(writeCtx, want); err != nil {
				return fmt.Errorf("updating report %s/%s: %w", ns, want.Name, err)
			}
			return nil
		})
	}
	if err := writes.Wait(); err != nil {
		return err
	}
	for _, r := range deletes {
		if err := d.client.Delete(ctx, r, client.Preconditions{UID: &r.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting report %s/%s: %w", ns, r.Name, err)
		}
	}
	return nil
}

// reportWrites decides writeReports' writes without I/O (so that it is
// tested without a cluster): a Report to create for each object with
// results and none stored, one to update (at the stored resourceVersion)
// where the stored one says something else, and the stored Reports of
// objects with nothing left to report, to delete.
func reportWrites(results map[types.UID][]subjectResults, stored map[string]*openreports.Report, now time.Time) (creates, updates, deletes []*openreports.Report) {
	wanted := map[string]bool{}
	for uid, parts := range results {
		var all []openreports.ReportResult
		for _, p := range parts {
			all = append(all, p.results...)
		}
		if len(all) == 0 {
			continue
		}
		name := report.Name(uid)
		wanted[name] = true
		prev := stored[name]
		want := report.Build(parts[0].subject, all, prev, now)
		switch {
		case prev == nil:
			creates = append(creates, want)
		case report.Differs(prev, want):
			want.ResourceVersion = prev.ResourceVersion
			updates = append(updates, want)
		}
	}
	for name, r := range stored {
		if !wanted[name] {
			deletes = append(deletes, r)
		}
	}
	return creates, updates, deletes
}

// names says whether causes name every one of want.
func names(causes, want []string) bool {
	for _, w := range want {
		if !slices.Contains(causes, w) {
			return false
		}
	}
	return true
}
