package inventory

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// Snapshots names the snapshot that each config a revision of a pod spec
// reads (of consumed, what the spec consumes: refs.ConsumedBy) gets for its
// content now: every object it consumes whose contents are kept as
// revisions (KeptAsRevisions; Secrets too, with secrets). A consumed object
// that does not exist gets none (the pod names the original, and waits for
// it as it always has). Names are keyed with key, the installation's key.
//
// A pinned object gets its pin (see TemplateHash).
func (inv *Inventory) Snapshots(ctx context.Context, key []byte, namespace string, consumed []refs.Consumption, secrets bool, pins revision.Snapshots) (revision.Snapshots, error) {
	out := revision.Snapshots{}
	for _, c := range consumed {
		if c.Kind == refs.Secret && !secrets {
			continue
		}
		o, err := inv.pinned(ctx, c.Kind, namespace, c.Name, pins)
		if err != nil {
			return nil, err
		}
		if !KeptAsRevisions(o, secrets) {
			continue // a snapshot itself is pinned as it is
		}
		src := revision.Source{Kind: c.Kind, Name: c.Name}
		if pin, ok := pins[src]; ok {
			out[src] = pin
			continue
		}
		out[src] = inv.SnapshotName(key, o)
	}
	return out, nil
}

// SnapshotName is the name of the snapshot of o's content now.
func (inv *Inventory) SnapshotName(key []byte, o Object) string {
	return revision.SnapshotName(key, o.Namespace, o.Kind, o.Name, digest.Content(o.KeyDigests, nil))
}

// SnapshotWritten reports whether the snapshot named snap of src is in the
// cache as configward writes it: immutable, labelled, a copy of src. It is
// asked for every snapshot of every pod of a revision, so Start keeps an
// index of snapshots (written as the informers deliver them) that answers
// without copying or unpacking the cached object.
func (inv *Inventory) SnapshotWritten(ctx context.Context, namespace string, src revision.Source, snap string) (bool, error) {
	if inv.snapshots != nil {
		return inv.snapshots.written(src.Kind, namespace, snap, src.Name), nil
	}
	o, err := inv.Get(ctx, src.Kind, namespace, snap)
	if err != nil || !o.Exists {
		return false, err
	}
	of, ok := revision.SnapshotOf(o.Labels, o.Annotations)
	return ok && of == src.Name && o.Immutable, nil
}

// snapshotIndex holds every snapshot the informers have delivered, by
// kind, namespace and name, with what it copies.
type snapshotIndex struct{ m sync.Map }

type snapshotKey struct {
	kind            refs.Kind
	namespace, name string
}

func (x *snapshotIndex) written(kind refs.Kind, namespace, name, of string) bool {
	v, ok := x.m.Load(snapshotKey{kind, namespace, name})
	return ok && v.(string) == of
}

// watch keeps the index of kind's objects from the informer's events.
func (x *snapshotIndex) watch(informer cache.Informer, kind refs.Kind) error {
	set := func(o any) {
		obj, ok := o.(client.Object)
		if !ok {
			return
		}
		k := snapshotKey{kind, obj.GetNamespace(), obj.GetName()}
		of, isSnapshot := revision.SnapshotOf(obj.GetLabels(), obj.GetAnnotations())
		if isSnapshot && immutable(obj) {
			x.m.Store(k, of)
		} else {
			x.m.Delete(k)
		}
	}
	_, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, o any) { set(o) },
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if obj, ok := o.(client.Object); ok {
				x.m.Delete(snapshotKey{kind, obj.GetNamespace(), obj.GetName()})
			}
		},
	})
	return err
}

func immutable(obj client.Object) bool {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return isTrue(o.Immutable)
	case *corev1.Secret:
		return isTrue(o.Immutable)
	}
	return false
}
