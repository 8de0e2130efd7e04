// Package effects is the ledger of what admission decisions leave behind
// (Events, metrics) until they are confirmed: a decision about a write is
// recorded only once the write is known to have happened.
package effects

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/slimobject"
	"github.com/configward/configward/internal/workload"
)

// Ledger decides when what a decision leaves behind — Events, metrics — is
// recorded. When the webhook authenticates its callers (only the API server
// can call), every request is real and effects are recorded at once.
// Otherwise anyone who can reach the port could send a fabricated review
// and have configward write Events blaming any user name or inflate its
// metrics; so effects wait until the cache shows the request took effect
// (the object created, changed or deleted as the request said) and are
// dropped when it does not within effectTTL. A refusal changes nothing the
// cache could show, so without authenticated callers refusals are logged
// but not counted.
type Ledger struct {
	trusted bool
	now     func() time.Time
	// cached is what the webhook's cache makes of an object: the ledger
	// compares a review's object with the cache's version in that form.
	cached inventory.WebhookTransforms

	mu      sync.Mutex
	pending map[effectKey][]pendingEffect
	count   int
}

type effectKey struct{ kind, namespace, name string }

type pendingEffect struct {
	uid    types.UID // empty matches any: a create seen before the API server assigned one
	oldRV  string    // the object must have moved past it; empty for creates
	delete bool
	// content is the fingerprint (see contentOf) the version the write
	// stored must have. Without it, a fabricated update would be
	// confirmed by the next real write to the same object.
	content string
	until   time.Time
	do      func()
}

// effectTTL is how long an effect waits for the cache. The cache sees a
// write within a second; a minute allows for a slow API server.
const effectTTL = time.Minute

// maxPending bounds the effects waiting, so fabricated reviews cannot grow
// memory: beyond it new ones are dropped.
const maxPending = 10000

// New returns an empty ledger; trusted says the webhook authenticates its
// callers, kinds are the workload kinds of the webhook's cache
// (inventory.WebhookCacheOptions).
func New(trusted bool, kinds *workload.Registry) *Ledger {
	return &Ledger{trusted: trusted, now: time.Now, pending: map[effectKey][]pendingEffect{},
		cached: inventory.WebhookTransforms{Registry: kinds}}
}

// Record runs do for a request that decided to let obj through: at once
// when callers are authenticated (or e is nil), else once the cache shows
// the write. do gets a copy of obj that has only its identity (kind, name,
// namespace, UID), enough to hang an Event on: what waits for the cache
// never holds the request's content, Secret values included. Dry runs
// record nothing.
func (e *Ledger) Record(req admission.Request, obj client.Object, do func(ref client.Object)) {
	if ptr.Deref(req.DryRun, false) || obj == nil {
		return
	}
	ref := identityOf(obj)
	if e == nil || e.trusted {
		do(ref)
		return
	}
	if obj.GetName() == "" {
		return // nothing the cache could ever confirm
	}
	p := pendingEffect{uid: obj.GetUID(), content: e.contentOf(obj), until: e.now().Add(effectTTL), do: func() { do(ref) }}
	switch req.Operation {
	case "UPDATE":
		p.oldRV = obj.GetResourceVersion()
	case "DELETE":
		p.delete = true
	}
	e.wait(effectKey{req.Kind.Kind, keyNamespace(req.Kind.Kind, req.Namespace), obj.GetName()}, p)
}

// Refusal runs do for a request that was refused: only when callers are
// authenticated, since a refusal leaves nothing to confirm.
func (e *Ledger) Refusal(req admission.Request, do func()) {
	if ptr.Deref(req.DryRun, false) {
		return
	}
	if e == nil || e.trusted {
		do()
	}
}

// contentOf fingerprints what the webhook's cache keeps of obj (see the
// inventory's transforms), leaving out what the API server sets when it
// stores a write: identity, versions, timestamps. The same function runs
// on the object a review describes and on the version the cache shows
// (the transforms leave an object they made as it is).
func (e *Ledger) contentOf(obj client.Object) string {
	var kept any = obj.DeepCopyObject()
	switch obj.(type) {
	case *corev1.ConfigMap:
		kept, _ = inventory.TransformConfigMap(kept)
	case *corev1.Secret:
		kept, _ = inventory.TransformSecret(kept)
	case *corev1.Pod:
		kept, _ = e.cached.Pod(kept)
	case *corev1.Namespace:
		// cached as it is
	default:
		kept, _ = e.cached.Workload(kept)
	}
	// A workload or Pod in a review is decoded slim (see slimobject): the
	// cached version is compared as the same projection.
	ro, ok := kept.(runtime.Object)
	if !ok {
		return ""
	}
	projected, err := slimobject.Project(ro)
	if err != nil {
		return ""
	}
	o, ok := projected.(client.Object)
	if !ok {
		return ""
	}
	o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	o.SetUID("")
	o.SetNamespace("")
	o.SetResourceVersion("")
	o.SetGeneration(0)
	o.SetCreationTimestamp(metav1.Time{})
	o.SetManagedFields(nil)
	b, err := json.Marshal(o)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// identityOf returns an empty object of obj's type with obj's identity.
func identityOf(obj client.Object) client.Object {
	ref := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	ref.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	ref.SetName(obj.GetName())
	ref.SetNamespace(obj.GetNamespace())
	ref.SetUID(obj.GetUID())
	ref.SetResourceVersion(obj.GetResourceVersion())
	return ref
}

func keyNamespace(kind, namespace string) string {
	if kind == "Namespace" {
		return "" // a Namespace is cluster-scoped, whatever the request says
	}
	return namespace
}

func (e *Ledger) wait(k effectKey, p pendingEffect) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.count >= maxPending {
		e.expire()
		if e.count >= maxPending {
			return
		}
	}
	e.pending[k] = append(e.pending[k], p)
	e.count++
}

// expire drops the effects whose time is up. Callers hold mu.
func (e *Ledger) expire() {
	now := e.now()
	for k, ps := range e.pending {
		kept := ps[:0]
		for _, p := range ps {
			if now.Before(p.until) {
				kept = append(kept, p)
			}
		}
		e.count -= len(ps) - len(kept)
		if len(kept) == 0 {
			delete(e.pending, k)
		} else {
			e.pending[k] = kept
		}
	}
}

// Watch confirms pending effects on objects of kind from the informer's
// events.
func (e *Ledger) Watch(informer cache.Informer, kind string) error {
	if e.trusted {
		return nil
	}
	_, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.observe(kind, o, false) },
		UpdateFunc: func(_, o any) { e.observe(kind, o, false) },
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			e.observe(kind, o, true)
		},
	})
	return err
}

func (e *Ledger) observe(kind string, o any, deleted bool) {
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	k := effectKey{kind, keyNamespace(kind, obj.GetNamespace()), obj.GetName()}
	var due []func()
	e.mu.Lock()
	ps := e.pending[k]
	kept := ps[:0]
	now := e.now()
	content := ""
	for _, p := range ps {
		switch {
		case !now.Before(p.until):
			// expired
		case p.delete != deleted || (p.uid != "" && p.uid != obj.GetUID()) || (p.oldRV != "" && p.oldRV == obj.GetResourceVersion()):
			kept = append(kept, p) // not this write's version yet
		case p.delete:
			due = append(due, p.do)
		default:
			// The first version after the one the review started from is
			// the one its write stored (a write that lost a race is
			// admitted again). Another content means the review described
			// a write that never happened.
			if content == "" {
				content = e.contentOf(obj)
			}
			if content == p.content {
				due = append(due, p.do)
			}
		}
	}
	e.count -= len(ps) - len(kept)
	if len(kept) == 0 {
		delete(e.pending, k)
	} else {
		e.pending[k] = kept
	}
	e.mu.Unlock()
	for _, do := range due {
		do()
	}
}
