// Package admission holds configward's webhook handlers: each starts from a
// review the adapter of webhookserver has checked and decoded, gathers facts
// (references, inventory), hands them to the deciding code, and writes the
// response. Handlers hold no rule logic.
package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/stamp"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

// ConfigHashPath is where the config-hash webhook is served.
const ConfigHashPath = "/mutate-config-hash"

// The mutating webhook fails open: without it a write only misses its hash
// (and the rollout controller, which needs the annotation, leaves it alone);
// failing closed would block every workload write whenever configward is down.
//
// +kubebuilder:webhook:path=/mutate-config-hash,mutating=true,failurePolicy=ignore,sideEffects=None,groups="";apps;batch,resources=pods;deployments;statefulsets;daemonsets;replicasets;jobs;cronjobs,verbs=create;update,versions=v1,name=config-hash.configward.dev,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5

var (
	hashesStamped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_config_hash_stamped_total",
		Help: "Pod templates whose configward.dev/config-hash the mutating webhook set or changed, by workload kind.",
	}, []string{"kind"})
	rollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_revision_rollbacks_total",
		Help: "Rollbacks (kubectl rollout undo) to a revision whose config snapshots exist, which configward kept with their config, by workload kind.",
	}, []string{"kind"})
)

func init() { metrics.Registry.MustRegister(hashesStamped, rollbacks) }

// ConfigHash stamps configward.dev/config-hash on pod templates.
type ConfigHash struct {
	Inventory *inventory.Inventory
	// Keys hold the installation's key the hash is keyed with.
	Keys *hashkey.Source
	// Namespaces (a cache) and Policies give the rollout settings of the
	// ConfigPolicies selecting the namespace.
	Namespaces client.Reader
	Policies   *configpolicy.Store
	// Effects records the stamped-hash metric only for requests that could
	// be real.
	Effects *effects.Ledger
	// Kinds are the workload kinds stamped: the built-in ones plus declared
	// custom kinds.
	Kinds *workload.Registry
	// Records are the delivery records, which pin consumers a delivery has
	// not reached (nil: none).
	Records *deliveryrecords.Reader
}

// Intake implements webhookserver.Handler: stamping never needs the
// object's bytes.
func (h *ConfigHash) Intake() webhookserver.Intake[*workload.Type] {
	// Nothing to stamp on other kinds; the webhook configuration does not
	// send them.
	return workloadIntake(h.Kinds, "%s is not a workload kind", nil)
}

// Review implements webhookserver.Handler.
func (h *ConfigHash) Review(ctx context.Context, r *webhookserver.Review[*workload.Type]) admission.Response {
	w := r.Kind.Info.Wrap(r.Object)
	kind := w.Type.Kind.Kind
	if ref, ok := w.TemplateRef(); ok {
		return templateRefAnswer(r, w, ref)
	}
	write := &stamp.Write{Update: r.Operation == admissionv1.Update}
	var stored workload.Object
	if write.Update {
		if old, err := r.OldObject(); err == nil {
			stored = r.Kind.Info.Wrap(old)
			write.Stored = stored.Stamp()
		}
	}
	// The object alone may say it keeps what it carries: no cache is read.
	if hold, held := stamp.Held(w, write); held {
		return admission.Allowed(heldAnswer(w, hold))
	}
	// Without the stored object, the write is judged as one of its own:
	// the config of now.
	write.Update = stored.Obj != nil
	spec, err := w.PodSpec()
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("[config-hash] %s %s/%s: %v, so no config hash is stamped and it will not roll when its config changes. Fix the pod template.",
			kind, r.Namespace, r.Name(), err))
	}
	policy, err := h.Policies.For(ctx, h.Namespaces, r.Namespace)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("configward could not read namespace %s (%v); no config hash stamped", r.Namespace, err))
	}
	if d, early := stamp.Early(stamp.Input{Workload: w, Facts: stamp.Facts{Policy: policy}, Write: write}); early {
		return admission.Allowed(heldAnswer(w, d.Hold))
	}
	written := w.Stamp()
	versions := keptVersions(w, stored, spec)
	subject := stamp.Subject{Workload: w, Spec: spec, Policy: policy, Key: h.Keys.Current().Bytes(),
		Versions: versions, Rolled: secretversions.RolledIn(versions)}
	if stored.Obj != nil {
		subject.Stored, subject.Written = &write.Stored, &written
	}
	facts, err := h.sources().Gather(ctx, subject)
	if err != nil {
		return admission.Allowed("").WithWarnings(unreadWarning(w, r, err))
	}
	if stamp.NeedsRestorable(facts, write.Update, written, write.Stored) {
		if write.Restorable, err = h.sources().Restorable(ctx, w, written.Hash, written.Snapshots); err != nil {
			return admission.Allowed("").WithWarnings(fmt.Sprintf("configward could not read the history of %s %s/%s (%v); no config hash stamped",
				kind, r.Namespace, r.Name(), err))
		}
	}
	if stored.Obj != nil {
		write.TemplateChanged = !w.SameTemplate(stored, workload.StampAnnotations...)
	}
	d := stamp.Decide(stamp.Input{Workload: w, Facts: facts, Write: write})
	var warnings []string
	switch {
	case len(d.Unpinned) > 0 && policy.SnapshotsBlocked != "":
		warnings = append(warnings, fmt.Sprintf("[config-revision] %s %s/%s reads %s as they are now: configward cannot write snapshots in namespace %s (%s), "+
			"so this revision's pods are not pinned to its bytes and a rollback to it cannot bring them back. Fix the cause; revisions pin pods again once snapshots can be written.",
			kind, r.Namespace, r.Name(), sourceList(d.Unpinned), r.Namespace, policy.SnapshotsBlocked))
	case len(d.Unpinned) > 0:
		warnings = append(warnings, fmt.Sprintf("[config-revision] Pod %s/%s reads %s as they are now: no snapshot of that content is written yet, so a container restart may read later content. "+
			"configward writes the snapshot; Pods created from now on are pinned.", r.Namespace, r.Name(), sourceList(d.Unpinned)))
	}
	if d.RolledBack {
		warnings = append(warnings, fmt.Sprintf("[config-revision] %s %s/%s: rolled back to the revision with config hash %s, whose pods read snapshots %s. "+
			"configward keeps it there until its config changes again or a new revision is deployed.",
			kind, r.Namespace, r.Name(), d.Want.Hash, d.Want.Snapshots))
	}
	if d.HashReset {
		// The hash describes the config as it is now; a writer that sets
		// another one gets the current one, and is told why: without
		// revisions, or to a revision without snapshots, a rollback does
		// not bring its config back. (configward's own controller also
		// sets another hash, when this replica's cache is behind its; it
		// notices that its stamp did not stick and tries again.)
		warnings = append(warnings, fmt.Sprintf("[config-hash] %s %s/%s: the config hash was reset to the current config's. "+
			"A rollback does not bring back old ConfigMap or Secret content; change the config itself to go back.",
			kind, r.Namespace, r.Name()))
	}
	if mix, err := setMixWarning(ctx, h.Inventory, policy, w, r.Namespace, r.Name(), spec); err != nil || mix != "" {
		warnings = append(warnings, cmp.Or(mix, fmt.Sprintf("[config-set] configward could not read the hot config of %s %s/%s (%v) to say whether its pods could read a set as a mix", kind, r.Namespace, r.Name(), err)))
	}
	ops := stampOps(w, d.Want)
	if len(ops) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	return h.patched(r, w, d, ops).WithWarnings(warnings...)
}

func (h *ConfigHash) sources() stamp.Sources {
	return stamp.Sources{Inventory: h.Inventory, Records: h.Records}
}

// heldAnswer is the allowed answer's reason for a workload the stamp holds.
func heldAnswer(w workload.Object, hold drift.Hold) string {
	switch hold {
	case drift.OptedOut:
		return "rollouts disabled by " + v1alpha1.RolloutAnnotation
	case drift.PolicyDisabled:
		return "rollouts disabled by ConfigPolicy"
	case stamp.PodStarted:
		// A Pod's hash records the config it started with; a later update
		// (a label, an image) does not restart it with the config of now.
		return "a Pod keeps the config hash it was created with"
	case drift.JobImmutable:
		return "a " + w.Type.Kind.Kind + " keeps the config hash it was created with: its template is immutable"
	case stamp.Controlled:
		// Its owner's template carries the hash it was made from.
		return "controlled by " + controllerKind(w) + "; its owner carries the config hash"
	}
	return hold.Why
}

// unreadWarning is the warning of a write whose stamp's facts could not be
// read: it is let through without a stamp.
func unreadWarning(w workload.Object, r *webhookserver.Review[*workload.Type], err error) string {
	kind := w.Type.Kind.Kind
	var unread *stamp.Unread
	if errors.As(err, &unread) {
		switch unread.Fact {
		case stamp.DeliveriesFact:
			return fmt.Sprintf("configward could not read the config deliveries %s %s/%s takes part in (%v); no config hash stamped", kind, r.Namespace, r.Name(), unread.Err)
		case stamp.SnapshotsFact:
			return fmt.Sprintf("configward could not name the config snapshots of %s %s/%s (%v); it will not roll when its config changes until it is applied again",
				kind, r.Namespace, r.Name(), unread.Err)
		}
		err = unread.Err
	}
	return fmt.Sprintf("configward could not compute the config hash of %s %s/%s (%v); it will not roll when its config changes until it is applied again",
		kind, r.Namespace, r.Name(), err)
}

func sourceList(srcs []revision.Source) string {
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.String()
	}
	return strings.Join(names, ", ")
}

// keptVersions is the record of CSI secret versions the workload keeps
// (v1alpha1.SecretVersionsAnnotation): the one written, or, for an update
// that replaces the whole object without it (kubectl replace) while the
// spec still mounts a SecretProviderClass, the stored one. Dropped, it
// would take rotated classes out of the hash and roll the workload.
func keptVersions(w, stored workload.Object, spec *corev1.PodSpec) string {
	written, has := w.Obj.GetAnnotations()[v1alpha1.SecretVersionsAnnotation]
	if has || stored.Obj == nil || w.Type.OwnTemplate || len(refs.CSIClasses(spec)) == 0 {
		return written
	}
	return stored.Stamp().SecretVersions
}

// stampOps is the JSON patch that leaves want on w: its template part on
// the pod template, its metadata part on the workload.
func stampOps(w workload.Object, want workload.Stamp) []jsonpatch.Operation {
	ops := annotationOps(w.TemplateAnnotations(), want.TemplatePart(), w.Type.AnnotationPatchPath(), func(adds map[string]string) jsonpatch.Operation {
		// A JSON patch cannot add a key to a map that is not there: without
		// annotations it adds the map, and without template metadata
		// (possible in a custom kind's template, never in a typed one) the
		// metadata.
		if w.TemplateMetadataPresent() {
			return jsonpatch.Operation{Operation: "add", Path: w.Type.AnnotationPatchPath(), Value: adds}
		}
		return jsonpatch.Operation{Operation: "add", Path: "/" + strings.Join(w.Type.PodTemplatePath(), "/"), Value: map[string]any{"annotations": adds}}
	})
	metadata := want.MetadataPart(w.Type)
	if metadata == nil {
		return ops // a Pod is its own template
	}
	return append(ops, annotationOps(w.Obj.GetAnnotations(), metadata,
		"/metadata/annotations", func(adds map[string]string) jsonpatch.Operation {
			return jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations", Value: adds}
		})...)
}

// annotationOps sets each of changes ("" removes it) in the annotations at
// path, which hold current; addMap adds them when there is no map yet.
func annotationOps(current, changes map[string]string, path string, addMap func(map[string]string) jsonpatch.Operation) []jsonpatch.Operation {
	var ops []jsonpatch.Operation
	adds := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		v := changes[k]
		cur, has := current[k]
		switch {
		case v == "" && has:
			ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: path + "/" + workload.EscapePointer(k)})
		case v != "" && (!has || cur != v):
			adds[k] = v
		}
	}
	switch {
	case len(adds) == 0:
	case current == nil:
		ops = append(ops, addMap(adds))
	default:
		for _, k := range slices.Sorted(maps.Keys(adds)) {
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: path + "/" + workload.EscapePointer(k), Value: adds[k]})
		}
	}
	return ops
}

// templateRefAnswer answers for a workload that takes its pod template
// from another object (an Argo Rollout's spec.workloadRef). It is never
// stamped: Argo refuses a Rollout whose own template is not empty once
// workloadRef is set. A referenced Deployment is a workload of its own,
// stamped and rolled as usual, and Argo follows its changes; anything else
// (a ReplicaSet, a PodTemplate) configward cannot roll through, and the
// writer is told so.
func templateRefAnswer(r *webhookserver.Review[*workload.Type], w workload.Object, ref workload.TemplateRef) admission.Response {
	target := ref.Kind + "/" + ref.Name
	rolls, why := ref.RolledThrough()
	if rolls {
		return admission.Allowed(fmt.Sprintf("takes its pod template from %s, which carries the config hash", target))
	}
	kind := w.Type.Kind.Kind
	return admission.Allowed("").WithWarnings(fmt.Sprintf(
		"[config-hash] %s %s/%s takes its pod template from %s (%s): %s, so this %s will not roll when its config changes. "+
			"Reference a Deployment, or put the template in the %s.",
		kind, r.Namespace, r.Name(), target, ref.Path, why, kind, kind))
}

// patched answers with ops, which leave d's stamp on w.
func (h *ConfigHash) patched(r *webhookserver.Review[*workload.Type], w workload.Object, d stamp.Decision, ops []jsonpatch.Operation) admission.Response {
	// The metrics wait, where callers are not authenticated, for the
	// object as this patch leaves it.
	stamped := w.Type.Wrap(w.Obj.DeepCopyObject().(client.Object))
	stamped.SetStamp(d.Want)
	written := w.Stamp().Hash
	h.Effects.Record(r.Request, stamped.Obj, func(client.Object) {
		if d.Want.Hash != written {
			hashesStamped.WithLabelValues(w.Type.Kind.Kind).Inc()
		}
		if d.RolledBack {
			rollbacks.WithLabelValues(w.Type.Kind.Kind).Inc()
		}
	})
	return admission.Patched("", ops...)
}

// controllerKind is the kind of the object that controls w.
func controllerKind(w workload.Object) string {
	return metav1.GetControllerOf(w.Obj).Kind
}
