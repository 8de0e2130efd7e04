package inventory

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
)

// What configward copies, and what it keeps as revisions, is decided here
// alone: snapshots (Snapshots), delivery pins (delivery.Delivered) and
// channels (delivery.Channelled) all ask.
func TestCopied(t *testing.T) {
	cm := func(mode Mode) Object { return Object{Kind: refs.ConfigMap, Exists: true, Mode: mode} }
	secret := func(typ corev1.SecretType) Object {
		return Object{Kind: refs.Secret, Exists: true, Mode: Rollout, Type: typ}
	}
	snapshot := cm(Rollout)
	snapshot.Labels, snapshot.Annotations = map[string]string{v1alpha1.SnapshotLabel: v1alpha1.SnapshotLabelValue}, map[string]string{v1alpha1.SnapshotOfAnnotation: "app"}
	ch := cm(Hot)
	ch.Labels, ch.Annotations = map[string]string{v1alpha1.ChannelLabel: v1alpha1.ChannelLabelValue}, map[string]string{v1alpha1.ChannelOfAnnotation: "flags", v1alpha1.ChannelWaveAnnotation: "canary"}
	for name, tc := range map[string]struct {
		o               Object
		secrets         bool
		copied, revised bool
	}{
		"a rollout ConfigMap":                        {cm(Rollout), false, true, true},
		"a hot ConfigMap: copied into channels":      {cm(Hot), false, true, false},
		"an ignore ConfigMap: copied, never revised": {cm(Ignore), false, true, false},
		"a ConfigMap that does not exist":            {Object{Kind: refs.ConfigMap, Mode: Rollout}, false, false, false},
		"a snapshot is no original":                  {snapshot, false, false, false},
		"a channel is no original":                   {ch, false, false, false},
		"a Secret where Secrets are not copied":      {secret(corev1.SecretTypeOpaque), false, false, false},
		"a Secret where they are":                    {secret(corev1.SecretTypeOpaque), true, true, true},
		"a service-account token never":              {secret(corev1.SecretTypeServiceAccountToken), true, false, false},
		"a SecretProviderClass never":                {Object{Kind: refs.SecretProviderClass, Exists: true, Mode: Rollout}, true, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Copied(tc.o, tc.secrets); got != tc.copied {
				t.Errorf("Copied = %v", got)
			}
			if got := KeptAsRevisions(tc.o, tc.secrets); got != tc.revised {
				t.Errorf("KeptAsRevisions = %v", got)
			}
		})
	}
}

// A pod is found under every object it reads, directly or through the
// snapshot its revision names.
func TestPodReads(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.ConfigSnapshotsAnnotation: "ConfigMap/app=app-1a,Secret/db=db-2b"}},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-1a"}}}},
				{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "flags-ch-canary"}}}},
			},
			Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-2b"}}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-1a"}}},
			}}},
		},
	}
	got := map[string]bool{}
	for _, v := range podReads(p) {
		if got[v] {
			t.Errorf("%s listed twice", v)
		}
		got[v] = true
	}
	for _, want := range []string{"ConfigMap/app-1a", "ConfigMap/flags-ch-canary", "Secret/db-2b", "ConfigMap/app", "Secret/db"} {
		if !got[want] {
			t.Errorf("%s missing from %v", want, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("%v: want 5", got)
	}
}
