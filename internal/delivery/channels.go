package delivery

import (
	"crypto/sha256"
	"encoding/binary"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Hot config is delivered through channels (internal/channel): each wave
// of the policy has one channel per hot config, and a pod mounts the
// channels of the one wave it is placed in when it is created. A pod's
// volumes cannot change while it runs, so its wave is decided once, from
// facts that do not move under it: its workload's kind, name and labels,
// and, for a wave that takes a share of a workload's pods, how many of the
// live pods of the pod's own controller (a Deployment's revision) that
// wave holds when the pod is created.

// PodOwner is the top-level workload a new pod belongs to, as a wave's
// selector and percent see it.
type PodOwner struct {
	// Kind is its kind as records name it (workload.Type.RecordKind).
	Kind, Name string
	Labels     map[string]string
	// Selector finds its pods, for a wave that takes a share of them.
	Selector *metav1.LabelSelector
}

// WaveOf places a new pod of owner (nil: a pod no workload controls) into
// a wave of waves and returns its name. A wave takes the owner when its
// selector matches the owner's labels and, with percent, when the owner's
// stable share (Bucket) falls within it; a wave with neither takes every
// owner. Where a wave that takes the owner has podPercent, the pod joins it
// only when inShare says the wave holds fewer than its share of the
// owner's pods; otherwise the pod goes on to the waves after it. A pod no
// wave takes (a bare pod included) joins the last wave, which a change
// reaches last.
func WaveOf(waves []v1alpha1.Wave, owner *PodOwner, inShare func(i int) (bool, error)) (string, error) {
	if len(waves) == 0 {
		return "", nil
	}
	if owner != nil {
		for i, w := range waves {
			if !takes(w, owner) {
				continue
			}
			if w.PodPercent == nil {
				return w.Name, nil
			}
			in, err := inShare(i)
			if err != nil {
				return "", err
			}
			if in {
				return w.Name, nil
			}
		}
	}
	return waves[len(waves)-1].Name, nil
}

// takes says whether wave w takes the pods of owner.
func takes(w v1alpha1.Wave, owner *PodOwner) bool {
	if w.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil || !sel.Matches(labels.Set(owner.Labels)) {
			return false // a selector that does not parse is refused at admission
		}
	}
	if w.Percent != nil {
		return Bucket(w.Name, owner.Kind, owner.Name) < int(*w.Percent)
	}
	return true
}

// Bucket is a workload's stable place, 0 to 99, in the percent of wave:
// the same workload always lands in the same bucket of a wave, whatever
// other workloads come and go, and the buckets of two waves are
// independent, so a later wave's percent is a share of what the earlier
// ones left.
func Bucket(wave, kind, name string) int {
	sum := sha256.Sum256([]byte(wave + "\x00" + kind + "\x00" + name))
	return int(binary.BigEndian.Uint64(sum[:8]) % 100)
}

// ShareTarget is how many of a workload's pods a wave with podPercent
// holds when the workload has total live pods: the share, rounded up, at
// least one.
func ShareTarget(podPercent int32, total int) int {
	return max(1, (total*int(podPercent)+99)/100)
}
