// Package status gathers, with a user's own credentials, which pods of
// which workloads run which config: `configward status`. It reads the
// controller's Reports for what only the controller knows (the hash the
// config gives now, which takes the installation's key and Secrets to
// compute; why a template is held; what changed and when) and counts pods
// live, so the counts are never behind. It never reads a Secret, and it
// prints nothing of a pod spec.
package status

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/workload"
)

// Options say which workloads to show.
type Options struct {
	// Namespace to look in; empty means every namespace.
	Namespace string
	// Kind and Name, when set, pick one workload.
	Kind workload.Kind
	Name string
	// Registry holds the workload kinds to look at: its rolled kinds, the
	// built-in ones and those declared with --workload-kinds.
	Registry *workload.Registry
}

// Item is one workload's drift as `configward status` shows it.
type Item struct {
	APIVersion   string     `json:"apiVersion"`
	Kind         string     `json:"kind"`
	Namespace    string     `json:"namespace"`
	Name         string     `json:"name"`
	WantedHash   string     `json:"wantedHash"`
	TemplateHash string     `json:"templateHash"`
	Pods         drift.Pods `json:"pods"`
	State        string     `json:"state"`
	Reason       string     `json:"reason,omitempty"`
	Message      string     `json:"message"`
	Changed      []string   `json:"changed,omitempty"`
	ChangedAt    *time.Time `json:"changedAt,omitempty"`
	// FromReport says whether the controller's Report supplied the wanted
	// hash; without it the template's hash stands in.
	FromReport bool `json:"fromReport"`
	// Revisions are the workload's revisions (its ReplicaSets or
	// ControllerRevisions), newest first, when one workload is asked for.
	Revisions []Revision `json:"revisions,omitempty"`
	// Deliveries say, for each open config delivery that holds or moves
	// the workload, its wave and what that wave waits for.
	Deliveries []string `json:"deliveries,omitempty"`
	// Unpinned says why the revision it runs is not pinned to snapshots of
	// its config, where revisions are on and snapshots cannot be written.
	Unpinned string `json:"unpinned,omitempty"`
	// Reloads say, for each hot ConfigMap and Secret the workload mounts,
	// where its running pods stand with the current content, as their
	// reload agents report it. A workload whose config is all hot carries
	// no config hash: its State is HotOnly.
	Reloads []Reload `json:"reloads,omitempty"`
	// Certificates say where the pods stand with the certificates they
	// serve, where their reload agents check ports
	// (configward.dev/serving-cert); nil otherwise.
	Certificates *reload.CertTally `json:"certificates,omitempty"`
}

// HotOnly is the State of a workload whose config is all reloaded in
// place: nothing rolls it, and only its Reloads say what its pods run.
const HotOnly = "hot-only"

// NotReported is the State of a workload that carries no config hash, whose
// pods run the reload agent, and of which configward's controller has
// written no Report yet (it was just created): status --wait waits for it.
const NotReported = "not-reported"

// Reload is where a workload's pods stand with one hot config.
type Reload struct {
	// Config is "Kind/name".
	Config string `json:"config"`
	reload.Tally
}

// Revision is one revision of a workload: its config hash, the config
// snapshots its pods read (where revisions are on), and how many running
// pods run it.
type Revision struct {
	Revision  string    `json:"revision"`
	Hash      string    `json:"hash"`
	Snapshots string    `json:"snapshots,omitempty"`
	Created   time.Time `json:"created"`
	Pods      int       `json:"pods"`
}

// Result is what `configward status -o json|yaml` prints.
type Result struct {
	Kind  string `json:"kind"`
	Items []Item `json:"items"`
	// Sets are the ConfigSets, when no one workload is asked for.
	Sets  []Set    `json:"sets,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Stale reports whether any workload runs a pod on stale config: one that
// started with other config than its ConfigMaps and Secrets give now, or
// whose agent reports other hot content than the current one, or whose
// program rejected it.
func (r Result) Stale() bool {
	return slices.ContainsFunc(r.Items, func(i Item) bool {
		return i.Pods.Stale > 0 || slices.ContainsFunc(i.Reloads, func(h Reload) bool { return h.Stale() > 0 })
	})
}

// Rejected reports whether a program rejected the current content of a
// hot config, in any pod.
func (r Result) Rejected() bool {
	return slices.ContainsFunc(r.Items, func(i Item) bool {
		return slices.ContainsFunc(i.Reloads, func(h Reload) bool { return h.Pods[reload.StateRejected] > 0 })
	})
}

// Settled reports whether every pod runs the current config and every pod
// with a reload agent has said it has the current hot content: what
// status --wait waits for.
func (r Result) Settled() bool {
	return !r.Stale() && !slices.ContainsFunc(r.Items, func(i Item) bool {
		return i.State == NotReported || slices.ContainsFunc(i.Reloads, func(h Reload) bool { return !h.Done() })
	})
}

// templateHolds are the holds a Report can name that the live object
// cannot show (a ConfigPolicy's) or that it shows the same way.
var templateHolds = map[string]drift.Hold{
	drift.OptedOut.Reason: drift.OptedOut, drift.PolicyDisabled.Reason: drift.PolicyDisabled, drift.JobImmutable.Reason: drift.JobImmutable,
	drift.Flapping.Reason:       drift.Flapping,
	drift.RolledBackHold.Reason: drift.RolledBackHold,
	drift.ConfigMissing.Reason:  drift.ConfigMissing,
}

// Gather reads the cluster and judges every stamped top-level workload.
func Gather(ctx context.Context, c client.Reader, o Options) (Result, error) {
	res := Result{Kind: "ConfigStatus", Items: []Item{}}
	in := []client.ListOption{}
	if o.Namespace != "" {
		in = append(in, client.InNamespace(o.Namespace))
	}
	reports, note, err := readReports(ctx, c, in)
	if err != nil {
		return res, err
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	byWorkload, live, err := countPods(ctx, c, in)
	if err != nil {
		return res, err
	}
	// reportsNote stays what readReports said: a workload compared without
	// its Report is noted below only where Reports could be read.
	reportsNote := note
	waves, note, err := deliveriesOf(ctx, c, in)
	if err != nil {
		return res, err
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	if o.Name == "" {
		if res.Sets, note, err = setsOf(ctx, c, in); err != nil {
			return res, err
		}
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
	}
	found, behind := false, 0
	for _, k := range o.Registry.RolledKinds() {
		if o.Name != "" && k != o.Kind {
			continue
		}
		t, _ := o.Registry.Type(k.GroupKind())
		list := t.NewList()
		err := c.List(ctx, list, in...)
		if meta.IsNoMatchError(err) {
			// A declared kind whose CRD this cluster does not serve.
			res.Notes = append(res.Notes, fmt.Sprintf("the cluster does not serve %s: skipped", k.GroupVersionKind()))
			continue
		}
		if err != nil {
			return res, fmt.Errorf("listing %s: %w", k.Resource, err)
		}
		for _, obj := range workload.Items(list) {
			if o.Name != "" && obj.GetName() != o.Name {
				continue
			}
			found = true
			wl := t.Wrap(obj)
			template, stamped := wl.ConfigHash()
			if wl.Controlled() || obj.GetDeletionTimestamp() != nil {
				continue
			}
			reloads := reloadsOf(reports[obj.GetUID()], live[obj.GetUID()])
			var certs *reload.CertTally
			if c := reload.CountCerts(live[obj.GetUID()]); c.Checked() > 0 {
				certs = &c
			}
			if !stamped {
				if len(reloads) == 0 && certs == nil && reports[obj.GetUID()] == nil && slices.ContainsFunc(live[obj.GetUID()], reload.HasAgent) {
					// Its pods run the agent, and the controller has not
					// written its Report yet: nothing says what they applied.
					res.Items = append(res.Items, Item{APIVersion: k.GroupVersionKind().GroupVersion().String(), Kind: k.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
						State: NotReported, Message: "its pods run the reload agent, and configward's controller has not reported on them yet"})
					continue
				}
				if len(reloads) > 0 || certs != nil {
					res.Items = append(res.Items, Item{APIVersion: k.GroupVersionKind().GroupVersion().String(), Kind: k.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
						State: HotOnly, Message: "its config is all reloaded in place: see its reloads", FromReport: true, Reloads: reloads, Certificates: certs,
						Deliveries: waves[obj.GetNamespace()+"/"+t.RecordKind()+"/"+obj.GetName()]})
				}
				continue
			}
			w := drift.Workload{
				APIVersion: k.GroupVersionKind().GroupVersion().String(), Kind: k.Kind,
				Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
				Template: template, Wanted: template,
				TemplateHold: heldByObject(wl),
				PodHold:      drift.PodHoldOf(wl),
			}
			r := report.StoredConfigCurrent(reports[obj.GetUID()])
			// A Report written for another template is behind: the live
			// template is the better guess at what the config gives.
			fromReport := r != nil && r.Properties[report.PropTemplate] == template
			if fromReport {
				w.Wanted = r.Properties[report.PropWanted]
				if h, ok := templateHolds[r.Properties[report.PropReason]]; ok {
					w.TemplateHold = h
				}
			} else {
				behind++
			}
			s := drift.StatusOf(w, drift.CountPods(w.Wanted, byWorkload[obj.GetUID()]))
			if fromReport {
				s.Changed, s.ChangedAt = report.LastChange(reports[obj.GetUID()], w.Wanted)
			}
			it := itemOf(s, fromReport)
			if r != nil {
				it.Unpinned = r.Properties[report.PropUnpinned]
			}
			it.Reloads, it.Certificates = reloads, certs
			it.Deliveries = waves[obj.GetNamespace()+"/"+t.RecordKind()+"/"+obj.GetName()]
			if o.Name != "" {
				if it.Revisions, err = revisionsOf(ctx, c, obj, byWorkload[obj.GetUID()]); err != nil {
					return res, err
				}
			}
			res.Items = append(res.Items, it)
		}
	}
	if o.Name != "" && !found {
		return res, fmt.Errorf("%s %q not found in namespace %q", o.Kind.Kind, o.Name, o.Namespace)
	}
	if behind > 0 && reportsNote == "" {
		res.Notes = append(res.Notes, fmt.Sprintf("%d workload(s) have no up-to-date Report from configward's controller: they are compared with their pod template's hash, so a config change not yet stamped does not show", behind))
	}
	slices.SortFunc(res.Items, func(a, b Item) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return res, nil
}

// heldByObject is the hold the workload itself shows (opted out, a Job):
// what a ConfigPolicy holds only the Report can tell.
func heldByObject(w workload.Object) drift.Hold {
	h, _ := stamp.Held(w, nil)
	return h
}

func itemOf(s drift.Status, fromReport bool) Item {
	it := Item{
		APIVersion: s.APIVersion, Kind: s.Kind, Namespace: s.Namespace, Name: s.Name,
		WantedHash: s.Wanted, TemplateHash: s.Template, Pods: s.Pods,
		State: string(s.State), Reason: s.Hold.Reason, Message: report.Message(s),
		Changed: s.Changed, FromReport: fromReport,
	}
	if !s.ChangedAt.IsZero() {
		at := s.ChangedAt
		it.ChangedAt = &at
	}
	return it
}

// readReports lists configward's Reports by their workload's UID. Without
// the CRD, or without the right to read Reports, status still works, less
// well, and says so.
func readReports(ctx context.Context, c client.Reader, in []client.ListOption) (map[types.UID]*openreports.Report, string, error) {
	const less = "each workload is compared with its pod template's hash, so a config change not yet stamped, and workloads configward does not roll, do not show"
	var list openreports.ReportList
	if read, note, err := listOptional(ctx, c, &list, append(slices.Clip(in), client.MatchingLabels{report.ManagedByLabel: report.Source}), "reports.openreports.io",
		"the cluster serves no OpenReports Reports (openreports.io/v1alpha1): "+less, less); !read {
		return nil, note, err
	}
	out := make(map[types.UID]*openreports.Report, len(list.Items))
	for i := range list.Items {
		if s := list.Items[i].Scope; s != nil && s.UID != "" {
			out[s.UID] = &list.Items[i]
		}
	}
	return out, "", nil
}

// countPods counts running pods by top-level workload and hash, as the
// controller does, and returns them by workload too.
func countPods(ctx context.Context, c client.Reader, in []client.ListOption) (map[types.UID]map[string]int, map[types.UID][]*corev1.Pod, error) {
	pods, rss, jobs, err := drift.PodsAndOwners(ctx, c, in...)
	if err != nil {
		return nil, nil, err
	}
	return drift.PodsOfCluster(pods, rss, jobs), drift.LivePods(pods, drift.OwnersOf(rss, jobs)), nil
}

// reloadsOf judges pods, live, on each hot config the workload's Report
// names, against the content the controller says is current: the content
// takes the installation's key to name, the pods' states do not.
func reloadsOf(r *openreports.Report, pods []*corev1.Pod) []Reload {
	var out []Reload
	for _, h := range report.StoredReloads(r) {
		out = append(out, Reload{Config: h.Config, Tally: reload.Count(pods, h.Config, h.Content)})
	}
	return out
}

// joinChanged prints the changed objects in a table cell.
func joinChanged(changed []string) string {
	if len(changed) == 0 {
		return "-"
	}
	return strings.Join(changed, ",")
}

// revisionsOf lists the revisions a workload's own controller keeps (a
// Deployment's ReplicaSets, a StatefulSet's or DaemonSet's
// ControllerRevisions), newest first, with the pods running each.
func revisionsOf(ctx context.Context, c client.Reader, obj client.Object, pods map[string]int) ([]Revision, error) {
	var out []Revision
	owned := func(o metav1.Object) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.UID == obj.GetUID()
	}
	var rss appsv1.ReplicaSetList
	if err := c.List(ctx, &rss, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil, fmt.Errorf("listing replicasets: %w", err)
	}
	for i := range rss.Items {
		rs := &rss.Items[i]
		if owned(rs) {
			a := rs.Spec.Template.Annotations
			out = append(out, Revision{Revision: rs.Annotations["deployment.kubernetes.io/revision"], Hash: a[v1alpha1.ConfigHashAnnotation],
				Snapshots: a[v1alpha1.ConfigSnapshotsAnnotation], Created: rs.CreationTimestamp.Time, Pods: pods[a[v1alpha1.ConfigHashAnnotation]]})
		}
	}
	var crs appsv1.ControllerRevisionList
	err := c.List(ctx, &crs, client.InNamespace(obj.GetNamespace()))
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing controllerrevisions: %w", err)
	}
	for i := range crs.Items {
		cr := &crs.Items[i]
		if owned(cr) {
			a := inventory.RevisionAnnotations(cr)
			out = append(out, Revision{Revision: fmt.Sprint(cr.Revision), Hash: a[v1alpha1.ConfigHashAnnotation],
				Snapshots: a[v1alpha1.ConfigSnapshotsAnnotation], Created: cr.CreationTimestamp.Time, Pods: pods[a[v1alpha1.ConfigHashAnnotation]]})
		}
	}
	slices.SortFunc(out, func(a, b Revision) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// Waiting says, in a line, what keeps res from being settled.
func Waiting(res Result) string {
	var parts []string
	for _, it := range res.Items {
		name := it.Namespace + "/" + it.Kind + "/" + it.Name
		if it.Pods.Stale > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d pod(s) on old config", name, it.Pods.Stale))
		}
		for _, h := range it.Reloads {
			if n := h.Pods[reload.StateOlder] + h.Pods[reload.StatePending]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s: %d pod(s) not reporting the current %s yet", name, n, h.Config))
			}
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}
