package inventory

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/refs"
)

// ConfigKinds are the kinds of config whose changes the controllers log
// (an empty object of each to watch): a
// SecretProviderClass's too where the driver's CRDs are served (a change of
// its reload mode; its rotations are logged by the rollout that rolls them).
func (inv *Inventory) ConfigKinds() map[refs.Kind]client.Object {
	kinds := map[refs.Kind]client.Object{}
	for _, k := range ContentKinds() {
		kinds[k] = NewObject(k)
	}
	if inv.CSIClasses() {
		kinds[refs.SecretProviderClass] = ClassMetadata()
	}
	return kinds
}

// ContentChanged compares the cached (digested) forms: data digests, and the
// reload mode, which decides whether the object counts at all.
func ContentChanged(old, new client.Object) bool {
	oldMode, _ := ModeOf(old.GetAnnotations())
	newMode, _ := ModeOf(new.GetAnnotations())
	return oldMode != newMode || DataChanged(old, new)
}

// DataChanged compares the data digests of the cached forms.
func DataChanged(old, new client.Object) bool {
	switch o := old.(type) {
	case *corev1.ConfigMap:
		n, ok := new.(*corev1.ConfigMap)
		return !ok || !maps.Equal(o.Data, n.Data)
	case *corev1.Secret:
		n, ok := new.(*corev1.Secret)
		return !ok || !maps.EqualFunc(o.Data, n.Data, func(a, b []byte) bool { return string(a) == string(b) })
	case *metav1.PartialObjectMetadata:
		// A SecretProviderClass, of which configward reads no content: a
		// change of its spec reaches pods as versions the driver reports.
		return false
	}
	return true
}
