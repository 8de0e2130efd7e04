package reloadreports

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
)

// answer says whether the configs on pod's disk, as rep fingerprints them,
// hold one set: each channel the pod mounts that a channel's note binds to
// another it mounts must hold what the newest note says
// (channel.Expected). The notes are read where the pod's kubelet read its
// content: the cache, or the API server where the pod has a content the
// cache has not seen (it may be behind the kubelet). Nothing is kept.
func (h *Handler) answer(ctx context.Context, pod *corev1.Pod, token []byte, rep reload.Report) (reload.Answer, error) {
	key := reload.FingerprintKey(token)
	consumed := consumedBy(pod)
	notes := map[revision.Source]channel.Note{}
	parts := map[revision.Source]reload.ConfigReport{}
	for _, part := range rep.Configs {
		kind, name, _ := strings.Cut(part.Config, "/")
		if !consumed[part.Config] || !slices.Contains(inventory.ContentKinds(), refs.Kind(kind)) {
			continue
		}
		o, err := h.Inventory.Get(ctx, refs.Kind(kind), pod.Namespace, name)
		if err != nil {
			return reload.Answer{}, err
		}
		of, _, isChannel := channel.Of(o.Labels, o.Annotations)
		if !isChannel {
			continue // config bound to none: only channels are delivered as sets
		}
		note := o.Annotations[v1alpha1.ChannelSetAnnotation]
		if !(o.Exists && reload.Matches(key, part.Keys, part.AllKeys, o.KeyDigests)) && h.Live != nil {
			live, err := h.readLive(ctx, o, refs.Kind(kind), pod.Namespace, name)
			if err != nil {
				return reload.Answer{}, err
			}
			if live.kd != nil {
				note = live.note
			}
		}
		if n, err := channel.ParseNote(note); err == nil {
			src := revision.Source{Kind: refs.Kind(kind), Name: of}
			notes[src], parts[src] = n, part
		}
	}
	ans := reload.Answer{Outcome: reload.Asked, Holds: true}
	for src, want := range channel.Expected(notes) {
		part := parts[src]
		if ans.Sets == nil {
			ans.Sets = map[string]string{}
		}
		ans.Sets[part.Config] = want.Note.Set()
		kd, err := h.snapshotDigests(ctx, src.Kind, pod.Namespace, want.Snapshot)
		if err != nil {
			return reload.Answer{}, err
		}
		if kd == nil || !reload.Matches(key, part.Keys, part.AllKeys, kd) {
			ans.Holds = false
			ans.WaitingFor = append(ans.WaitingFor, part.Config)
		}
	}
	slices.Sort(ans.WaitingFor)
	return ans, nil
}

// snapshotDigests are the key digests of a snapshot (nil when there is
// none): from the cache, or, for one the cache has not seen yet, the API
// server (a snapshot never changes, so any read of it is the read).
func (h *Handler) snapshotDigests(ctx context.Context, kind refs.Kind, namespace, name string) (map[string]string, error) {
	o, err := h.Inventory.Get(ctx, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	if _, isSnapshot := revision.SnapshotOf(o.Labels, o.Annotations); o.Exists && isSnapshot {
		return o.KeyDigests, nil
	}
	if h.Live == nil {
		return nil, nil
	}
	live, err := h.readLive(ctx, o, kind, namespace, name)
	return live.kd, err
}

// consumedBy is the set of configs ("Kind/name") pod reads: a pod reports,
// and asks, about those and nothing else.
func consumedBy(pod *corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, c := range refs.ConsumedBy(&pod.Spec) {
		out[string(c.Kind)+"/"+c.Name] = true
	}
	return out
}
