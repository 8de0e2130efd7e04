package check

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/internal/workloadrules"
)

// Actions check reports besides the rules' own; neither fails the check.
const (
	// Unknown: a reference to an object outside the given manifests.
	Unknown rules.Action = "Unknown"
	// Note: an exemption that does not count, which the webhook returns as
	// a warning.
	Note rules.Action = "Note"
)

// Options tune a check.
type Options struct {
	// Complete says the manifests are every object of their namespaces, so
	// a reference to an object not among them is missing, not unknown.
	Complete bool
	// Namespace is assumed for objects that do not set one.
	Namespace string
	// Kinds are the workload kinds judged: the built-in ones
	// (workload.Builtin, also when nil) plus the custom kinds declared with
	// --workload-kinds, which LoadKinds must have been given too.
	Kinds *workload.Registry
}

// Result is one finding on one manifest.
type Result struct {
	File string `json:"file"`
	// Line and Column are where the finding's field (Path) is written, or
	// its nearest written ancestor, or the object's start.
	Line      int          `json:"line"`
	Column    int          `json:"column"`
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace"`
	Name      string       `json:"name"`
	Rule      string       `json:"rule"`
	Action    rules.Action `json:"action"`
	Path      string       `json:"path,omitempty"`
	Message   string       `json:"message"`
	// objectLine and objectColumn are where the object starts, which
	// tells the object of a result (JUnit groups results by object).
	objectLine, objectColumn int
}

// Run checks the objects with the same rules, ConfigPolicies and schemas as
// admission and returns every finding, ordered by file and line. Policies
// select namespaces by the labels of the Namespace objects among objs (a
// namespace not among them has no labels).
func Run(ctx context.Context, policies *configpolicy.Active, objs []Object, opts Options) ([]Result, error) {
	if opts.Namespace == "" {
		opts.Namespace = metav1.NamespaceDefault
	}
	if opts.Kinds == nil {
		opts.Kinds = workload.Builtin()
	}
	for _, o := range objs {
		switch o.Obj.(type) {
		case *corev1.Namespace, *v1alpha1.ConfigPolicy: // cluster-scoped
			continue
		}
		if o.Obj.GetNamespace() == "" {
			o.Obj.SetNamespace(opts.Namespace)
		}
	}
	set := index(objs)
	var out []Result
	for _, o := range objs {
		rs, err := checkObject(ctx, policies, set, o, opts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", o.File, o.Line, err)
		}
		out = append(out, rs...)
	}
	slices.SortStableFunc(out, func(a, b Result) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Path, b.Path), cmp.Compare(a.Message, b.Message))
	})
	return out, nil
}

type key struct{ kind, namespace, name string }

type objectSet struct {
	byKey      map[key]Object
	schemas    map[string][]*v1alpha1.ConfigSchema // by namespace
	namespaces map[string]*corev1.Namespace
}

func index(objs []Object) objectSet {
	s := objectSet{byKey: map[key]Object{}, schemas: map[string][]*v1alpha1.ConfigSchema{}, namespaces: map[string]*corev1.Namespace{}}
	for _, o := range objs {
		kind := o.Obj.GetObjectKind().GroupVersionKind().Kind
		s.byKey[key{kind, o.Obj.GetNamespace(), o.Obj.GetName()}] = o
		switch t := o.Obj.(type) {
		case *v1alpha1.ConfigSchema:
			s.schemas[t.Namespace] = append(s.schemas[t.Namespace], t)
		case *corev1.Namespace:
			s.namespaces[t.Name] = t
		}
	}
	return s
}

func checkObject(ctx context.Context, policies *configpolicy.Active, set objectSet, o Object, opts Options) ([]Result, error) {
	settings := policies.Rules(set.namespaces[o.Obj.GetNamespace()])
	switch obj := o.Obj.(type) {
	case *corev1.ConfigMap:
		return checkConfigMap(set, o, obj, opts, settings), nil
	case *v1alpha1.ConfigPolicy:
		if _, err := configpolicy.Compile(ctx, obj); err != nil {
			return []Result{result(o, rules.Finding{Rule: "configpolicy", Message: fmt.Sprintf("ConfigPolicy %s: %v", obj.Name, err)}, rules.Deny)}, nil
		}
		return nil, nil
	case *v1alpha1.ConfigSchema:
		if _, err := configschema.Compile(obj); err != nil {
			return []Result{result(o, configschema.CompileFailure(obj, err), rules.Deny)}, nil
		}
		return nil, nil
	}
	w, ok := opts.Kinds.For(o.Obj)
	if !ok {
		return nil, nil
	}
	// A manifest is judged whatever owner it names: it is what a person
	// applies, and the webhook judges a controlled object on its own unless
	// its owner's controller writes it (workloadrules.JudgedAsOwned).
	kind, ns := w.Type.Kind.Kind, o.Obj.GetNamespace()
	spec, err := w.PodSpec()
	if err != nil {
		// As the webhook refuses it: a template the rules cannot read is
		// not judged as empty.
		return []Result{result(o, rules.Finding{Rule: "evaluation", Path: strings.Join(w.Type.PodSpecPath(), "."), Message: fmt.Sprintf(
			"%s %s/%s: %v, so its pod template cannot be judged. Fix the template.", kind, ns, o.Obj.GetName(), err)}, rules.Deny)}, nil
	}
	j, err := workloadrules.Judge(ctx, policies, workloadrules.Subject{
		Workload: w, Spec: spec, Namespace: set.namespaces[ns],
		Request: ruleinput.Request{Operation: "CREATE", Kind: kind, Namespace: ns, Name: o.Obj.GetName()},
		Targets: func(k refs.Kind, name string) (ruleinput.Target, error) {
			return set.target(k, ns, name, opts.Complete), nil
		},
		Objects: func() ([]byte, []byte, error) {
			raw, err := json.Marshal(o.Obj)
			return raw, nil, err
		},
	})
	if err != nil {
		return nil, err
	}
	var unknown []Result
	for _, r := range j.References {
		if !r.Target.Known && !r.Optional {
			unknown = append(unknown, result(o, rules.Finding{Rule: rules.MissingConfigRef, Path: r.Path, Message: fmt.Sprintf(
				"%s %s/%s references %s %q (%s), which is not among the given manifests; pass --complete if they are every object of the namespace.",
				kind, ns, o.Obj.GetName(), r.Kind, r.Name, r.Path)}, Unknown))
		}
	}
	return append(dedupe(unknown), results(o, j.Outcome)...), nil
}

func (s objectSet) target(k refs.Kind, ns, name string, complete bool) ruleinput.Target {
	o, ok := s.byKey[key{string(k), ns, name}]
	if !ok {
		return ruleinput.Target{Known: complete, Reload: string(inventory.Rollout)}
	}
	mode, _ := inventory.ModeOf(o.Obj.GetAnnotations())
	t := ruleinput.Target{Known: true, Exists: true, Reload: string(mode)}
	// Key names only: Secret values never leave the manifest.
	switch obj := o.Obj.(type) {
	case *corev1.ConfigMap:
		t.Immutable = ptr.Deref(obj.Immutable, false)
		t.Keys = append(slices.Collect(maps.Keys(obj.Data)), slices.Collect(maps.Keys(obj.BinaryData))...)
	case *corev1.Secret:
		t.Immutable = ptr.Deref(obj.Immutable, false)
		t.Keys = append(slices.Collect(maps.Keys(obj.Data)), slices.Collect(maps.Keys(obj.StringData))...)
	}
	slices.Sort(t.Keys)
	t.Keys = slices.Compact(t.Keys)
	return t
}

func checkConfigMap(set objectSet, o Object, cm *corev1.ConfigMap, opts Options, settings rules.Settings) []Result {
	named := cm.Annotations[v1alpha1.SchemaAnnotation]
	found := named == ""
	var governing []configschema.Governing
	for _, cs := range set.schemas[cm.Namespace] {
		if cs.Name == named {
			found = true
		}
		if !configschema.Governs(cs, cm.Name, cm.Labels, cm.Annotations) {
			continue
		}
		c, err := configschema.Compile(cs)
		governing = append(governing, configschema.Governing{Name: cs.Name, Compiled: c, Generation: cs.Generation, Err: err})
	}
	missing := ""
	var out []Result
	if !found {
		if opts.Complete {
			missing = named
		} else {
			out = append(out, result(o, rules.Finding{Rule: rules.ConfigSchema, Path: "metadata.annotations", Message: fmt.Sprintf(
				"ConfigMap %s/%s names ConfigSchema %q, which is not among the given manifests; pass --complete if they are every object of the namespace.",
				cm.Namespace, cm.Name, named)}, Unknown))
		}
	}
	findings := configschema.Findings(cm, governing, missing)
	return append(out, results(o, rules.Apply(settings, findings, cm.Annotations, rules.Options{}))...)
}

// results is the one way an outcome becomes check's results, in the words
// the webhook uses.
func results(o Object, out rules.Outcome) []Result {
	var rs []Result
	for action, fs := range map[rules.Action][]rules.Finding{rules.Deny: out.Denied, rules.Warn: out.Warned, rules.Audit: out.Audited, Note: out.Notes} {
		for _, f := range fs {
			rs = append(rs, result(o, f, action))
		}
	}
	return rs
}

func result(o Object, f rules.Finding, a rules.Action) Result {
	line, column := o.position(f.Path)
	return Result{
		File: o.File, Line: line, Column: column, Kind: o.Obj.GetObjectKind().GroupVersionKind().Kind,
		Namespace: o.Obj.GetNamespace(), Name: o.Obj.GetName(),
		Rule: f.Rule, Action: a, Path: f.Path, Message: f.Message,
		objectLine: o.Line, objectColumn: o.Column,
	}
}

func dedupe(rs []Result) []Result {
	seen := map[string]bool{}
	var out []Result
	for _, r := range rs {
		if k := r.Path + "\x00" + r.Message; !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}
