package inventory

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/secretversions"
	"github.com/configward/configward/internal/workload"
)

// Mode is a reload mode.
type Mode string

const (
	// Rollout (the default): consumers read it at start, so a content change
	// must roll them.
	Rollout Mode = v1alpha1.ReloadRollout
	// Hot: consumers watch the mounted files and reload by themselves.
	Hot Mode = v1alpha1.ReloadHot
	// Ignore: nobody needs to react to changes.
	Ignore Mode = v1alpha1.ReloadIgnore
)

// ModeOf reads the reload mode from annotations. An unknown value counts as
// Rollout, the mode that can at worst restart more than needed; ok is false
// so callers can report the typo.
func ModeOf(annotations map[string]string) (m Mode, ok bool) {
	switch v := Mode(annotations[v1alpha1.ReloadAnnotation]); v {
	case "", Rollout:
		return Rollout, true
	case Hot, Ignore:
		return v, true
	default:
		return Rollout, false
	}
}

// Object is what the inventory knows of one ConfigMap or Secret.
type Object struct {
	Kind      refs.Kind
	Namespace string
	Name      string
	Exists    bool
	// KeyDigests maps each key to its digest (digest.KeyDigests).
	KeyDigests map[string]string
	// Keys are the key names, sorted, where only they were asked for
	// (Targets); nil otherwise.
	Keys        []string
	Mode        Mode
	Immutable   bool
	Type        corev1.SecretType
	Labels      map[string]string
	Annotations map[string]string
	// ResourceVersion is the object's as the cache holds it.
	ResourceVersion string
}

// Inventory answers questions about ConfigMaps and Secrets from the cache.
type Inventory struct {
	reader client.Reader
	// kinds are the workload kinds whose informers (with the consumer
	// index) run; reg knows how to read them.
	kinds []workload.Kind
	reg   *workload.Registry
	// snapshots indexes the config snapshots the informers deliver (see
	// SnapshotWritten); nil for an inventory over a reader without them.
	snapshots *snapshotIndex
	// classes says the Secrets Store CSI driver's SecretProviderClasses are
	// served and watched (their metadata only); without, nothing is known
	// of them.
	classes bool
}

// Over is the inventory of a reader that is a cache configured with
// CacheOptions and indexed (IndexConsumers) for kinds of reg: what Start
// returns once it has registered the informers. Tests build one over a
// fake cache indexed the same way.
func Over(reader client.Reader, reg *workload.Registry, kinds []workload.Kind) *Inventory {
	return &Inventory{reader: reader, reg: reg, kinds: kinds}
}

// WatchedKinds are the workload kinds Consumers can answer for: those Start
// was given, less declared kinds whose CRD was not served.
func (inv *Inventory) WatchedKinds() []workload.Kind { return inv.kinds }

// Registry is the registry of workload kinds the inventory reads with.
func (inv *Inventory) Registry() *workload.Registry { return inv.reg }

// CacheOptions configures the manager's cache: values are digested on the
// way in, managed fields are dropped, and informers are never started
// lazily, so a read the cache is not prepared for fails instead of silently
// turning into a slow first request.
func CacheOptions() cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Transform: TransformConfigMap},
			&corev1.Secret{}:    {Transform: TransformSecret},
			&corev1.Pod{}:       {Transform: TransformPod},
			// Read only where revisions are on (WatchHistory).
			&appsv1.ControllerRevision{}: {Transform: TransformControllerRevision},
		},
		DefaultTransform:            TransformWorkload,
		ReaderFailOnMissingInformer: true,
	}
}

// SetByObject sets the cache's settings for obj's kind, replacing any it
// had. The ByObject map is keyed by pointer, so a second key of one type
// is a second entry, and the cache builds each kind's informer from
// whichever entry it meets last in the map's random order: each process
// start would pick one of the two transforms by chance.
func SetByObject(opts *cache.Options, obj client.Object, settings cache.ByObject) {
	for k := range opts.ByObject {
		if reflect.TypeOf(k) == reflect.TypeOf(obj) {
			delete(opts.ByObject, k)
		}
	}
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[obj] = settings
}

// Get returns what is known of one object; Exists is false when it is not
// in the cache. It reads the cache's own object, not a copy (every review
// reads each object it references): Labels and Annotations are the
// cache's maps, to read and never to write.
func (inv *Inventory) Get(ctx context.Context, kind refs.Kind, namespace, name string) (Object, error) {
	return inv.get(ctx, kind, namespace, name, readDigests)
}

// Exists reports whether one object is in the cache, without reading its
// digests.
func (inv *Inventory) Exists(ctx context.Context, kind refs.Kind, namespace, name string) (bool, error) {
	o, err := inv.get(ctx, kind, namespace, name, readExistence)
	return o.Exists, err
}

// reading is how much of an object's packed digests get reads: every
// review reads each object it references, and the rules need only the
// key names.
type reading int

const (
	readExistence reading = iota
	readKeys              // Object.Keys
	readDigests           // Object.KeyDigests
)

func (inv *Inventory) get(ctx context.Context, kind refs.Kind, namespace, name string, read reading) (Object, error) {
	o := Object{Kind: kind, Namespace: namespace, Name: name}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	switch kind {
	case refs.ConfigMap:
		var cm corev1.ConfigMap
		if err := inv.reader.Get(ctx, key, &cm, client.UnsafeDisableDeepCopy); err != nil {
			return o, ignoreNotFound(err)
		}
		if err := o.readPacked(cm.Data[packedKey], read); err != nil {
			return o, err
		}
		o.Exists, o.Immutable = true, isTrue(cm.Immutable)
		o.Labels, o.Annotations, o.ResourceVersion = cm.Labels, cm.Annotations, cm.ResourceVersion
	case refs.Secret:
		var s corev1.Secret
		if err := inv.reader.Get(ctx, key, &s, client.UnsafeDisableDeepCopy); err != nil {
			return o, ignoreNotFound(err)
		}
		if err := o.readPacked(string(s.Data[packedKey]), read); err != nil {
			return o, err
		}
		o.Exists, o.Immutable, o.Type = true, isTrue(s.Immutable), s.Type
		o.Labels, o.Annotations, o.ResourceVersion = s.Labels, s.Annotations, s.ResourceVersion
	case refs.SecretProviderClass:
		if !inv.classes {
			return o, nil
		}
		c := ClassMetadata()
		if err := inv.reader.Get(ctx, key, c, client.UnsafeDisableDeepCopy); err != nil {
			return o, ignoreNotFound(err)
		}
		o.Exists, o.Labels, o.Annotations = true, c.Labels, c.Annotations
	default:
		return o, fmt.Errorf("inventory: unknown kind %q", kind)
	}
	o.Mode, _ = ModeOf(o.Annotations)
	return o, nil
}

// readPacked reads of an object's packed digests what read asks for.
func (o *Object) readPacked(packed string, read reading) error {
	var err error
	switch read {
	case readKeys:
		o.Keys, err = packedKeys(packed)
	case readDigests:
		o.KeyDigests, err = unpack(packed)
	}
	return err
}

// TemplateHash computes the pod-template hash of a pod spec in a namespace
// from what it consumes (refs.ConsumedBy) and the SecretProviderClasses it
// mounts (refs.CSIClasses): every rollout-mode ConfigMap/Secret it
// consumes, restricted to the keys it consumes. A referenced object that
// does not exist (yet) counts as missing, optional or not, so its creation
// changes the hash. counted is the number
// of objects that took part; zero means there is nothing to stamp. Without
// includeSecrets (a ConfigPolicy's rollouts.excludeSecrets), Secrets take no
// part. key is the installation's key (internal/hashkey).
//
// pins name, for some consumed objects, the snapshot whose content counts
// instead of the object's own (a consumer a delivery has not reached keeps
// the revision it runs): the entry keeps the object's name, so the hash is
// the one the template carried when the object had that content.
//
// rotated maps the SecretProviderClasses the spec mounts through the
// Secrets Store CSI driver to the digest of the versions their last
// rotation rolled to (secretversions.Record.Rolled, from the workload's
// record): each rollout-mode one takes part with it, as a Secret would,
// and one never rotated takes no part, so recording a baseline never
// changes the hash (and a caller without rotations may pass no classes).
func (inv *Inventory) TemplateHash(ctx context.Context, key []byte, namespace string, consumed []refs.Consumption, classes []string, includeSecrets bool, pins revision.Snapshots, rotated map[string]string) (hash string, counted int, err error) {
	var entries []digest.Entry
	if includeSecrets {
		for _, name := range classes {
			if rotated[name] == "" {
				continue
			}
			if o, err := inv.Get(ctx, refs.SecretProviderClass, namespace, name); err != nil {
				return "", 0, err
			} else if o.Exists && o.Mode != Rollout {
				continue
			}
			entries = append(entries, digest.Entry{Kind: string(refs.SecretProviderClass), Name: name, Content: rotated[name]})
		}
	}
	for _, c := range consumed {
		if c.Kind == refs.Secret && !includeSecrets {
			continue
		}
		o, err := inv.pinned(ctx, c.Kind, namespace, c.Name, pins)
		if err != nil {
			return "", 0, err
		}
		if !o.Exists {
			entries = append(entries, digest.Entry{Kind: string(c.Kind), Name: c.Name, Missing: true})
			continue
		}
		if o.Mode != Rollout {
			continue
		}
		entries = append(entries, digest.Entry{Kind: string(c.Kind), Name: c.Name, Content: digest.Content(o.KeyDigests, c.Keys)})
	}
	if len(entries) == 0 {
		return "", 0, nil
	}
	return digest.PodTemplateHash(key, namespace, entries), len(entries), nil
}

// pinned is what the inventory knows of an object, with the content of
// its pin where pins name a snapshot for it. A pin whose snapshot is not in
// the cache is an error, never the object's current content: a consumer a
// delivery has not reached must not take the new content by accident. An
// object that is gone may be pinned too (the revision that reads it keeps
// its snapshot): it then counts as the rollout-mode content it had.
func (inv *Inventory) pinned(ctx context.Context, kind refs.Kind, namespace, name string, pins revision.Snapshots) (Object, error) {
	o, err := inv.Get(ctx, kind, namespace, name)
	snap, ok := pins[revision.Source{Kind: kind, Name: name}]
	if err != nil || !ok {
		return o, err
	}
	s, err := inv.Get(ctx, kind, namespace, snap)
	if err != nil {
		return o, err
	}
	if of, isSnapshot := revision.SnapshotOf(s.Labels, s.Annotations); !s.Exists || !isSnapshot || of != name {
		return o, fmt.Errorf("%s %s/%s is pinned to snapshot %s, which is not in the cache", kind, namespace, name, snap)
	}
	if !o.Exists {
		o.Exists, o.Mode, o.Type = true, Rollout, s.Type
	}
	o.KeyDigests = s.KeyDigests
	return o, nil
}

// CSIClasses says whether SecretProviderClasses are served and watched.
func (inv *Inventory) CSIClasses() bool { return inv.classes }

// ClassMetadata is an empty SecretProviderClass, of which the cache keeps
// the metadata only: existence and the reload annotation are all
// configward reads of it.
func ClassMetadata() *metav1.PartialObjectMetadata {
	c := &metav1.PartialObjectMetadata{}
	c.SetGroupVersionKind(secretversions.ClassKind)
	return c
}

// ConsumersIndex is the cache index from a workload to the ConfigMaps and
// Secrets it consumes and the SecretProviderClasses it mounts, as
// "ConfigMap/<name>", "Secret/<name>" and "SecretProviderClass/<name>".
const ConsumersIndex = "configward.dev/consumes"

// IndexValue is the ConsumersIndex value of one ConfigMap, Secret or
// SecretProviderClass.
func IndexValue(kind refs.Kind, name string) string { return string(kind) + "/" + name }

// IndexConsumers registers ConsumersIndex for every workload kind.
func IndexConsumers(ctx context.Context, indexer client.FieldIndexer, reg *workload.Registry, kinds []workload.Kind) error {
	for _, k := range kinds {
		if err := indexConsumers(ctx, indexer, reg, k); err != nil {
			return err
		}
	}
	return nil
}

func indexConsumers(ctx context.Context, indexer client.FieldIndexer, reg *workload.Registry, k workload.Kind) error {
	t, ok := reg.Type(k.GroupKind())
	if !ok {
		return fmt.Errorf("%s is not a workload kind", k.GroupKind())
	}
	if err := indexer.IndexField(ctx, t.New(), ConsumersIndex, consumedBy(reg)); err != nil {
		return fmt.Errorf("indexing %s by consumed config: %w", k.GroupKind(), err)
	}
	return nil
}

func consumedBy(reg *workload.Registry) client.IndexerFunc {
	return func(obj client.Object) []string {
		w, ok := reg.For(obj)
		if !ok {
			return nil
		}
		// A template that is no pod spec consumes nothing configward can
		// name; admission refuses it, and the spec read is empty.
		spec, _ := w.PodSpec()
		cs := refs.ConsumedBy(spec)
		classes := refs.CSIClasses(spec)
		out := make([]string, 0, len(cs)+len(classes))
		for _, c := range cs {
			out = append(out, IndexValue(c.Kind, c.Name))
		}
		for _, c := range classes {
			out = append(out, IndexValue(refs.SecretProviderClass, c))
		}
		return out
	}
}

// Consumers lists the workloads of the given kinds in namespace that consume
// the ConfigMap or Secret.
func (inv *Inventory) Consumers(ctx context.Context, kinds []workload.Kind, kind refs.Kind, namespace, name string) ([]client.Object, error) {
	var out []client.Object
	for _, k := range kinds {
		t, ok := inv.reg.Type(k.GroupKind())
		if !ok {
			return nil, fmt.Errorf("%s is not a workload kind", k.GroupKind())
		}
		list := t.NewList()
		if err := inv.reader.List(ctx, list, client.InNamespace(namespace),
			client.MatchingFields{ConsumersIndex: IndexValue(kind, name)}); err != nil {
			return nil, err
		}
		items := workload.Items(list)
		out = append(out, items...)
	}
	return out, nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func isTrue(b *bool) bool { return b != nil && *b }

// Targets answers the rules' questions about the ConfigMaps and Secrets a
// workload of namespace references, from the cache; no API call is made.
func (inv *Inventory) Targets(ctx context.Context, namespace string) ruleinput.TargetLookup {
	return func(k refs.Kind, name string) (ruleinput.Target, error) {
		o, err := inv.get(ctx, k, namespace, name, readKeys)
		if err != nil {
			return ruleinput.Target{}, err
		}
		if k == refs.SecretProviderClass && !inv.classes {
			return ruleinput.Target{Reload: string(Rollout)}, nil // not served: unknown, never missing
		}
		keys := o.Keys
		if keys == nil { // gone: an empty list, as the rules' input has always had
			keys = []string{}
		}
		return ruleinput.Target{Known: true, Exists: o.Exists, Keys: keys, Reload: string(o.Mode), Immutable: o.Immutable}, nil
	}
}
