package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// PodChannelsMatchCondition is the matchCondition of the Pod path's second
// webhook (pod-channels.configward.dev), which a namespaceSelector limits
// to the namespaces where delivery is on (v1alpha1.HotChannelsLabel): the
// pods the first one (PodConfigMatchCondition) does not take, so each pod
// reaches the Pod path once.
const PodChannelsMatchCondition = `!(` + PodConfigMatchCondition + `)`

// Channels points a new pod's hot config at its wave's channels, where
// delivery is on in the pod's namespace: a change of the hot config then
// reaches the pod when its wave does (the delivery controller writes each
// wave's channels in turn), not when the kubelet next syncs. The pod's
// template stays as written.
type Channels struct {
	Policies *configpolicy.Store
	// Cache reads Namespaces and the pod's owners; Live lists the pods of
	// a workload whose waves take a share of its pods (a pod created a
	// moment before must count, and the cache may not show it yet).
	Cache, Live client.Reader
	Kinds       *workload.Registry
	// Keys seal a placement (channel.PlacementSeal).
	Keys *hashkey.Source
}

// named refuses a pod that names a channel of its namespace's waves as its
// creator wrote it: only configward points a pod at a channel, when it
// places the pod in a wave. The pod's own placement, sealed in this very
// request (the Pod path called again after another webhook), is
// configward's and passes.
func (c *Channels) named(ctx context.Context, pod *corev1.Pod, requestUID string) (string, error) {
	policy, err := c.Policies.For(ctx, c.Cache, pod.Namespace)
	if err != nil || policy.Delivery == nil {
		return "", err
	}
	if c.Keys != nil && channel.SealedFor(pod, c.Keys.Current().Bytes(), requestUID) {
		return "", nil
	}
	for _, r := range refs.FromPodSpec(&pod.Spec) {
		if wave, ok := channel.Named(r.Name, policy.Delivery.Waves); ok {
			return fmt.Sprintf("[config-delivery] Pod %s/%s names %s %s (%s), configward's channel of hot config for wave %s: only configward points a pod at a channel, "+
				"when it places the pod in a wave, so that a change reaches it through the delivery's gates. Name the original %s instead; configward points the pod at its wave's channel.",
				pod.Namespace, podName(pod), r.Kind, r.Name, r.Via, wave, r.Kind), nil
		}
	}
	return "", nil
}

// podName is a pod's name, or its generateName for one not named yet.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "…"
}

// point returns the patch that points pod's hot config at the channels of
// its wave, the channel each hot config is pointed at (for the reload
// agent, which watches the channels), and why.
//
// user made the request: a controller reference counts for the pod's
// placement only in a pod a Kubernetes controller creates (ByController),
// so a person's bare pod that claims a canary's ReplicaSet is placed as
// the bare pod it is. requestUID is the request's, to seal the placement.
func (c *Channels) point(ctx context.Context, inv *inventory.Inventory, pod *corev1.Pod, user, requestUID string) ([]jsonpatch.Operation, map[revision.Source]string, string, error) {
	policy, err := c.Policies.For(ctx, c.Cache, pod.Namespace)
	if err != nil || policy.Delivery == nil {
		return nil, nil, "", err
	}
	hot := map[revision.Source]bool{}
	for _, r := range refs.FromPodSpec(&pod.Spec) {
		if r.Via != refs.Volume && r.Via != refs.Projected {
			continue // hot config in env or subPath is refused before a pod is created
		}
		src := revision.Source{Kind: r.Kind, Name: r.Name}
		if _, seen := hot[src]; seen {
			continue
		}
		o, err := inv.Get(ctx, r.Kind, pod.Namespace, r.Name)
		if err != nil {
			return nil, nil, "", err
		}
		hot[src] = delivery.Channelled(o, policy)
	}
	if !anyTrue(hot) {
		channelReviews.WithLabelValues("none").Inc()
		return nil, nil, "", nil
	}
	var owner *delivery.PodOwner
	if changecontrol.ByController(user) {
		var err error
		if owner, err = c.owner(ctx, pod); err != nil {
			return nil, nil, "", err
		}
	}
	waves := policy.Delivery.Waves
	wave, err := delivery.WaveOf(waves, owner, func(i int) (bool, error) { return c.inShare(ctx, pod, owner, waves[i]) })
	if err != nil {
		return nil, nil, "", err
	}
	var unwritten []string
	for src, channelled := range hot {
		if !channelled {
			continue
		}
		// An object of the channel's name that configward did not write
		// (someone's own) is never mounted in its place: the pod reads the
		// original.
		o, err := inv.Get(ctx, src.Kind, pod.Namespace, channel.Name(src.Name, wave))
		if err != nil {
			return nil, nil, "", err
		}
		if _, _, isChannel := channel.Of(o.Labels, o.Annotations); o.Exists && !isChannel {
			hot[src] = false
		}
		// Where configward cannot write snapshots (a quota, RBAC, a
		// webhook: the namespace's mark), a channel not written yet may
		// never be, and a pod that mounts it would wait for it forever:
		// the pod reads the original, as a revision's pods read originals
		// there.
		if !o.Exists && policy.SnapshotsBlocked != "" {
			hot[src] = false
			unwritten = append(unwritten, channel.Name(src.Name, wave))
		}
	}
	pointed := map[revision.Source]string{}
	ops := revision.Repoint(&pod.Spec, func(r refs.Ref) string {
		src := revision.Source{Kind: r.Kind, Name: r.Name}
		if (r.Via != refs.Volume && r.Via != refs.Projected) || !hot[src] {
			return ""
		}
		pointed[src] = channel.Name(r.Name, wave)
		return pointed[src]
	})
	var note string
	if len(unwritten) > 0 {
		slices.Sort(unwritten)
		note = fmt.Sprintf("not pointed at channels %s, which configward cannot write yet (%s): those read the originals",
			strings.Join(unwritten, ", "), policy.SnapshotsBlocked)
	}
	if len(pointed) == 0 {
		channelReviews.WithLabelValues("none").Inc()
		return nil, nil, note, nil
	}
	channelReviews.WithLabelValues("pointed").Inc()
	marks := map[string]string{v1alpha1.ChannelWaveAnnotation: wave}
	if c.Keys != nil {
		marks[v1alpha1.ChannelPlacedAnnotation] = channel.PlacementSeal(c.Keys.Current().Bytes(), requestUID, pod.Namespace, wave)
	}
	if pod.Annotations == nil {
		ops = append(ops, jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations", Value: marks})
	} else {
		for _, k := range []string{v1alpha1.ChannelWaveAnnotation, v1alpha1.ChannelPlacedAnnotation} {
			if v, ok := marks[k]; ok {
				ops = append(ops, jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations/" + strings.ReplaceAll(k, "/", "~1"), Value: v})
			}
		}
	}
	return ops, pointed, strings.TrimSuffix(fmt.Sprintf("hot config pointed at the channels of wave %s; %s", wave, note), "; "), nil
}

func anyTrue(m map[revision.Source]bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

// owner is the top-level workload of pod, as its controller references
// say (nil for a pod no workload controls, or whose owner is not known).
func (c *Channels) owner(ctx context.Context, pod *corev1.Pod) (*delivery.PodOwner, error) {
	w, ok, err := c.Kinds.TopWorkloadOf(ctx, c.Cache, pod)
	if !ok {
		return nil, err
	}
	return &delivery.PodOwner{Kind: w.Type.RecordKind(), Name: w.Obj.GetName(), Labels: w.Obj.GetLabels(), Selector: w.Selector()}, nil
}

// inShare says whether wave, which takes a share of owner's pods
// (podPercent), holds fewer than its share of them: then the new pod joins
// it. The owner's live pods are listed from the API server, found by its
// selector, and only those with the new pod's own controller count (a
// Deployment's: the ReplicaSet of its revision): during a rolling update
// the old revision's pods are on their way out, and counting them would
// put the whole new revision into the wave that held the old pods deleted
// first.
func (c *Channels) inShare(ctx context.Context, pod *corev1.Pod, owner *delivery.PodOwner, wave v1alpha1.Wave) (bool, error) {
	sel := owner.Selector
	if sel == nil {
		return false, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return false, nil
	}
	var list corev1.PodList
	if err := c.Live.List(ctx, &list, client.InNamespace(pod.Namespace), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return false, fmt.Errorf("listing the pods of %s %s to place a new one in a wave: %w", owner.Kind, owner.Name, err)
	}
	controller := metav1.GetControllerOfNoCopy(pod)
	total, in := 1, 0 // the new pod counts
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if controller != nil {
			if other := metav1.GetControllerOfNoCopy(p); other == nil || other.UID != controller.UID {
				continue // another revision's pod, or one a person made
			}
		}
		total++
		if p.Annotations[v1alpha1.ChannelWaveAnnotation] == wave.Name {
			in++
		}
	}
	return in < delivery.ShareTarget(*wave.PodPercent, total), nil
}
