package revision

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// snapshotMeta is the metadata of every snapshot: configward's label and
// the name of the original, none of the original's labels (no ConfigSchema
// or selector picks a copy up), and no owner: the controller deletes a
// snapshot once nothing that can create pods names it.
func snapshotMeta(namespace, name, of string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace:   namespace,
		Name:        name,
		Labels:      map[string]string{v1alpha1.SnapshotLabel: v1alpha1.SnapshotLabelValue},
		Annotations: map[string]string{v1alpha1.SnapshotOfAnnotation: of},
	}
}

// ConfigMapSnapshot is the snapshot named name of cm: its data and binary
// data, immutable.
func ConfigMapSnapshot(cm *corev1.ConfigMap, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: snapshotMeta(cm.Namespace, name, cm.Name),
		Data:       cm.Data,
		BinaryData: cm.BinaryData,
		Immutable:  new(true),
	}
}

// SecretSnapshot is the snapshot named name of s: its type and data,
// immutable.
func SecretSnapshot(s *corev1.Secret, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: snapshotMeta(s.Namespace, name, s.Name),
		Type:       s.Type,
		Data:       s.Data,
		Immutable:  new(true),
	}
}

// SnapshotOf reports whether an object with these labels and annotations
// is a snapshot, and of which object.
func SnapshotOf(labels, annotations map[string]string) (string, bool) {
	if labels[v1alpha1.SnapshotLabel] != v1alpha1.SnapshotLabelValue {
		return "", false
	}
	of, ok := annotations[v1alpha1.SnapshotOfAnnotation]
	return of, ok && of != ""
}

// Copied reports whether a Secret type gets snapshots: a service-account
// token is the API server's to rotate, never a revision's.
func Copied(t corev1.SecretType) bool { return t != corev1.SecretTypeServiceAccountToken }
