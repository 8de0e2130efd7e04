// Package admission holds configward's webhook handlers: each starts from a
// review the adapter of webhookserver has checked and decoded, gathers facts
// (references, inventory), hands them to the deciding code, and writes the
// response. Handlers hold no rule logic.
package admission

import (
	"context"
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
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/secretversions"
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
	// Deliveries pin consumers a delivery has not reached (nil: none).
	Deliveries *delivery.Pinner
}

// Scope implements webhookserver.Handler: stamping never needs the
// object's bytes.
func (h *ConfigHash) Scope() webhookserver.Scope[*workload.Type] {
	// Nothing to stamp on other kinds; the webhook configuration does not
	// send them.
	return workloadScope(h.Kinds, "%s is not a workload kind", nil)
}

// Review implements webhookserver.Handler.
func (h *ConfigHash) Review(ctx context.Context, r *webhookserver.Review[*workload.Type]) admission.Response {
	w := r.Kind.Info.Wrap(r.Object)
	kind := w.Type.Kind.Kind
	if ref, ok := w.TemplateRef(); ok {
		return templateRefAnswer(r, w, ref)
	}
	if w.RolloutsDisabled() {
		return admission.Allowed("rollouts disabled by " + v1alpha1.RolloutAnnotation)
	}
	spec, err := w.PodSpec()
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("[config-hash] %s %s/%s: %v, so no config hash is stamped and it will not roll when its config changes. Fix the pod template.",
			kind, r.Namespace, r.Name(), err))
	}
	if w.Type.OwnTemplate && r.Operation == admissionv1.Update {
		// A Pod's hash records the config it started with; a later update
		// (a label, an image) does not restart it with the config of now.
		return admission.Allowed("a Pod keeps the config hash it was created with")
	}
	if w.Type.ImmutableTemplate && r.Operation == admissionv1.Update {
		// A Job's template cannot change, so neither can what it consumes:
		// a new hash on any later update (a label, resuming it, the
		// controller's record of secret versions) would have the API
		// server refuse that update as a change of an immutable field.
		return admission.Allowed("a " + kind + " keeps the config hash it was created with: its template is immutable")
	}
	if w.Controlled() {
		// Its owner's template carries the hash it was made from. Changing
		// an owned template would break the owner's bookkeeping: a
		// Deployment finds its ReplicaSets by comparing templates.
		return admission.Allowed("controlled by " + controllerKind(w) + "; its owner carries the config hash")
	}
	ns, err := configpolicy.LookupNamespace(ctx, h.Namespaces, r.Namespace)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("configward could not read namespace %s (%v); no config hash stamped", r.Namespace, err))
	}
	active := h.Policies.Current()
	enabled, includeSecrets := active.Rollouts(ns)
	if !enabled {
		return admission.Allowed("rollouts disabled by ConfigPolicy")
	}
	key := h.Keys.Current().Bytes()
	versions := keptVersions(r, w, spec)
	pins, err := h.pins(ctx, key, r, w, spec, active, ns)
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"configward could not read the config deliveries %s %s/%s takes part in (%v); no config hash stamped", kind, r.Namespace, r.Name(), err))
	}
	hash, counted, err := h.Inventory.TemplateHash(ctx, key, r.Namespace, spec, includeSecrets, pins, secretversions.RolledIn(versions))
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"configward could not compute the config hash of %s %s/%s (%v); it will not roll when its config changes until it is applied again",
			kind, r.Namespace, r.Name(), err))
	}
	want := revision.Stamp{}
	if counted > 0 {
		// With no rollout-mode config any more, a stale hash would only
		// mislead: it goes.
		want.Hash = hash
	}
	var warnings []string
	if revisionsOn, secrets := active.Revisions(ns); revisionsOn && counted > 0 {
		snaps, err := h.Inventory.Snapshots(ctx, key, r.Namespace, spec, secrets, pins)
		if err != nil {
			return admission.Allowed("").WithWarnings(fmt.Sprintf(
				"configward could not name the config snapshots of %s %s/%s (%v); it will not roll when its config changes until it is applied again",
				kind, r.Namespace, r.Name(), err))
		}
		if w.Type.OwnTemplate {
			// A bare Pod is its own template: no controller retries its
			// creation, so it names only snapshots written already, and
			// reads the others as they are (the controller writes their
			// snapshots for the next pod).
			var unwritten []string
			for _, src := range snaps.Sorted() {
				if ok, err := h.Inventory.SnapshotWritten(ctx, r.Namespace, src, snaps[src]); err != nil || !ok {
					unwritten = append(unwritten, src.String())
					delete(snaps, src)
				}
			}
			if len(unwritten) > 0 {
				warnings = append(warnings, fmt.Sprintf("[config-revision] Pod %s/%s reads %s as they are now: no snapshot of that content is written yet, so a container restart may read later content. "+
					"configward writes the snapshot; Pods created from now on are pinned.", r.Namespace, r.Name(), strings.Join(unwritten, ", ")))
			}
		}
		want.Snapshots = snaps.Encode()
		if r.Operation == admissionv1.Update {
			if want, err = h.revisionStep(ctx, r, w, want); err != nil {
				return admission.Allowed("").WithWarnings(fmt.Sprintf("configward could not read the history of %s %s/%s (%v); no config hash stamped",
					kind, r.Namespace, r.Name(), err))
			}
		}
		if want.RolledBack {
			warnings = append(warnings, fmt.Sprintf("[config-revision] %s %s/%s: rolled back to the revision with config hash %s, whose pods read snapshots %s. "+
				"configward keeps it there until its config changes again or a new revision is deployed.",
				kind, r.Namespace, r.Name(), want.Hash, want.Snapshots))
		}
	}
	written, _ := w.ConfigHash()
	if !want.RolledBack && want.Hash != "" && written != want.Hash && r.Operation == admissionv1.Update && writerChangedHash(r, written) {
		// The hash describes the config as it is now; a writer that sets
		// another one (kubectl rollout undo copies an old revision's
		// template) gets the current one, and is told why: without
		// revisions, or to a revision without snapshots, a rollback does
		// not bring its config back.
		warnings = append(warnings, fmt.Sprintf("[config-hash] %s %s/%s: the config hash was reset to the current config's. "+
			"A rollback does not bring back old ConfigMap or Secret content; change the config itself to go back.",
			kind, r.Namespace, r.Name()))
	}
	ops := stampOps(w, want, versions)
	if len(ops) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	return h.patched(r, w, want, ops).WithWarnings(warnings...)
}

// pins are the revisions of delivered config the workload keeps while a
// delivery has not reached it (see delivery.Pin): an image bump of a
// consumer whose wave has not come must not take the new config with it.
func (h *ConfigHash) pins(ctx context.Context, key []byte, r *webhookserver.Review[*workload.Type], w workload.Object, spec *corev1.PodSpec, active *configpolicy.Active, ns *corev1.Namespace) (revision.Snapshots, error) {
	_, settings := active.Delivery(ns)
	_, secrets := active.Revisions(ns)
	scope := delivery.Scope{On: settings != nil, Secrets: secrets}
	if !scope.On {
		return nil, nil
	}
	var stored, written revision.Snapshots
	if r.Operation == admissionv1.Update {
		if old, err := r.OldObject(); err == nil {
			v, _ := r.Kind.Info.Wrap(old).TemplateAnnotation(v1alpha1.ConfigSnapshotsAnnotation)
			stored, _ = revision.Decode(v)
		}
		v, _ := w.TemplateAnnotation(v1alpha1.ConfigSnapshotsAnnotation)
		written, _ = revision.Decode(v)
	}
	return h.Deliveries.Pins(ctx, key, r.Namespace, scope, delivery.TargetKind(w.Type), r.Name(), spec, stored, written)
}

// revisionStep decides what an update of a workload whose namespace has
// revisions carries (see revision.Next): the config of now, or, for a
// rollback to a revision whose snapshots exist, that revision's.
func (h *ConfigHash) revisionStep(ctx context.Context, r *webhookserver.Review[*workload.Type], w workload.Object, now revision.Stamp) (revision.Stamp, error) {
	old, err := r.OldObject()
	if err != nil {
		return now, nil // judged as a write of its own: the config of now
	}
	stored := r.Kind.Info.Wrap(old)
	in := revision.Write{Now: now.Hash, NowSnapshots: now.Snapshots,
		Marker:          w.Obj.GetAnnotations()[v1alpha1.RolledBackFromAnnotation],
		TemplateChanged: !w.SameTemplate(stored, v1alpha1.ConfigHashAnnotation, v1alpha1.ConfigSnapshotsAnnotation)}
	in.Written, _ = w.ConfigHash()
	in.WrittenSnapshots, _ = w.TemplateAnnotation(v1alpha1.ConfigSnapshotsAnnotation)
	in.Stored, _ = stored.ConfigHash()
	if in.Written != "" && in.Written != in.Stored && in.Written != in.Now && in.WrittenSnapshots != "" {
		if in.Restorable, err = h.restorable(ctx, r.Namespace, w, in.Written, in.WrittenSnapshots); err != nil {
			return now, err
		}
	}
	return revision.Next(in), nil
}

// restorable reports whether hash with snapshots is a revision in w's
// history (a ReplicaSet or ControllerRevision of it carries both) whose
// snapshots all exist, from the cache.
func (h *ConfigHash) restorable(ctx context.Context, namespace string, w workload.Object, hash, snapshots string) (bool, error) {
	history, err := h.Inventory.History(ctx, namespace, w.Obj.GetUID())
	if err != nil {
		return false, err
	}
	if !slices.Contains(history, inventory.Revision{Hash: hash, Snapshots: snapshots}) {
		return false, nil
	}
	snaps, err := revision.Decode(snapshots)
	if err != nil {
		return false, nil
	}
	for src, snap := range snaps {
		if ok, err := h.Inventory.SnapshotWritten(ctx, namespace, src, snap); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// keptVersions is the record of CSI secret versions the workload keeps
// (v1alpha1.SecretVersionsAnnotation): the one written, or, for an update
// that replaces the whole object without it (kubectl replace) while the
// spec still mounts a SecretProviderClass, the stored one. Dropped, it
// would take rotated classes out of the hash and roll the workload.
func keptVersions(r *webhookserver.Review[*workload.Type], w workload.Object, spec *corev1.PodSpec) string {
	written, has := w.Obj.GetAnnotations()[v1alpha1.SecretVersionsAnnotation]
	if has || r.Operation != admissionv1.Update || w.Type.OwnTemplate || len(refs.CSIClasses(spec)) == 0 {
		return written
	}
	old, err := r.OldObject()
	if err != nil {
		return written
	}
	return old.GetAnnotations()[v1alpha1.SecretVersionsAnnotation]
}

// stampOps is the JSON patch that leaves want on w: the hash and snapshots
// on its pod template, the rolled-back-from marker and the record of CSI
// secret versions (versions, never removed here) on the workload.
func stampOps(w workload.Object, want revision.Stamp, versions string) []jsonpatch.Operation {
	ops := annotationOps(w.TemplateAnnotations(), map[string]string{
		v1alpha1.ConfigHashAnnotation: want.Hash, v1alpha1.ConfigSnapshotsAnnotation: want.Snapshots,
	}, w.Type.AnnotationPatchPath(), func(adds map[string]string) jsonpatch.Operation {
		// A JSON patch cannot add a key to a map that is not there: without
		// annotations it adds the map, and without template metadata
		// (possible in a custom kind's template, never in a typed one) the
		// metadata.
		if w.TemplateMetadataPresent() {
			return jsonpatch.Operation{Operation: "add", Path: w.Type.AnnotationPatchPath(), Value: adds}
		}
		return jsonpatch.Operation{Operation: "add", Path: "/" + strings.Join(w.Type.PodTemplatePath(), "/"), Value: map[string]any{"annotations": adds}}
	})
	if w.Type.OwnTemplate {
		return ops // a Pod is its own template: no marker
	}
	metadata := map[string]string{v1alpha1.RolledBackFromAnnotation: want.Marker}
	if versions != "" {
		metadata[v1alpha1.SecretVersionsAnnotation] = versions
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

// writerChangedHash reports whether an update sets a config hash other than
// the stored one: a rollback, a copied manifest, or configward's own
// controller when this replica's cache is behind its (the controller
// notices that its hash did not stick and tries again).
func writerChangedHash(r *webhookserver.Review[*workload.Type], written string) bool {
	old, err := r.OldObject()
	if err != nil {
		return false
	}
	previous, _ := r.Kind.Info.Wrap(old).ConfigHash()
	return written != "" && written != previous
}

// patched answers with ops, which leave want on w.
func (h *ConfigHash) patched(r *webhookserver.Review[*workload.Type], w workload.Object, want revision.Stamp, ops []jsonpatch.Operation) admission.Response {
	// The metrics wait, where callers are not authenticated, for the
	// object as this patch leaves it.
	stamped := w.Type.Wrap(w.Obj.DeepCopyObject().(client.Object))
	for k, v := range map[string]string{v1alpha1.ConfigHashAnnotation: want.Hash, v1alpha1.ConfigSnapshotsAnnotation: want.Snapshots} {
		if v == "" {
			stamped.RemoveTemplateAnnotation(k)
		} else {
			stamped.SetTemplateAnnotation(k, v)
		}
	}
	if !w.Type.OwnTemplate {
		a := stamped.Obj.GetAnnotations()
		if want.Marker == "" {
			delete(a, v1alpha1.RolledBackFromAnnotation)
		} else {
			if a == nil {
				a = map[string]string{}
			}
			a[v1alpha1.RolledBackFromAnnotation] = want.Marker
		}
		stamped.Obj.SetAnnotations(a)
	}
	written, _ := w.ConfigHash()
	h.Effects.Record(r.Request, stamped.Obj, func(client.Object) {
		if want.Hash != written {
			hashesStamped.WithLabelValues(w.Type.Kind.Kind).Inc()
		}
		if want.RolledBack {
			rollbacks.WithLabelValues(w.Type.Kind.Kind).Inc()
		}
	})
	return admission.Patched("", ops...)
}

// controllerKind is the kind of the object that controls w.
func controllerKind(w workload.Object) string {
	return metav1.GetControllerOf(w.Obj).Kind
}
