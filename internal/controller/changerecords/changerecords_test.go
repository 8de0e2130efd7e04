package changerecords

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/flapping"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
)

// The decisions of the flapping count that need no cluster; suite_test.go
// runs the keeper against kube-apiserver.

func TestHolds(t *testing.T) {
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app"}}
	channel := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-canary",
		Labels:      map[string]string{v1alpha1.ChannelLabel: v1alpha1.ChannelLabelValue},
		Annotations: map[string]string{v1alpha1.ChannelOfAnnotation: "app", v1alpha1.ChannelWaveAnnotation: "canary"}}}
	delivering := configpolicy.NamespacePolicy{Delivery: &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "canary"}, {Name: "rest"}}}}
	for _, tc := range []struct {
		name string
		mode inventory.Mode
		s    configpolicy.NamespacePolicy
		obj  *corev1.ConfigMap
		want bool
	}{
		{name: "rollout config rolls its consumers", mode: inventory.Rollout, obj: plain, want: true},
		{name: "ignored config moves nothing", mode: inventory.Ignore, s: delivering, obj: plain},
		{name: "hot config without delivery reaches its pods with nothing to hold", mode: inventory.Hot, obj: plain},
		{name: "hot config where delivery is on starts deliveries", mode: inventory.Hot, s: delivering, obj: plain, want: true},
		{name: "a channel is configward's own writing", mode: inventory.Hot, s: delivering, obj: channel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holds(tc.mode, tc.s, tc.obj); got != tc.want {
				t.Errorf("holds = %v, want %v", got, tc.want)
			}
		})
	}
}

var stepNames = map[step]string{nothing: "nothing", announce: "announce", stillFlapping: "stillFlapping", settle: "settle"}

func TestNext(t *testing.T) {
	th := flapping.Threshold{Changes: 2, Window: time.Minute}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	changes := func(ago ...time.Duration) []flapping.Change {
		var out []flapping.Change
		for _, a := range ago {
			out = append(out, flapping.Change{At: now.Add(-a)})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		rec  flapping.Record
		want step
	}{
		{name: "changes under the threshold", rec: flapping.Record{Changes: changes(20*time.Second, 10*time.Second)}, want: nothing},
		{name: "started flapping", rec: flapping.Record{Changes: changes(30*time.Second, 20*time.Second, 10*time.Second), Since: now.Add(-10 * time.Second)}, want: announce},
		// A new leader loads an episode its predecessor announced: no
		// second Event.
		{name: "announced already", rec: flapping.Record{Changes: changes(30*time.Second, 20*time.Second, 10*time.Second), Since: now.Add(-10 * time.Second), Announced: true}, want: stillFlapping},
		{name: "unchanged for the window since its last change", rec: flapping.Record{Changes: changes(3*time.Minute, 2*time.Minute, time.Minute), Since: now.Add(-time.Minute), Announced: true}, want: settle},
		// One that went by between two passes is settled (no Event: it
		// was never announced).
		{name: "settled before it was announced", rec: flapping.Record{Changes: changes(3*time.Minute, 2*time.Minute, time.Minute), Since: now.Add(-time.Minute)}, want: settle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := next(tc.rec, th, now); got != tc.want {
				t.Errorf("next = %s, want %s", stepNames[got], stepNames[tc.want])
			}
		})
	}
}

func TestForgetAfter(t *testing.T) {
	read := flapping.Key{Kind: "ConfigMap", Namespace: "shop", Name: "app"}
	th := flapping.Threshold{Changes: 2, Window: time.Minute}
	f := forgetAfter(map[flapping.Key]flapping.Threshold{read: th})
	if got := f(read); got != th {
		t.Errorf("a record is forgotten by %v, want its namespace's threshold %v", got, th)
	}
	// Its namespace's policies could not be read this pass: kept.
	if got := f(flapping.Key{Kind: "Secret", Namespace: "shop", Name: "creds"}); got.Window != flapping.MaxWindow {
		t.Errorf("a record whose threshold is unknown is forgotten after %s, want the longest window", got.Window)
	}
}

func TestRecordKeyAndWriter(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app.yaml"}}
	if got := recordKey(refs.ConfigMap, cm).String(); got != "ConfigMap.shop.app.yaml" {
		t.Errorf("recordKey = %q", got)
	}
	if writerName("") != "an unknown field manager" || writerName("helm") != "helm" {
		t.Error("writerName names the writer, or says it is unknown")
	}
}
