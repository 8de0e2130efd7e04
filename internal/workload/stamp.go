package workload

import (
	"github.com/configward/configward/internal/api/v1alpha1"
)

// Stamp is everything configward writes on a workload about the config its
// pods run. Where each part sits is a fact of the kind, kept here: the
// config hash and the snapshots a revision's pods read go on the pod
// template (a Pod's own metadata), so that the workload's controller copies
// them to every pod; the rolled-back marker and the record of CSI secret
// versions go on the workload's own metadata, because changing them must not
// change the template (that would roll the pods). A Pod, its own template,
// carries neither of those two. What the values should be is decided in
// internal/stamp; this type only reads and writes them.
type Stamp struct {
	// Hash is the keyed config hash (v1alpha1.ConfigHashAnnotation); ""
	// when the template carries none.
	Hash string
	// Snapshots names the snapshot of each config the revision's pods read
	// (v1alpha1.ConfigSnapshotsAnnotation, as revision.Snapshots.Encode
	// writes it); "" for none.
	Snapshots string
	// RolledBackFrom is the hash a rollback left (v1alpha1.RolledBackFromAnnotation).
	RolledBackFrom string
	// SecretVersions is the record of the versions the Secrets Store CSI
	// driver reported (v1alpha1.SecretVersionsAnnotation).
	SecretVersions string
}

// Stamp reads the stamp the object carries.
func (w Object) Stamp() Stamp {
	t := w.TemplateAnnotations()
	s := Stamp{Hash: t[v1alpha1.ConfigHashAnnotation], Snapshots: t[v1alpha1.ConfigSnapshotsAnnotation]}
	if !w.Type.OwnTemplate {
		a := w.Obj.GetAnnotations()
		s.RolledBackFrom, s.SecretVersions = a[v1alpha1.RolledBackFromAnnotation], a[v1alpha1.SecretVersionsAnnotation]
	}
	return s
}

// SetStamp writes s on the object: each part set, or removed where s has
// "". A Pod gets only its template's part.
func (w Object) SetStamp(s Stamp) {
	for key, value := range map[string]string{v1alpha1.ConfigHashAnnotation: s.Hash, v1alpha1.ConfigSnapshotsAnnotation: s.Snapshots} {
		if value == "" {
			w.RemoveTemplateAnnotation(key)
		} else {
			w.SetTemplateAnnotation(key, value)
		}
	}
	if w.Type.OwnTemplate {
		return
	}
	a := w.Obj.GetAnnotations()
	for key, value := range s.metadata() {
		if value == "" {
			delete(a, key)
			continue
		}
		if a == nil {
			a = map[string]string{}
		}
		a[key] = value
	}
	w.Obj.SetAnnotations(a)
}

// TemplatePart is the stamp's part that sits on the pod template, by
// annotation key ("" for an annotation to remove).
func (s Stamp) TemplatePart() map[string]string {
	return map[string]string{v1alpha1.ConfigHashAnnotation: s.Hash, v1alpha1.ConfigSnapshotsAnnotation: s.Snapshots}
}

// MetadataPart is the stamp's part that sits on the workload's own
// metadata, by annotation key ("" for an annotation to remove); nil for a
// kind that is its own template.
func (s Stamp) MetadataPart(t *Type) map[string]string {
	if t.OwnTemplate {
		return nil
	}
	return s.metadata()
}

func (s Stamp) metadata() map[string]string {
	return map[string]string{v1alpha1.RolledBackFromAnnotation: s.RolledBackFrom, v1alpha1.SecretVersionsAnnotation: s.SecretVersions}
}

// StampAnnotations are the pod-template annotations that are configward's
// stamp: a template that differs from another only in them is the same
// revision of the workload.
var StampAnnotations = []string{v1alpha1.ConfigHashAnnotation, v1alpha1.ConfigSnapshotsAnnotation}
