// Package csiversions reads, for one workload, the versions the Secrets
// Store CSI driver reports for the secrets its pods mount, and decides with
// internal/secretversions whether they rotated: the I/O half of that
// decision, shared by the rollout controller (which rolls a rotation once)
// and the drift controller (which shows one not rolled yet).
package csiversions

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/drift"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/workload"
)

// PodStatusList and PodStatusObject are an empty SecretProviderClassPodStatus list and object, read
// unstructured: configward takes no dependency on the driver's module for
// four fields of it.
func PodStatusList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(secretversions.PodStatusKind.GroupVersion().WithKind(secretversions.PodStatusKind.Kind + "List"))
	return l
}

func PodStatusObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(secretversions.PodStatusKind)
	return u
}

// Versions is what one look at a workload's CSI-mounted secrets found.
type Versions struct {
	// Record is the workload's record as it should be now, encoded; Write
	// says it differs from the stored one.
	Record string
	Write  bool
	// Rotated are the classes rotated since the stored record: the record
	// is then written with the rollout, never before it. Rolled are the
	// record's rolled digests (secretversions.Record.Rolled).
	Rotated []string
	Rolled  map[string]string
}

// Mounts says whether w has secret versions to look at: its spec mounts
// a SecretProviderClass, or did when its record was written.
func Mounts(w workload.Object, spec *corev1.PodSpec) bool {
	return len(refs.CSIClasses(spec)) > 0 || w.Obj.GetAnnotations()[v1alpha1.SecretVersionsAnnotation] != ""
}

// Causes names rotated classes as causes are named
// ("SecretProviderClass/db-creds").
func Causes(classes []string) []string {
	out := make([]string, 0, len(classes))
	for _, c := range classes {
		out = append(out, string(refs.SecretProviderClass)+"/"+c)
	}
	return out
}

// Look looks at the versions the Secrets Store CSI driver reports for the
// pods of one namespace. The pods and statuses are read once, on the first
// workload that mounts a class: the drift controller looks at every
// workload of a namespace in one judgement.
type Look struct {
	Client    client.Reader
	Inventory *inventory.Inventory
	Key       *hashkey.Key

	read     bool
	pods     []corev1.Pod
	owners   drift.Owners
	statuses []secretversions.PodStatus
}

// versions looks at the versions the pods of w report for the rollout-mode
// SecretProviderClasses its spec mounts (see internal/secretversions for
// the decision). Without the driver's kinds, or where Secrets take no part
// in rollouts, it leaves the record as it is.
func (l *Look) Versions(ctx context.Context, w workload.Object, spec *corev1.PodSpec, secrets bool) (Versions, error) {
	stored := w.Obj.GetAnnotations()[v1alpha1.SecretVersionsAnnotation]
	rec, err := secretversions.Decode(stored)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("unreadable record of secret versions; starting a new baseline", "error", err.Error())
	}
	if !l.Inventory.CSIClasses() || !secrets {
		// Nothing to look at: the record stays as it is, since dropping it
		// would take rotated classes out of the hash and roll the workload
		// (a restart while the driver's CRDs are briefly not served).
		return Versions{Record: stored, Rolled: rec.Rolled()}, nil
	}
	ns := w.Obj.GetNamespace()
	mounted := refs.CSIClasses(spec)
	var followed []string
	for _, name := range mounted {
		o, err := l.Inventory.Get(ctx, refs.SecretProviderClass, ns, name)
		if err != nil {
			return Versions{}, err
		}
		if !o.Exists || o.Mode == inventory.Rollout {
			followed = append(followed, name)
		}
	}
	var observed secretversions.Observed
	if len(followed) > 0 {
		if err := l.readNamespace(ctx, ns); err != nil {
			return Versions{}, err
		}
		observed = secretversions.Observe(l.Key.Bytes(), ns, followed, l.podsOf(w.Obj), l.statuses)
	}
	// A hot class is not looked at, and its part of the record stays as it
	// was: the config hash leaves it out while it is hot. Dropping it would
	// be undone by the webhook, which keeps the record of a workload that
	// mounts a class on every write.
	next, rotated := secretversions.Next(rec, l.Key.ID, mounted, observed)
	enc := next.Encode()
	return Versions{Record: enc, Write: enc != stored, Rotated: rotated, Rolled: next.Rolled()}, nil
}

func (l *Look) readNamespace(ctx context.Context, ns string) error {
	if l.read {
		return nil
	}
	pods, rss, jobs, err := drift.PodsAndOwners(ctx, l.Client, client.InNamespace(ns))
	if err != nil {
		return err
	}
	list := PodStatusList()
	if err := l.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing SecretProviderClassPodStatuses: %w", err)
	}
	l.statuses = make([]secretversions.PodStatus, 0, len(list.Items))
	for _, u := range list.Items {
		l.statuses = append(l.statuses, secretversions.PodStatusOf(u.Object))
	}
	l.pods, l.owners, l.read = pods, drift.OwnersOf(rss, jobs), true
	return nil
}

// podsOf names the pods w runs now: those it controls, or those a
// ReplicaSet or Job it controls does. Finished pods mount nothing.
func (l *Look) podsOf(w client.Object) map[string]bool {
	out := map[string]bool{}
	for i := range l.pods {
		p := &l.pods[i]
		if c := metav1.GetControllerOf(p); c != nil && drift.Live(p) && l.owners.Top(c) == w.GetUID() {
			out[p.Name] = true
		}
	}
	return out
}
