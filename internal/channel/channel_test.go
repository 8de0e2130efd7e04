package channel

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

func TestName(t *testing.T) {
	if got := Name("flags", "canary"); got != "flags-ch-canary" {
		t.Errorf("Name = %q", got)
	}
	long := strings.Repeat("a", 250)
	a, b := Name(long, "canary"), Name(long+"b", "canary")
	if len(a) > 253 || len(b) > 253 || a == b || !strings.HasSuffix(a, "-ch-canary") {
		t.Errorf("long names: %q (%d), %q (%d)", a, len(a), b, len(b))
	}
}

func TestConfigMapIsAHotChannel(t *testing.T) {
	snap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags-0123456789", Labels: map[string]string{"team": "x"}},
		Data: map[string]string{"k": "v"}}
	ch := ConfigMap(snap, "flags", "canary", Note{})
	of, wave, ok := Of(ch.Labels, ch.Annotations)
	if !ok || of != "flags" || wave != "canary" || ch.Name != "flags-ch-canary" || ch.Namespace != "shop" {
		t.Fatalf("channel %+v: of %q wave %q ok %v", ch.ObjectMeta, of, wave, ok)
	}
	if Content(ch.Annotations) != "flags-0123456789" || ch.Annotations[v1alpha1.ReloadAnnotation] != v1alpha1.ReloadHot || ch.Labels["team"] != "" || ch.Data["k"] != "v" {
		t.Errorf("channel %+v", ch)
	}
	if _, _, ok := Of(map[string]string{v1alpha1.ChannelLabel: "true"}, nil); ok {
		t.Error("a label alone is not a channel")
	}
}
