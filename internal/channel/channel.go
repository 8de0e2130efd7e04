// Package channel says what a channel is: the copy of a hot ConfigMap or
// Secret that the pods of one delivery wave mount, so that a change of hot
// config reaches them wave by wave (the seed's "separate objects per
// group"). It names channels, builds them from the snapshot whose content
// they hold, and tells one from other objects. Which wave a pod is in, and
// which content a wave's channel holds, are the delivery's decisions
// (internal/delivery); writing channels is the channels controller's.
package channel

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
)

// maxName is the longest name of a ConfigMap or Secret (a DNS subdomain).
const maxName = 253

// Name names the channel of original for wave: "<original>-ch-<wave>",
// readable in a pod's spec. Where that is too long, the original's name is
// cut and 8 hex digits of a hash of the whole keep it unique.
func Name(original, wave string) string {
	name := original + "-ch-" + wave
	if len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(original + "\x00" + wave))
	suffix := "-" + hex.EncodeToString(sum[:4]) + "-ch-" + wave
	return original[:maxName-len(suffix)] + suffix
}

// meta is the metadata of every channel: configward's label, the original
// and the wave, the snapshot whose content it holds, the hot reload mode
// (a channel is hot config: its pods' agents watch it, and the rules for
// hot config hold for it), the note of its write (see Note), none of the
// original's labels (no ConfigSchema or selector picks a channel up) and no
// owner: the channels controller deletes channels nobody mounts any more.
func meta(namespace, original, wave, content string, note Note) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: namespace,
		Name:      Name(original, wave),
		Labels:    map[string]string{v1alpha1.ChannelLabel: v1alpha1.ChannelLabelValue},
		Annotations: map[string]string{
			v1alpha1.ChannelOfAnnotation:      original,
			v1alpha1.ChannelWaveAnnotation:    wave,
			v1alpha1.ChannelContentAnnotation: content,
			v1alpha1.ReloadAnnotation:         v1alpha1.ReloadHot,
			v1alpha1.ChannelSetAnnotation:     note.Encode(),
		},
	}
}

// ConfigMap is the channel of original for wave holding the content of
// snapshot (a snapshot of original, read from the API server), written
// with note.
func ConfigMap(snapshot *corev1.ConfigMap, original, wave string, note Note) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: meta(snapshot.Namespace, original, wave, snapshot.Name, note),
		Data:       snapshot.Data,
		BinaryData: snapshot.BinaryData,
	}
}

// Secret is the channel of original for wave holding the content of
// snapshot, written with note.
func Secret(snapshot *corev1.Secret, original, wave string, note Note) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: meta(snapshot.Namespace, original, wave, snapshot.Name, note),
		Type:       snapshot.Type,
		Data:       snapshot.Data,
	}
}

// Of reports whether an object with these labels and annotations is a
// channel, of which original and for which wave.
func Of(labels, annotations map[string]string) (original, wave string, ok bool) {
	if labels[v1alpha1.ChannelLabel] != v1alpha1.ChannelLabelValue {
		return "", "", false
	}
	original, wave = annotations[v1alpha1.ChannelOfAnnotation], annotations[v1alpha1.ChannelWaveAnnotation]
	return original, wave, original != "" && wave != ""
}

// Content is the snapshot a channel holds ("" when it says none).
func Content(annotations map[string]string) string {
	return annotations[v1alpha1.ChannelContentAnnotation]
}

// Held is a channel as a cache shows it.
type Held struct {
	Name, Wave string
	// Content is the snapshot it holds.
	Content string
	Object  client.Object
}

// List lists the channels of original, a ConfigMap or a Secret by kind, in
// namespace from r (a cache), by wave.
func List(ctx context.Context, r client.Reader, namespace string, kind refs.Kind, original string) (map[string]Held, error) {
	out := map[string]Held{}
	add := func(o client.Object) {
		if of, wave, ok := Of(o.GetLabels(), o.GetAnnotations()); ok && of == original {
			out[wave] = Held{Name: o.GetName(), Wave: wave, Content: Content(o.GetAnnotations()), Object: o}
		}
	}
	in := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{v1alpha1.ChannelLabel: v1alpha1.ChannelLabelValue}}
	if kind == refs.Secret {
		var list corev1.SecretList
		if err := r.List(ctx, &list, in...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			add(&list.Items[i])
		}
		return out, nil
	}
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, in...); err != nil {
		return nil, err
	}
	for i := range list.Items {
		add(&list.Items[i])
	}
	return out, nil
}

// Named says name is, or would be, a channel of one of waves in its
// namespace: "<original>-ch-<wave>" (Name), and which wave.
func Named(name string, waves []v1alpha1.Wave) (string, bool) {
	for _, w := range waves {
		if strings.HasSuffix(name, "-ch-"+w.Name) && len(name) > len("-ch-"+w.Name) {
			return w.Name, true
		}
	}
	return "", false
}

// PlacementSeal seals a pod's wave to the admission request (its UID) in
// which configward's Pod path placed the pod on the wave's channels,
// keyed with the installation's hash key: "<request UID>.<digest>". The
// Pod path writes it with the placement and, when it is called again in
// the same request (reinvocation), knows its own rewrite by it; nobody
// can write one for a request of their own without the key.
func PlacementSeal(key []byte, requestUID, namespace, wave string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("configward channel placement\x00" + requestUID + "\x00" + namespace + "\x00" + wave))
	return requestUID + "." + hex.EncodeToString(m.Sum(nil))
}

// SealedFor says pod carries the placement seal of its wave made in the
// request requestUID ("" for any request).
func SealedFor(pod *corev1.Pod, key []byte, requestUID string) bool {
	got := pod.Annotations[v1alpha1.ChannelPlacedAnnotation]
	uid, _, ok := strings.Cut(got, ".")
	if !ok || (requestUID != "" && uid != requestUID) {
		return false
	}
	return hmac.Equal([]byte(got), []byte(PlacementSeal(key, uid, pod.Namespace, pod.Annotations[v1alpha1.ChannelWaveAnnotation])))
}

// Placed says configward placed pod on the channel name of wave: the Pod
// path's rewrite named the channel in one of the pod's volumes, marked the
// pod with its wave and sealed the placement (PlacementSeal). A pod that
// names a channel otherwise (in env, or in a volume its creator wrote,
// which admission refuses; or from before channels were refused) is not
// the wave's, and no gate counts it. The seal is checked at admission,
// where it is made; here its presence is enough, so that a rotated hash
// key never leaves a wave with no pod to judge.
func Placed(pod *corev1.Pod, name, wave string) bool {
	if pod.Annotations[v1alpha1.ChannelWaveAnnotation] != wave || !strings.Contains(pod.Annotations[v1alpha1.ChannelPlacedAnnotation], ".") {
		return false
	}
	for _, r := range refs.FromPodSpec(&pod.Spec) {
		if r.Name == name && (r.Via == refs.Volume || r.Via == refs.Projected) {
			return true
		}
	}
	return false
}
