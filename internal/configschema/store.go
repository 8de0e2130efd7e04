// Package configschema holds the ConfigSchemas in force, compiled, and
// answers which of them govern a ConfigMap. Every generation is compiled as
// soon as the informer delivers it (Watch), not when a ConfigMap first needs
// it, so that a generation that does not compile (stored while the webhook
// was not enforcing) leaves the last good one in force. Entries are replaced,
// never changed, so a request always sees one consistent version of each
// schema. A process that starts when only a broken generation is stored has
// no good one to fall back to and refuses the ConfigMaps it governs.
package configschema

import (
	"context"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/valueschema"
)

// Validate checks a ConfigSchema and compiles it. Every problem is a field
// error with its exact path under spec: admission answers them all at once
// (422 Invalid), and the controller's Ready condition says the same.
func Validate(cs *v1alpha1.ConfigSchema) (*valueschema.Compiled, field.ErrorList) {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if cs.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(cs.Spec.Selector); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("selector"), field.OmitValueType{}, err.Error()))
		}
	}
	spec := valueschema.Spec{AllowUndeclaredKeys: cs.Spec.AllowUndeclaredKeys}
	for _, k := range cs.Spec.Keys {
		rule := valueschema.KeyRule{Name: k.Name, Pattern: k.Pattern, Format: valueschema.Format(k.Format), Required: k.Required}
		if k.Schema != nil {
			rule.Schema = k.Schema.Raw
		}
		spec.Keys = append(spec.Keys, rule)
	}
	c, keyErrs := valueschema.Compile(spec, specPath.Child("keys"))
	if errs = append(errs, keyErrs...); len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// Compile is Validate with every problem in one error.
func Compile(cs *v1alpha1.ConfigSchema) (*valueschema.Compiled, error) {
	c, errs := Validate(cs)
	return c, errs.ToAggregate()
}

// Governs reports whether cs governs the ConfigMap with this name, labels
// and annotations.
func Governs(cs *v1alpha1.ConfigSchema, name string, lbls, annotations map[string]string) bool {
	if annotations[v1alpha1.SchemaAnnotation] == cs.Name || slices.Contains(cs.Spec.ConfigMapNames, name) {
		return true
	}
	if cs.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(cs.Spec.Selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(lbls))
}

// Governing is one schema that governs a ConfigMap.
type Governing struct {
	Name string
	// Compiled is the version in force; nil when no generation of the
	// schema ever compiled.
	Compiled *valueschema.Compiled
	// Generation of the version in force.
	Generation int64
	// Err is why the newest generation is not in force, if it is not.
	Err error
}

type entry struct {
	generation int64 // newest generation seen
	err        error // its compile error
	good       *valueschema.Compiled
	goodGen    int64
}

// Store compiles and caches ConfigSchemas read from reader.
type Store struct {
	reader  client.Reader
	mu      sync.Mutex
	entries map[types.UID]*entry
}

// New returns a store over a cache that has a ConfigSchema informer.
func New(reader client.Reader) *Store {
	return &Store{reader: reader, entries: map[types.UID]*entry{}}
}

// Watch compiles every ConfigSchema the informer adds or updates, and
// forgets deleted ones. The returned function reports, for readiness,
// whether every schema listed at start has been compiled.
func (s *Store) Watch(informer cache.Informer) (synced func() bool, err error) {
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj) },
		UpdateFunc: func(_, obj any) { s.observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if cs, ok := obj.(*v1alpha1.ConfigSchema); ok {
				s.mu.Lock()
				delete(s.entries, cs.UID)
				s.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return reg.HasSynced, nil
}

func (s *Store) observe(obj any) {
	if cs, ok := obj.(*v1alpha1.ConfigSchema); ok {
		s.mu.Lock()
		s.compiled(cs)
		s.mu.Unlock()
	}
}

// For returns the schemas governing cm, and the name from its
// configward.dev/schema annotation when no such schema exists.
func (s *Store) For(ctx context.Context, cm *corev1.ConfigMap) (gov []Governing, missing string, err error) {
	var list v1alpha1.ConfigSchemaList
	if err := s.reader.List(ctx, &list, client.InNamespace(cm.Namespace)); err != nil {
		return nil, "", err
	}
	named := cm.Annotations[v1alpha1.SchemaAnnotation]
	found := named == ""
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range list.Items {
		cs := &list.Items[i]
		if cs.Name == named {
			found = true
		}
		if !Governs(cs, cm.Name, cm.Labels, cm.Annotations) {
			continue
		}
		// Normally compiled already by Watch; compiling here covers a
		// request that races the informer's event handler.
		e := s.compiled(cs)
		g := Governing{Name: cs.Name, Compiled: e.good, Generation: e.goodGen}
		if e.err != nil {
			g.Err = e.err
		}
		gov = append(gov, g)
	}
	if !found {
		missing = named
	}
	return gov, missing, nil
}

// LabelKeys lists the label keys the ConfigSchemas of a namespace select
// ConfigMaps by: changing one of them on a ConfigMap can put it under a
// schema or take it out of one's reach.
func (s *Store) LabelKeys(ctx context.Context, namespace string) ([]string, error) {
	var list v1alpha1.ConfigSchemaList
	if err := s.reader.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var keys []string
	for _, cs := range list.Items {
		if sel := cs.Spec.Selector; sel != nil {
			keys = append(keys, slices.Collect(maps.Keys(sel.MatchLabels))...)
			for _, e := range sel.MatchExpressions {
				keys = append(keys, e.Key)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// compiled returns the entry for cs, compiling its generation if new.
func (s *Store) compiled(cs *v1alpha1.ConfigSchema) *entry {
	e, ok := s.entries[cs.UID]
	if ok && e.generation == cs.Generation {
		return e
	}
	next := &entry{generation: cs.Generation}
	if ok {
		next.good, next.goodGen = e.good, e.goodGen
	}
	if c, err := Compile(cs); err != nil {
		next.err = err
	} else {
		next.good, next.goodGen = c, cs.Generation
	}
	s.entries[cs.UID] = next
	return next
}
