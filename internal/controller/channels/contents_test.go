package channels

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

func TestContents(t *testing.T) {
	flags := revision.Source{Kind: refs.ConfigMap, Name: "flags"}
	started := metav1.NewTime(time.Now())
	rec := &v1alpha1.ConfigDelivery{Spec: v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "flags"}, Hot: true},
		Status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryProgressing, To: "flags-2b", From: "flags-1a", Waves: []v1alpha1.WaveStatus{
			{Name: "canary", Channel: "flags-ch-canary", From: "flags-1a", StartedAt: &started},
			{Name: "rest", Channel: "flags-ch-rest", From: "flags-1a"},
		}}}
	waves := []v1alpha1.Wave{{Name: "canary"}, {Name: "rest"}}
	held := func(waveContent ...string) map[string]channel.Held {
		out := map[string]channel.Held{}
		for i := 0; i < len(waveContent); i += 2 {
			out[waveContent[i]] = channel.Held{Name: channel.Name("flags", waveContent[i]), Content: waveContent[i+1]}
		}
		return out
	}
	mounted := func(waves ...string) map[string]bool {
		out := map[string]bool{}
		for _, w := range waves {
			out[channel.Name("flags", w)] = true
		}
		return out
	}
	for _, tc := range []struct {
		name string
		look look
		want map[string]string
	}{
		{"delivery on, no record: every wave's channel takes the content of now",
			look{exists: true, current: "flags-1a", channelled: true, waves: waves}, map[string]string{"canary": "flags-1a", "rest": "flags-1a"}},
		{"a delivery's canary started: its channel takes the change, the rest keep theirs",
			look{exists: true, current: "flags-2b", channelled: true, waves: waves, record: rec, held: held("canary", "flags-1a", "rest", "flags-1a")},
			map[string]string{"canary": "flags-2b", "rest": "flags-1a"}},
		{"a wave gone from the policy keeps its channel while a pod mounts it",
			look{exists: true, current: "flags-1a", channelled: true, waves: waves, held: held("old", "flags-0", "older", "flags-0"), mounted: mounted("old")},
			map[string]string{"canary": "flags-1a", "rest": "flags-1a", "old": "flags-0"}},
		{"delivery off: the channels pods mount follow the config, the others go",
			look{exists: true, current: "flags-2b", held: held("canary", "flags-1a", "rest", "flags-1a"), mounted: mounted("rest")},
			map[string]string{"rest": "flags-2b"}},
		{"the original is gone: the channels pods mount keep what they hold",
			look{held: held("canary", "flags-1a", "rest", "flags-1a"), mounted: mounted("canary")},
			map[string]string{"canary": "flags-1a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.look.config = flags
			if got := contents(tc.look); !maps.Equal(got, tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}
