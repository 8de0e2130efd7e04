package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

// How often an open delivery is looked at while its gate waits: workload
// status changes wake it sooner, pod restarts only with this.
const (
	gatePoll    = 2 * time.Second
	waitingPoll = 30 * time.Second
)

// advance moves an open delivery on by one step. Every step that lets
// workloads move is written to the record (with its resourceVersion, so a
// stale leader's write fails) before anything acts on it.
func (d *deliveries) advance(ctx context.Context, rec *v1alpha1.ConfigDelivery) (reconcile.Result, error) {
	if req := rec.Spec.Request; req != nil && req.ID != rec.Status.HandledRequest {
		return reconcile.Result{RequeueAfter: time.Millisecond}, d.handle(ctx, rec, *req)
	}
	switch rec.Status.State {
	case v1alpha1.DeliveryWaitingForApproval, v1alpha1.DeliveryHalted:
		return reconcile.Result{RequeueAfter: waitingPoll}, nil
	}
	i := delivery.CurrentWave(rec)
	if i < 0 {
		return reconcile.Result{RequeueAfter: time.Millisecond}, d.startWave(ctx, rec, 0, "")
	}
	wave := &rec.Status.Waves[i]
	g, err := d.gate(ctx, rec, wave)
	if err != nil {
		return reconcile.Result{}, err
	}
	healthy, waiting, health := g.healthy(), g.waiting(), g.health
	s := configpolicy.DeliveryDefaults(rec.Spec.Settings)
	// The record keeps whole seconds: the soak is counted from the second
	// after the one written, so it is never shorter than soakSeconds.
	soak := time.Duration(*s.SoakSeconds)*time.Second + time.Second
	switch {
	case g.failed != "":
		return reconcile.Result{}, d.fail(ctx, rec, "WaveFailed", fmt.Sprintf("wave %s failed: %s", wave.Name, g.failed))
	case len(g.unready) > 0 && wave.HealthySince != nil:
		return reconcile.Result{}, d.fail(ctx, rec, "WaveUnhealthy", fmt.Sprintf("wave %s stopped being ready during its soak: %s", wave.Name, strings.Join(g.unready, ", ")))
	case !healthy && wave.HealthySince != nil:
		// A workload of the wave rolls again (another delivery, a new
		// image): the soak starts over once it is healthy.
		wave.HealthySince = nil
		rec.Status.Message = fmt.Sprintf("wave %s: soak starts over once %s", wave.Name, waiting)
		d.history(rec, wave.Name, "SoakRestarted", "", waiting)
		return reconcile.Result{RequeueAfter: gatePoll}, d.client.Status().Update(ctx, rec)
	case !healthy && time.Since(wave.StartedAt.Time) > time.Duration(s.ProgressDeadlineSeconds)*time.Second:
		return reconcile.Result{}, d.fail(ctx, rec, "ProgressDeadlineExceeded",
			fmt.Sprintf("wave %s not healthy %ds after it started: %s", wave.Name, s.ProgressDeadlineSeconds, waiting))
	case !healthy:
		// What the gate waits for is written when a workload's state at
		// the gate changes, and otherwise at most every progressWrites:
		// a wave of a thousand workloads would rewrite its record with
		// every pod.
		msg := fmt.Sprintf("wave %s: waiting for %s", wave.Name, waiting)
		if !sameHealth(wave.Health, health) || (msg != rec.Status.Message && d.writeDue(rec.UID)) {
			rec.Status.Message, wave.Health = msg, health
			if err := d.client.Status().Update(ctx, rec); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: gatePoll}, nil
	case wave.HealthySince == nil:
		wave.HealthySince, wave.Health = now(), health
		rec.Status.Message = fmt.Sprintf("wave %s healthy; soaking %ds", wave.Name, *s.SoakSeconds)
		d.history(rec, wave.Name, "WaveHealthy", "", unverifiedNote(health))
		return reconcile.Result{RequeueAfter: min(soak, gatePoll)}, d.client.Status().Update(ctx, rec)
	}
	if left := time.Until(wave.HealthySince.Add(soak)); left > 0 {
		return reconcile.Result{RequeueAfter: min(left, gatePoll)}, nil
	}
	return reconcile.Result{RequeueAfter: time.Millisecond}, d.next(ctx, rec, i, "WaveCompleted", "")
}

// next completes wave i and starts the one after it, waits for its
// approval, or ends the delivery.
func (d *deliveries) next(ctx context.Context, rec *v1alpha1.ConfigDelivery, i int, what, by string) error {
	rec.Status.Waves[i].CompletedAt = now()
	rec.Status.RolledBack = false
	deliveryWaves.WithLabelValues("completed").Inc()
	d.history(rec, rec.Status.Waves[i].Name, what, by, "")
	switch {
	case i+1 >= len(rec.Status.Waves):
		return d.finish(ctx, rec, v1alpha1.DeliverySucceeded, "AllWavesHealthy",
			fmt.Sprintf("every wave healthy: %s is delivered", rec.Status.To), by)
	case rec.Status.Waves[i+1].Approval && what != "Promoted":
		rec.Status.State, rec.Status.Reason = v1alpha1.DeliveryWaitingForApproval, "ApprovalRequired"
		rec.Status.CurrentWave = rec.Status.Waves[i+1].Name
		rec.Status.Message = fmt.Sprintf("wave %s waits for approval: configward delivery promote -n %s %s/%s",
			rec.Status.CurrentWave, rec.Namespace, strings.ToLower(rec.Spec.Config.Kind), rec.Spec.Config.Name)
		if err := d.client.Status().Update(ctx, rec); err != nil {
			return err
		}
		if obj := d.configObject(ctx, rec); obj != nil {
			d.events.Eventf(obj, rec, corev1.EventTypeNormal, "DeliveryWaitingForApproval", "Deliver", "ConfigDelivery %s: %s", rec.Name, rec.Status.Message)
		}
		return nil
	}
	return d.startWave(ctx, rec, i+1, by)
}

// startWave records that wave i starts; the rollout controllers re-stamp
// its workloads once they see the record.
func (d *deliveries) startWave(ctx context.Context, rec *v1alpha1.ConfigDelivery, i int, by string) error {
	w := &rec.Status.Waves[i]
	w.StartedAt, w.HealthySince, w.CompletedAt, w.Health = now(), nil, nil, nil
	rec.Status.State, rec.Status.Reason, rec.Status.CurrentWave = v1alpha1.DeliveryProgressing, "WaveStarted", w.Name
	rec.Status.Message = fmt.Sprintf("wave %s started: %d workloads", w.Name, len(w.Workloads))
	d.history(rec, w.Name, "WaveStarted", by, "")
	if err := d.client.Status().Update(ctx, rec); err != nil {
		return err
	}
	deliveryWaves.WithLabelValues("started").Inc()
	if obj := d.configObject(ctx, rec); obj != nil {
		d.events.Eventf(obj, rec, corev1.EventTypeNormal, "DeliveryWaveStarted", "Deliver", "ConfigDelivery %s: wave %s (%d of %d) started: %s",
			rec.Name, w.Name, i+1, len(rec.Status.Waves), targetList(w.Workloads))
	}
	return nil
}

// fail halts the delivery; with onFailure: Rollback, the failed wave goes
// back to the revisions it ran before (Pin pins it to them again).
func (d *deliveries) fail(ctx context.Context, rec *v1alpha1.ConfigDelivery, reason, message string) error {
	deliveryWaves.WithLabelValues("failed").Inc()
	if rec.Spec.Settings.OnFailure == v1alpha1.FailureRollback {
		rec.Status.RolledBack = true
		message += "; the wave is rolled back to the revisions it ran before"
	}
	message += "; no further workload is re-stamped: promote, resume, or change the config again"
	if err := d.finish(ctx, rec, v1alpha1.DeliveryHalted, reason, message, ""); err != nil {
		return err
	}
	// Each workload of the failed wave says so too: its owners look there
	// first.
	if i := delivery.CurrentWave(rec); i >= 0 {
		for _, t := range rec.Status.Waves[i].Workloads {
			if w, found, err := d.get(ctx, rec.Namespace, t); err == nil && found {
				d.events.Eventf(w.Obj, rec, corev1.EventTypeWarning, "ConfigDeliveryHalted", "Deliver",
					"ConfigDelivery %s of %s %s halted in this workload's wave: %s", rec.Name, rec.Spec.Config.Kind, rec.Spec.Config.Name, message)
			}
		}
	}
	return nil
}

// handle acts on a person's request once; one that does not apply to the
// state is recorded as ignored.
func (d *deliveries) handle(ctx context.Context, rec *v1alpha1.ConfigDelivery, req v1alpha1.DeliveryRequest) error {
	rec.Status.HandledRequest = req.ID
	by := req.RequestedBy
	i := delivery.CurrentWave(rec)
	state := rec.Status.State
	switch {
	case req.Action == v1alpha1.ActionHalt && (state == v1alpha1.DeliveryProgressing || state == v1alpha1.DeliveryWaitingForApproval):
		return d.finish(ctx, rec, v1alpha1.DeliveryHalted, "HaltedByUser", "halted by "+by+"; no further workload is re-stamped", by)
	case req.Action == v1alpha1.ActionPromote && state == v1alpha1.DeliveryWaitingForApproval:
		d.history(rec, rec.Status.CurrentWave, "Promoted", by, "approved")
		return d.startWave(ctx, rec, i+1, by)
	case req.Action == v1alpha1.ActionPromote && delivery.Open(state) && i >= 0:
		return d.next(ctx, rec, i, "Promoted", by)
	case req.Action == v1alpha1.ActionResume && state == v1alpha1.DeliveryHalted:
		// The current wave is judged again with a new deadline; a
		// rolled-back wave takes the delivered revision again.
		rec.Status.RolledBack = false
		d.history(rec, rec.Status.CurrentWave, "Resumed", by, "")
		return d.startWave(ctx, rec, max(i, 0), by)
	}
	d.history(rec, rec.Status.CurrentWave, "RequestIgnored", by, fmt.Sprintf("%s does not apply to a %s delivery", req.Action, state))
	return d.client.Status().Update(ctx, rec)
}

// gateResult is what the gate saw of a wave's workloads.
type gateResult struct {
	// failed names the first failure; progressing and unready say what
	// the others wait for; health lists the failed and unverified.
	failed               string
	progressing, unready []string
	health               []v1alpha1.WorkloadHealth
}

// healthy: every workload of the wave is healthy or unverified.
func (g gateResult) healthy() bool {
	return g.failed == "" && len(g.progressing) == 0 && len(g.unready) == 0
}

// waiting says what the gate waits for, the first few workloads by name.
func (g gateResult) waiting() string {
	all := append(append([]string{}, g.unready...), g.progressing...)
	if len(all) > 3 {
		all = append(all[:3], fmt.Sprintf("%d more", len(all)-3))
	}
	return strings.Join(all, ", ")
}

// gate judges the workloads of a started wave (see delivery.Judge).
func (d *deliveries) gate(ctx context.Context, rec *v1alpha1.ConfigDelivery, wave *v1alpha1.WaveStatus) (gateResult, error) {
	src := delivered(rec)
	var g gateResult
	for _, t := range wave.Workloads {
		w, found, err := d.get(ctx, rec.Namespace, t)
		if err != nil {
			return g, err
		}
		if !found {
			continue // deleted: nothing to wait for
		}
		to := rec.Status.To
		if rec.Status.RolledBack {
			to = t.From
		}
		pods, err := d.pods(ctx, w)
		if err != nil {
			return g, err
		}
		state, msg := delivery.Judge(w, src, to, pods)
		named := fmt.Sprintf("%s %s (%s)", t.Kind, t.Name, msg)
		switch state {
		case delivery.Failed:
			if g.failed == "" {
				g.failed = fmt.Sprintf("%s %s: %s", t.Kind, t.Name, msg)
			}
		case delivery.Progressing:
			g.progressing = append(g.progressing, named)
		case delivery.Unready:
			g.unready = append(g.unready, named)
		}
		if state == delivery.Failed || state == delivery.Unverified {
			// The record lists the workloads that decide or do not take
			// part in the gate; the waiting ones are named in its message.
			g.health = append(g.health, v1alpha1.WorkloadHealth{Kind: t.Kind, Name: t.Name, State: state, Message: msg})
		}
	}
	return g, nil
}

// get reads a delivery target from the cache.
func (d *deliveries) get(ctx context.Context, ns string, t v1alpha1.DeliveryTarget) (workload.Object, bool, error) {
	for _, typ := range d.types {
		if delivery.TargetKind(typ) != t.Kind {
			continue
		}
		obj := typ.New()
		if err := d.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: t.Name}, obj); err != nil {
			return workload.Object{}, false, client.IgnoreNotFound(err)
		}
		return typ.Wrap(obj), true, nil
	}
	return workload.Object{}, false, nil
}

// pods lists a workload's pods by its selector, from the cache.
func (d *deliveries) pods(ctx context.Context, w workload.Object) ([]*corev1.Pod, error) {
	sel := w.Selector()
	if sel == nil {
		return nil, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil, nil
	}
	var list corev1.PodList
	if err := d.client.List(ctx, &list, client.InNamespace(w.Obj.GetNamespace()), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if p := &list.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
}

// progressWrites is the least time between two writes of a gate's
// progress message.
const progressWrites = 10 * time.Second

func (d *deliveries) writeDue(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if time.Since(d.lastWrite[uid]) < progressWrites {
		return false
	}
	d.lastWrite[uid] = time.Now()
	return true
}

func sameHealth(a, b []v1alpha1.WorkloadHealth) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].Name != b[i].Name || a[i].State != b[i].State {
			return false
		}
	}
	return true
}

func unverifiedNote(health []v1alpha1.WorkloadHealth) string {
	var names []string
	for _, h := range health {
		if h.State == delivery.Unverified {
			names = append(names, fmt.Sprintf("%s %s (%s)", h.Kind, h.Name, h.Message))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "passed without showing health: " + strings.Join(names, "; ")
}

func targetList(ts []v1alpha1.DeliveryTarget) string {
	var names []string
	for i, t := range ts {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(ts)-10))
			break
		}
		names = append(names, t.Kind+"/"+t.Name)
	}
	return strings.Join(names, ", ")
}

// history appends an entry to the record's history, keeping the last 50.
func (d *deliveries) history(rec *v1alpha1.ConfigDelivery, wave, what, by, message string) {
	h := append(rec.Status.History, v1alpha1.DeliveryEvent{Time: *now(), Wave: wave, What: what, By: by, Message: message})
	if len(h) > 50 {
		h = h[len(h)-50:]
	}
	rec.Status.History = h
}

// configObject is the delivered ConfigMap or Secret from the cache (the
// values it holds there are digests), for the Events recorded on it; nil
// when it is gone.
func (d *deliveries) configObject(ctx context.Context, rec *v1alpha1.ConfigDelivery) client.Object {
	var obj client.Object = &corev1.ConfigMap{}
	if rec.Spec.Config.Kind == string(refs.Secret) {
		obj = &corev1.Secret{}
	}
	key := client.ObjectKey{Namespace: rec.Namespace, Name: rec.Spec.Config.Name}
	if err := d.cache.Get(ctx, key, obj); err != nil {
		ctrl.LoggerFrom(ctx).Info("no Event on the delivered config", "error", err.Error())
		return nil
	}
	return obj
}

func now() *metav1.Time { t := metav1.Now(); return &t }
