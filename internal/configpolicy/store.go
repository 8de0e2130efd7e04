package configpolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation/field"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/regoengine"
)

var (
	loads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configward_policy_loads_total",
		Help: "ConfigPolicy generations the webhook tried to put in force, by result: loaded, or failed (the last good generation stays in force).",
	}, []string{"result"})
	activeVersion = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configward_policy_active_info",
		Help: "1 for the hash of the rule set in force (built-in rules plus every ConfigPolicy's custom rules).",
	}, []string{"hash"})
)

func init() { metrics.Registry.MustRegister(loads, activeVersion) }

// Active is one consistent set of policies in force: the compiled rules and
// the policies their settings come from. Requests take it once and use it
// throughout.
type Active struct {
	Version  *regoengine.Version
	policies []*Compiled // sorted by name
}

// Store holds the policies in force.
type Store struct {
	log    logr.Logger
	mu     sync.Mutex // serialises loads
	good   map[string]*Compiled
	active atomic.Pointer[Active]
	// onChange are called after each change of the set in force.
	onChange []func()
	// outcomes holds, per policy, the last generation tried and why it is
	// not in force (nil when it is). A generation that failed only with the
	// others is kept in waiting and tried again whenever the set changes:
	// deleting the policy it clashed with puts it in force.
	outcomes map[string]Outcome
	waiting  map[string]*v1alpha1.ConfigPolicy
}

// Outcome is what became of the last generation of a policy the store saw.
type Outcome struct {
	Generation int64
	// Problems say why that generation is not in force; none when it is.
	Problems field.ErrorList
}

// New starts with the built-in rules and no policy.
func New(ctx context.Context, log logr.Logger) (*Store, error) {
	v, err := regoengine.Compile(ctx, nil)
	if err != nil {
		return nil, err
	}
	s := &Store{log: log, good: map[string]*Compiled{}, outcomes: map[string]Outcome{}, waiting: map[string]*v1alpha1.ConfigPolicy{}}
	s.publish(&Active{Version: v})
	return s, nil
}

// Current is the set in force.
func (s *Store) Current() *Active { return s.active.Load() }

// OnChange registers f to be called after every change of the set in force,
// for whatever derives from it (namespace labels, policy status). f must not
// block: it runs while the store holds its lock.
func (s *Store) OnChange(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = append(s.onChange, f)
}

func (s *Store) publish(a *Active) {
	old := s.active.Swap(a)
	if old != nil {
		activeVersion.DeleteLabelValues(old.Version.Hash)
	}
	activeVersion.WithLabelValues(a.Version.Hash).Set(1)
	for _, f := range s.onChange {
		f()
	}
}

// Watch loads every ConfigPolicy the informer adds or updates, and forgets
// deleted ones. The returned function reports, for readiness, whether the
// policies listed at start have been loaded.
func (s *Store) Watch(informer cache.Informer) (synced func() bool, err error) {
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj) },
		UpdateFunc: func(_, obj any) { s.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cp, ok := obj.(*v1alpha1.ConfigPolicy); ok {
				s.Forget(cp.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return reg.HasSynced, nil
}

func (s *Store) observe(obj any) {
	if cp, ok := obj.(*v1alpha1.ConfigPolicy); ok {
		_ = s.Load(context.Background(), cp)
	}
}

// Load puts a generation of a policy in force if it compiles, alone and
// with the others; otherwise the policy's last good generation stays.
func (s *Store) Load(ctx context.Context, cp *v1alpha1.ConfigPolicy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.load(ctx, cp)
	if err == nil {
		s.retryWaiting(ctx)
	}
	return err
}

func (s *Store) load(ctx context.Context, cp *v1alpha1.ConfigPolicy) error {
	if g, ok := s.good[cp.Name]; ok && g.Generation == cp.Generation {
		return nil
	}
	delete(s.waiting, cp.Name) // this generation replaces any older one waiting
	c, problems := Validate(ctx, cp)
	if len(problems) == 0 {
		err := s.conflicts(ctx, c)
		if err == nil {
			next := maps.Clone(s.good)
			next[cp.Name] = c
			err = s.swap(ctx, next)
		}
		if err != nil {
			problems = field.ErrorList{withOthers(err)}
			s.waiting[cp.Name] = cp.DeepCopy()
		}
	}
	s.outcomes[cp.Name] = Outcome{Generation: cp.Generation, Problems: problems}
	err := problems.ToAggregate()
	if err != nil {
		loads.WithLabelValues("failed").Inc()
		kept := "none (built-in defaults apply where it selects)"
		if g, ok := s.good[cp.Name]; ok {
			kept = "generation " + itoa(g.Generation) + " (" + g.Hash[:12] + ")"
		}
		s.log.Error(err, "ConfigPolicy generation not loaded; the last good generation stays in force",
			"policy", cp.Name, "generation", cp.Generation, "inForce", kept)
		return err
	}
	loads.WithLabelValues("loaded").Inc()
	s.log.Info("ConfigPolicy loaded", "policy", cp.Name, "generation", cp.Generation, "hash", c.Hash,
		"activeRules", s.Current().Version.Hash)
	return nil
}

// retryWaiting tries once more every generation that failed only with the
// others, now that the set has changed.
func (s *Store) retryWaiting(ctx context.Context) {
	for _, name := range slices.Sorted(maps.Keys(s.waiting)) {
		_ = s.load(ctx, s.waiting[name])
	}
}

// conflicts reports a custom rule id c declares that another policy in
// force declares too: a custom id belongs to one ConfigPolicy, or the two
// would write into each other's Rego package.
func (s *Store) conflicts(_ context.Context, c *Compiled) error {
	for _, other := range slices.Sorted(maps.Keys(s.good)) {
		if other == c.Name {
			continue
		}
		for _, id := range c.customIDs() {
			if slices.Contains(s.good[other].customIDs(), id) {
				return fmt.Errorf("custom rule id %q is declared by ConfigPolicy %q too; a custom rule id belongs to one ConfigPolicy", id, other)
			}
		}
	}
	return nil
}

// Check validates a generation as Load would put it in force: alone, then
// with the other policies in force. Admission refuses what it reports, so
// a policy that cannot be in force is never stored. With none, it returns
// the set that would be in force with this generation, so admission can
// ask what the write would change for a namespace (Active.For).
func (s *Store) Check(ctx context.Context, cp *v1alpha1.ConfigPolicy) (*Active, field.ErrorList) {
	c, errs := Validate(ctx, cp)
	if len(errs) > 0 {
		return nil, errs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.conflicts(ctx, c); err != nil {
		return nil, field.ErrorList{withOthers(err)}
	}
	next := maps.Clone(s.good)
	next[cp.Name] = c
	a, err := activeOf(ctx, next)
	if err != nil {
		return nil, field.ErrorList{withOthers(err)}
	}
	return a, nil
}

// withOthers is the problem of a policy that is valid alone but cannot be
// in force with the others.
func withOthers(err error) *field.Error {
	return field.Invalid(field.NewPath("spec", "customRules"), field.OmitValueType{},
		"cannot be in force with the other ConfigPolicies: "+err.Error())
}

// OutcomeOf says what became of the last generation of the policy the
// store saw, and whether it saw any.
func (s *Store) OutcomeOf(name string) (Outcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.outcomes[name]
	return o, ok
}

// InForce returns the generation of a policy in force, if any.
func (s *Store) InForce(name string) (*Compiled, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.good[name]
	return c, ok
}

// Forget takes a deleted policy out of force.
func (s *Store) Forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.outcomes, name)
	delete(s.waiting, name)
	if _, ok := s.good[name]; !ok {
		return
	}
	next := maps.Clone(s.good)
	delete(next, name)
	if err := s.swap(context.Background(), next); err != nil {
		s.log.Error(err, "ConfigPolicy deleted, but the remaining policies did not compile; the previous set stays in force", "policy", name)
		return
	}
	s.log.Info("ConfigPolicy removed", "policy", name, "activeRules", s.Current().Version.Hash)
	s.retryWaiting(context.Background())
}

// swap compiles the rules of a set of policies and puts the set in force.
func (s *Store) swap(ctx context.Context, set map[string]*Compiled) error {
	a, err := activeOf(ctx, set)
	if err != nil {
		return err
	}
	s.good = set
	s.publish(a)
	return nil
}

// activeOf compiles the rules of a set of policies into the set that would
// be in force: what Check asks about and swap puts in force.
func activeOf(ctx context.Context, set map[string]*Compiled) (*Active, error) {
	var modules []regoengine.CustomModule
	var list []*Compiled
	for _, name := range slices.Sorted(maps.Keys(set)) {
		list = append(list, set[name])
		modules = append(modules, set[name].modules...)
	}
	v, err := regoengine.Compile(ctx, modules)
	if err != nil {
		return nil, err
	}
	return &Active{Version: v, policies: list}, nil
}
