package reports

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/internal/workloadrules"
)

// findingsEvaluator judges existing objects as admission would judge them
// now, for the Reports: every top-level workload by the rules, every
// ConfigMap a ConfigSchema governs by its schemas. A namespace is judged
// again on every pod event of a rollout, so results are kept per object
// and recomputed only when something they depend on changed: the object
// (its resourceVersion), the rules and policies in force for its namespace
// (Active.Fingerprint), the namespace's config or labels (its epoch), or
// the schemas.
type findingsEvaluator struct {
	cache    client.Reader // the manager's cache
	values   client.Reader // the API server: the cache keeps only digests of ConfigMap values
	inv      *inventory.Inventory
	policies *configpolicy.Store
	schemas  *configschema.Store

	mu     sync.Mutex
	epochs map[string]uint64
	byUID  map[types.UID]evaluated
}

type evaluated struct {
	namespace, key string
	results        []openreports.ReportResult
}

func newFindingsEvaluator(cache, values client.Reader, inv *inventory.Inventory, policies *configpolicy.Store, schemas *configschema.Store) *findingsEvaluator {
	return &findingsEvaluator{cache: cache, values: values, inv: inv, policies: policies, schemas: schemas,
		epochs: map[string]uint64{}, byUID: map[types.UID]evaluated{}}
}

// changed records that the namespace's config or labels changed: every
// result there is computed again.
func (e *findingsEvaluator) changed(namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.epochs[namespace]++
}

func (e *findingsEvaluator) lookup(uid types.UID, key string) ([]openreports.ReportResult, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.byUID[uid]
	return c.results, ok && c.key == key
}

func (e *findingsEvaluator) keep(uid types.UID, namespace, key string, results []openreports.ReportResult) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byUID[uid] = evaluated{namespace: namespace, key: key, results: results}
}

// namespace returns the findings' results of the objects of ns, by UID.
func (e *findingsEvaluator) namespace(ctx context.Context, ns string, workloads []workload.Object) (map[types.UID][]subjectResults, error) {
	nsObj, err := configpolicy.LookupNamespace(ctx, e.cache, ns)
	if err != nil {
		return nil, err
	}
	active := e.policies.Current()
	settings := active.Rules(nsObj)
	// Keyed by what the policies give this namespace, not by the set in
	// force: a policy change elsewhere must not make a namespace of
	// thousands of workloads evaluate every rule again.
	rulesKey := active.Fingerprint(nsObj)
	e.mu.Lock()
	epoch := e.epochs[ns]
	e.mu.Unlock()

	out := map[types.UID][]subjectResults{}
	seen := map[types.UID]bool{}
	add := func(uid types.UID, subject corev1.ObjectReference, results []openreports.ReportResult) {
		seen[uid] = true
		if len(results) > 0 {
			out[uid] = append(out[uid], subjectResults{subject: subject, results: results})
		}
	}
	for _, w := range workloads {
		key := fmt.Sprintf("%s|%s|%d", w.Obj.GetResourceVersion(), rulesKey, epoch)
		results, ok := e.lookup(w.Obj.GetUID(), key)
		if !ok {
			results = e.workloadResults(ctx, w, nsObj, active)
			e.keep(w.Obj.GetUID(), ns, key, results)
		}
		k := w.Type.Kind
		add(w.Obj.GetUID(), report.Subject(k.GroupVersionKind().GroupVersion().String(), k.Kind, ns, w.Obj.GetName(), w.Obj.GetUID()), results)
	}

	var cms corev1.ConfigMapList
	if err := e.cache.List(ctx, &cms, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing configmaps: %w", err)
	}
	// Most namespaces have no ConfigSchema: then only a ConfigMap naming one
	// (which does not exist) has anything to report, and asking the schema
	// store for every ConfigMap on every judgement is wasted.
	var schemas v1alpha1.ConfigSchemaList
	if err := e.cache.List(ctx, &schemas, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing configschemas: %w", err)
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		if _, names := cm.Annotations[v1alpha1.SchemaAnnotation]; len(schemas.Items) == 0 && !names {
			continue
		}
		gov, missing, err := e.schemas.For(ctx, cm)
		if err != nil {
			return nil, err
		}
		if len(gov) == 0 && missing == "" {
			continue
		}
		key := configMapKey(cm.ResourceVersion, rulesKey, epoch, missing, gov)
		results, ok := e.lookup(cm.UID, key)
		if !ok {
			if results, err = e.configMapResults(ctx, cm, settings); err != nil {
				return nil, err
			}
			e.keep(cm.UID, ns, key, results)
		}
		add(cm.UID, report.Subject("v1", "ConfigMap", ns, cm.Name, cm.UID), results)
	}

	e.retain(ns, seen)
	return out, nil
}

// configMapKey is what a governed ConfigMap's cached results depend on:
// its version, the rules in force for its namespace, the namespace's
// epoch, the schema it names that is missing, and each schema that
// governs it, by generation and compile error. Its own function so that
// it is tested without a cluster.
func configMapKey(resourceVersion, rulesKey string, epoch uint64, missing string, gov []configschema.Governing) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%d|%s", resourceVersion, rulesKey, epoch, missing)
	for _, g := range gov {
		fmt.Fprintf(&b, "|%s/%d/%v", g.Name, g.Generation, g.Err)
	}
	return b.String()
}

// retain forgets the results kept for objects of ns that are not among
// seen (deleted, or no longer governed).
func (e *findingsEvaluator) retain(ns string, seen map[types.UID]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for uid, c := range e.byUID {
		if c.namespace == ns && !seen[uid] {
			delete(e.byUID, uid)
		}
	}
}

// workloadResults runs the rules on an existing workload as if it were
// created now. A workload the rules cannot judge gets an error result
// instead of holding up the namespace's other Reports.
func (e *findingsEvaluator) workloadResults(ctx context.Context, w workload.Object, ns *corev1.Namespace, active *configpolicy.Active) []openreports.ReportResult {
	kind := w.Type.Kind.Kind
	spec, err := w.PodSpec()
	if err == nil {
		var j workloadrules.Judgement
		j, err = workloadrules.Judge(ctx, active, workloadrules.Subject{
			Workload: w, Spec: spec, Namespace: ns,
			Request: ruleinput.Request{Operation: "CREATE", Kind: kind, Namespace: w.Obj.GetNamespace(), Name: w.Obj.GetName()},
			Targets: e.inv.Targets(ctx, w.Obj.GetNamespace()),
			// Custom rules read the cached object, which has no managed
			// fields and no inline env values (policies/README).
			Objects: func() ([]byte, []byte, error) {
				object, err := json.Marshal(w.Obj)
				return object, nil, err
			},
		})
		if err == nil {
			return report.FindingResults(j.Outcome)
		}
	}
	ctrl.LoggerFrom(ctx).Error(err, "evaluating rules on an existing workload", "kind", kind, "namespace", w.Obj.GetNamespace(), "name", w.Obj.GetName())
	return []openreports.ReportResult{{Rule: "evaluation", Result: "error", Description: fmt.Sprintf("configward could not evaluate its rules on this %s: %v", kind, err)}}
}

// configMapResults validates a governed ConfigMap's stored values, read
// from the API server, against its schemas.
func (e *findingsEvaluator) configMapResults(ctx context.Context, cached *corev1.ConfigMap, settings rules.Settings) ([]openreports.ReportResult, error) {
	var cm corev1.ConfigMap
	if err := e.values.Get(ctx, client.ObjectKeyFromObject(cached), &cm); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	gov, missing, err := e.schemas.For(ctx, &cm)
	if err != nil {
		return nil, err
	}
	findings := configschema.Findings(&cm, gov, missing)
	return report.FindingResults(rules.Apply(settings, findings, cm.Annotations, rules.Options{})), nil
}
