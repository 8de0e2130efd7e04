// Package channels is the channels controller: it keeps the channels of
// each hot ConfigMap (and Secret) in namespaces where delivery is on, one
// per wave of the policy, holding the content its wave should run now
// (delivery.Want: what the config's latest ConfigDelivery says),
// and it brings every channel to the current content where delivery is
// turned off. It is the only writer of channels; it deletes a channel once
// no pod mounts it and its wave is gone from the policy (or delivery is
// off).
package channels

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/controller/revisions"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// Channels are written only here, from values read from the API server
// (the cache holds digests only): the original's, or a snapshot's.
//
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=create;update;delete

var (
	channelWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_channel_writes_total",
		Help: "Writes of channels (the copies of hot config each delivery wave's pods mount), by result: written, deleted, refused (a quota, RBAC or an admission webhook refused the write: the wave's pods keep the content they have), squatted (an object configward did not write holds the channel's name).",
	}, []string{"result"})
)

func init() { metrics.Registry.MustRegister(channelWrites) }

// Options configure the channels controller.
type Options struct {
	Policies  *configpolicy.Store
	Snapshots *revisions.Snapshotter
	Keys      *hashkey.Source
	// Records reads the ConfigDeliveries from the cache.
	Records *deliveryrecords.Reader
}

// Setup registers the channels controller. Its requests name a config
// ("ConfigMap/flags" in a namespace).
func Setup(mgr ctrl.Manager, inv *inventory.Inventory, opts Options) error {
	c := &channels{client: mgr.GetClient(), cache: mgr.GetCache(), live: mgr.GetAPIReader(), inv: inv, opts: opts, events: mgr.GetEventRecorder("configward-channels")}
	configKey := func(kind refs.Kind) handler.MapFunc {
		return func(_ context.Context, o client.Object) []reconcile.Request {
			if of, _, ok := channel.Of(o.GetLabels(), o.GetAnnotations()); ok {
				return []reconcile.Request{key(o.GetNamespace(), revision.Source{Kind: kind, Name: of})}
			}
			if _, ok := revision.SnapshotOf(o.GetLabels(), o.GetAnnotations()); ok {
				return nil
			}
			return []reconcile.Request{key(o.GetNamespace(), revision.Source{Kind: kind, Name: o.GetName()})}
		}
	}
	policiesChanged := make(chan event.TypedGenericEvent[*corev1.ConfigMap], 1)
	opts.Policies.OnChange(func() {
		select {
		case policiesChanged <- event.TypedGenericEvent[*corev1.ConfigMap]{Object: &corev1.ConfigMap{}}:
		default: // one pending look covers every change before it
		}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("channels").
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(configKey(refs.ConfigMap))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(configKey(refs.Secret))).
		Watches(&v1alpha1.ConfigDelivery{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			rec := o.(*v1alpha1.ConfigDelivery)
			if !rec.Spec.Hot {
				return nil
			}
			return []reconcile.Request{key(rec.Namespace, revision.Source{Kind: refs.Kind(rec.Spec.Config.Kind), Name: rec.Spec.Config.Name})}
		})).
		WatchesRawSource(source.Channel(policiesChanged, handler.TypedEnqueueRequestsFromMapFunc(c.everyHotConfig))).
		// A pod gone may leave a channel nobody mounts.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(c.channelsOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false }, UpdateFunc: func(event.UpdateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false }})).
		Complete(c)
}

type channels struct {
	client client.Client
	// cache lists and reads ConfigMaps and Secrets by their identity (the
	// client refuses reads of them: the cache holds digests only).
	cache client.Reader
	// live reads values (originals and snapshots) from the API server.
	live   client.Reader
	inv    *inventory.Inventory
	opts   Options
	events recorder.EventRecorder
}

func key(namespace string, src revision.Source) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: src.String()}}
}

// everyHotConfig asks for a look at every hot config and every channel's
// original, after the policies in force changed (delivery turned on or
// off, waves added or removed).
func (c *channels) everyHotConfig(ctx context.Context, _ *corev1.ConfigMap) []reconcile.Request {
	var out []reconcile.Request
	seen := map[reconcile.Request]bool{}
	add := func(r reconcile.Request) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for kind, list := range map[refs.Kind]client.ObjectList{refs.ConfigMap: &corev1.ConfigMapList{}, refs.Secret: &corev1.SecretList{}} {
		if err := c.cache.List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing config to look at its channels after a ConfigPolicy change")
			continue
		}
		each(list, func(o client.Object) {
			if of, _, ok := channel.Of(o.GetLabels(), o.GetAnnotations()); ok {
				add(key(o.GetNamespace(), revision.Source{Kind: kind, Name: of}))
			} else if o.GetAnnotations()[v1alpha1.ReloadAnnotation] == v1alpha1.ReloadHot {
				add(key(o.GetNamespace(), revision.Source{Kind: kind, Name: o.GetName()}))
			}
		})
	}
	return out
}

// channelsOf maps a pod that mounts channels to their originals.
func (c *channels) channelsOf(ctx context.Context, o client.Object) []reconcile.Request {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Annotations[v1alpha1.ChannelWaveAnnotation] == "" {
		return nil
	}
	var out []reconcile.Request
	for _, r := range refs.FromPodSpec(&pod.Spec) {
		got, err := c.inv.Get(ctx, r.Kind, pod.Namespace, r.Name)
		if err != nil {
			continue
		}
		if of, _, isChannel := channel.Of(got.Labels, got.Annotations); isChannel {
			out = append(out, key(pod.Namespace, revision.Source{Kind: r.Kind, Name: of}))
		}
	}
	return out
}

func each(list client.ObjectList, f func(client.Object)) {
	switch l := list.(type) {
	case *corev1.ConfigMapList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	case *corev1.SecretList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	}
}

func (c *channels) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kind, name, ok := strings.Cut(req.Name, "/")
	if !ok {
		return reconcile.Result{}, nil
	}
	src, ns := revision.Source{Kind: refs.Kind(kind), Name: name}, req.Namespace
	policy, err := c.opts.Policies.For(ctx, c.client, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	first, err := c.plan(ctx, ns, src, policy)
	if err != nil || first == nil {
		return reconcile.Result{}, err
	}
	plans := []*plan{first}
	var errs []error
	if rec := first.record; rec != nil && rec.Spec.Hot && delivery.IsSet(rec) {
		// The channels of a change set's members are written in this one
		// look, whichever member woke it: a wave's channels never wait on
		// the queue for each other, and each carries the note of them all.
		for _, m := range delivery.Members(rec) {
			if m == src {
				continue
			}
			p, err := c.plan(ctx, ns, m, policy)
			if err != nil {
				errs = append(errs, err)
			} else if p != nil {
				plans = append(plans, p)
			}
		}
	}
	at := time.Now()
	for _, p := range plans {
		errs = append(errs, c.apply(ctx, ns, p, func(wave string) channel.Note { return noteOf(plans, p, wave, at) }))
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// plan is what one config's channels should hold, by wave.
type plan struct {
	look
	want map[string]string
}

// plan looks at src's channels and decides what each should hold; nil when
// src has none and is not channelled.
func (c *channels) plan(ctx context.Context, ns string, src revision.Source, policy configpolicy.NamespacePolicy) (*plan, error) {
	o, err := c.inv.Get(ctx, src.Kind, ns, src.Name)
	if err != nil {
		return nil, err
	}
	held, err := channel.List(ctx, c.cache, ns, src.Kind, src.Name)
	if err != nil || (len(held) == 0 && !delivery.Channelled(o, policy)) {
		// Most config has no channels and gets none: nothing to look at.
		return nil, err
	}
	names := make([]string, 0, len(held))
	for _, h := range held {
		names = append(names, h.Name)
	}
	mounting, err := c.inv.PodsReading(ctx, ns, src.Kind, names...)
	if err != nil {
		return nil, err
	}
	l := look{config: src, exists: o.Exists, channelled: delivery.Channelled(o, policy), held: held, mounted: map[string]bool{}}
	for _, h := range held {
		l.mounted[h.Name] = len(mounting[h.Name]) > 0
	}
	if o.Exists {
		l.current = c.inv.SnapshotName(c.opts.Keys.Current().Bytes(), o)
	}
	if l.channelled {
		// Every content a channel takes has a snapshot: a delivery of the
		// next change starts from it (its From), and a rollback writes it
		// back.
		if err := c.opts.Snapshots.Ensure(ctx, ns, revision.Snapshots{src: l.current}); err != nil {
			return nil, fmt.Errorf("writing the snapshot of %s %s/%s that its channels hold: %w", src.Kind, ns, src.Name, err)
		}
		if l.record, err = c.opts.Records.Latest(ctx, ns, src); err != nil {
			return nil, err
		}
		l.waves = policy.Delivery.Waves
	}
	return &plan{look: l, want: contents(l)}, nil
}

// noteOf is the note p's channel of wave is written with: what every
// config planned with it under the same delivery holds in that wave.
func noteOf(plans []*plan, p *plan, wave string, at time.Time) channel.Note {
	n := channel.Note{At: at, Holds: revision.Snapshots{p.config: p.want[wave]}}
	if p.record == nil {
		return n
	}
	n.Record = p.record.Name
	if s := p.record.Spec.ConfigSet; s != nil {
		n.Version = s.Version
	}
	for _, q := range plans {
		if snap, ok := q.want[wave]; ok && q.record != nil && q.record.Name == p.record.Name {
			n.Holds[q.config] = snap
		}
	}
	return n
}

// apply writes p's channels that hold other than they should, each with
// its wave's note, and deletes those it keeps none of.
func (c *channels) apply(ctx context.Context, ns string, p *plan, note func(wave string) channel.Note) error {
	var errs []error
	for wave, snap := range p.want {
		if h, ok := p.held[wave]; ok && h.Content == snap {
			continue
		}
		if err := c.write(ctx, ns, p.config, wave, snap, p.current, p.held[wave], note(wave)); err != nil {
			errs = append(errs, err)
		}
	}
	for wave, h := range p.held {
		if _, kept := p.want[wave]; kept {
			continue
		}
		if err := c.client.Delete(ctx, h.Object); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting channel %s/%s nobody mounts: %w", ns, h.Name, err))
			continue
		}
		channelWrites.WithLabelValues("deleted").Inc()
	}
	return errors.Join(errs...)
}

// write makes the channel of src for wave hold the content of snapshot
// snap: read from the original itself when snap is its current content,
// from the snapshot otherwise.
func (c *channels) write(ctx context.Context, ns string, src revision.Source, wave, snap, current string, held channel.Held, note channel.Note) error {
	from := snap
	if snap == current {
		from = src.Name
	}
	// The values live only in this call: copied, never logged or kept.
	read, content, err := inventory.ReadLive(ctx, c.live, src.Kind, types.NamespacedName{Namespace: ns, Name: from})
	if err != nil {
		return fmt.Errorf("reading %s for channel %s of %s %s/%s: %w", from, channel.Name(src.Name, wave), src.Kind, ns, src.Name, err)
	}
	var obj client.Object
	switch o := read.(type) {
	case *corev1.Secret:
		o.Name = snap
		obj = channel.Secret(o, src.Name, wave, note)
	case *corev1.ConfigMap:
		o.Name = snap
		obj = channel.ConfigMap(o, src.Name, wave, note)
	}
	if from == src.Name && revision.SnapshotName(c.opts.Keys.Current().Bytes(), ns, src.Kind, src.Name, digest.Content(content, nil)) != snap {
		return fmt.Errorf("the content of %s %s/%s changed again before its channel %s was written", src.Kind, ns, src.Name, obj.GetName())
	}
	if held.Object == nil {
		err = c.client.Create(ctx, obj)
	} else {
		obj.SetResourceVersion(held.Object.GetResourceVersion())
		err = c.client.Update(ctx, obj)
	}
	switch {
	case err == nil:
		channelWrites.WithLabelValues("written").Inc()
		ctrl.LoggerFrom(ctx).Info("channel written", "channel", obj.GetName(), "content", snap)
		return nil
	case apierrors.IsAlreadyExists(err):
		// The cache is behind our own create, or an object configward did
		// not write holds the channel's name: that one is named, not
		// retried in silence (the delivery halts on it too).
		existing := inventory.NewObject(src.Kind)
		if gerr := c.live.Get(ctx, client.ObjectKeyFromObject(obj), existing); gerr == nil {
			if _, _, isChannel := channel.Of(existing.GetLabels(), existing.GetAnnotations()); !isChannel {
				channelWrites.WithLabelValues("squatted").Inc()
				c.blocked(ctx, ns, src, obj.GetName(), fmt.Errorf("%s %s/%s exists and is not configward's channel; delete or rename it", src.Kind, ns, obj.GetName()))
				// Tried again with the controller's backoff: deleting the
				// squatter lets the channel be written.
				return fmt.Errorf("channel %s/%s: an object configward did not write holds its name", ns, obj.GetName())
			}
		}
		return err
	case apierrors.IsConflict(err):
		return err // the cache is behind; the next look writes it
	case apierrors.IsForbidden(err):
		channelWrites.WithLabelValues("refused").Inc()
		c.blocked(ctx, ns, src, obj.GetName(), err)
	}
	return fmt.Errorf("writing channel %s/%s: %w", ns, obj.GetName(), err)
}

// blocked records on the config that its channel cannot be written.
func (c *channels) blocked(ctx context.Context, ns string, src revision.Source, name string, err error) {
	o := inventory.NewObject(src.Kind)
	if c.cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.Name}, o) != nil {
		return
	}
	c.events.Eventf(o, nil, corev1.EventTypeWarning, "ConfigChannelBlocked", "WriteChannel",
		"channel %s cannot be written (%v): the pods that mount it keep the content they have until it can", name, err)
}

// look is what the controller saw of one config's channels.
type look struct {
	config revision.Source
	// exists: the original exists; current names the snapshot of its
	// content now.
	exists  bool
	current string
	// channelled: it reaches pods through channels now
	// (delivery.Channelled), by the waves of the policy in force, and
	// record is its latest delivery (nil: none).
	channelled bool
	waves      []v1alpha1.Wave
	record     *v1alpha1.ConfigDelivery
	// held are its channels by wave, and mounted says, by channel name,
	// whether a live pod mounts it.
	held    map[string]channel.Held
	mounted map[string]bool
}

// contents decides the snapshot each channel of the config holds, by wave;
// a channel left out is deleted. Channelled config has a channel for each
// wave of the policy, and keeps one of a wave gone from it while a pod
// mounts it; each holds what its wave should now (delivery.Want), and one
// not written yet the content of now. Otherwise (delivery off, or the
// config no longer hot) the channels pods still mount follow the config as
// it is, or, where the original is gone, keep what they hold.
func contents(l look) map[string]string {
	want := map[string]string{}
	switch {
	case l.channelled:
		content := func(wave, held string) string {
			w := delivery.Want(delivery.Ask{Record: l.record, Config: l.config, Current: l.current, Holder: delivery.Holder{Wave: wave}, Held: held})
			return cmp.Or(w.Revision, l.current)
		}
		for _, w := range l.waves {
			want[w.Name] = content(w.Name, l.held[w.Name].Content)
		}
		for wave, h := range l.held {
			if _, inPolicy := want[wave]; !inPolicy && l.mounted[h.Name] {
				want[wave] = content(wave, h.Content)
			}
		}
	case l.exists:
		for wave, h := range l.held {
			if l.mounted[h.Name] {
				want[wave] = l.current
			}
		}
	default:
		for wave, h := range l.held {
			if l.mounted[h.Name] {
				want[wave] = h.Content
			}
		}
	}
	return want
}
