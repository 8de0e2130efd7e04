package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Declaration declares a custom workload kind: a CRD whose objects carry a
// pod template configward stamps, rolls and judges like a Deployment's. A
// platform team writes a list of them in the chart's values (workloadKinds);
// every process reads the same list from the file --workload-kinds names.
type Declaration struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	// PodTemplatePath is the dotted path of the pod template (a
	// PodTemplateSpec: metadata and spec), e.g. spec.template.
	PodTemplatePath string `json:"podTemplatePath"`
	// TemplateRefPath, when the object holds a reference there (an Argo
	// Rollout's spec.workloadRef), means the object takes its pod template
	// from another object and must not be stamped.
	TemplateRefPath string `json:"templateRefPath,omitempty"`
	// NotRolledWhen lists conditions under which the kind's own controller
	// does not replace running pods when the template changes (a paused
	// Rollout), so configward says so instead of claiming a rollout.
	NotRolledWhen []Condition `json:"notRolledWhen,omitempty"`
	// Controllers are the users the kind's controller writes as (e.g.
	// system:serviceaccount:argo-rollouts:argo-rollouts): what an object of
	// the kind controls (a Rollout's ReplicaSets) is judged at its owner
	// only when one of them writes it. Without them it is judged on its
	// own, like anything a person creates.
	Controllers []string `json:"controllers,omitempty"`
}

// Condition is true when the value at Path, as a string ("true" for a
// boolean), equals Equals. Why and Until complete, for people, "running pods
// keep the old config: <Why>; they get the new one when <Until>".
type Condition struct {
	Path   string `json:"path"`
	Equals string `json:"equals"`
	Why    string `json:"why"`
	Until  string `json:"until,omitempty"`
}

// LoadDeclarations reads a declaration file (a YAML list) and returns the
// registry of the built-in kinds plus the declared ones. An empty path is
// the built-in registry.
func LoadDeclarations(path string) (*Registry, error) {
	if path == "" {
		return Builtin(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading workload kinds: %w", err)
	}
	decls, err := ParseDeclarations(data)
	if err != nil {
		return nil, fmt.Errorf("workload kinds in %s: %w", path, err)
	}
	return NewRegistry(decls)
}

// ParseDeclarations parses a YAML list of declarations strictly: an unknown
// field is an error (a misspelt notRolledWhen would otherwise be silently
// ignored, and a paused Rollout reported as rolled), and so is every
// declaration NewRegistry would refuse.
func ParseDeclarations(data []byte) ([]Declaration, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	const shape = "{group, version, kind, resource, podTemplatePath, templateRefPath, notRolledWhen, controllers}"
	var entries []json.RawMessage
	if err := json.Unmarshal(js, &entries); err != nil {
		return nil, fmt.Errorf("expected a list of %s", shape)
	}
	decls := make([]Declaration, len(entries))
	for i, e := range entries {
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&decls[i]); err != nil {
			return nil, fmt.Errorf("workload kind %d: %s (each is %s)", i+1, decodeProblem(err), shape)
		}
	}
	if _, err := NewRegistry(decls); err != nil {
		return nil, err
	}
	return decls, nil
}

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	versionName  = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
	kindName     = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	resourceName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	pathSegment  = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

func (d *Declaration) describe() string {
	if d.Kind == "" && d.Group == "" {
		return "unnamed"
	}
	if d.Group == "" {
		return d.Kind
	}
	return d.Kind + "." + d.Group
}

// validate checks one declaration on its own; NewRegistry checks that it
// collides with no other kind.
func (d *Declaration) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(d.Group != "", "group is required (custom kinds are CRDs, which always have one)")
	check(d.Group == "" || dnsSubdomain.MatchString(d.Group), "group %q is not a DNS subdomain", d.Group)
	check(versionName.MatchString(d.Version), "version %q is not a Kubernetes API version (v1, v1alpha1, ...)", d.Version)
	check(kindName.MatchString(d.Kind), "kind %q must be a CamelCase name", d.Kind)
	check(d.Resource != "", "resource is required (the plural resource name, e.g. rollouts: the chart's webhook rules and RBAC need it)")
	check(d.Resource == "" || resourceName.MatchString(d.Resource), "resource %q must be a lowercase plural name", d.Resource)
	if err := checkPath(d.PodTemplatePath); err != nil {
		errs = append(errs, fmt.Errorf("podTemplatePath: %w", err))
	}
	if d.TemplateRefPath != "" {
		if err := checkPath(d.TemplateRefPath); err != nil {
			errs = append(errs, fmt.Errorf("templateRefPath: %w", err))
		}
	}
	for i, c := range d.NotRolledWhen {
		if err := checkPath(c.Path); err != nil {
			errs = append(errs, fmt.Errorf("notRolledWhen[%d].path: %w", i, err))
		}
		check(c.Why != "", "notRolledWhen[%d].why is required: it is what the Event tells people", i)
		check(c.Equals != "", "notRolledWhen[%d].equals is required: the value of path that holds the pods back, quoted (\"true\")", i)
	}
	for i, c := range d.Controllers {
		check(strings.TrimSpace(c) == c && c != "", "controllers[%d] %q must be a user name as the API server authenticates it (system:serviceaccount:<namespace>:<name>)", i, c)
		check(c != ControllerManager, "controllers[%d]: %s writes only for the built-in kinds", i, c)
	}
	if d.Group != "" {
		if _, builtinKind := builtin.byGK[d.GroupKind()]; builtinKind {
			errs = append(errs, fmt.Errorf("%s is a built-in workload kind; declare only custom kinds", d.GroupKind()))
		}
	}
	return errors.Join(errs...)
}

func checkPath(p string) error {
	if p == "" {
		return errors.New("the path is empty")
	}
	for _, s := range strings.Split(p, ".") {
		if !pathSegment.MatchString(s) {
			return fmt.Errorf("%q is not a dotted field path (e.g. spec.template)", p)
		}
	}
	return nil
}

// GroupKind is the declared kind's GroupKind.
func (d *Declaration) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: d.Group, Kind: d.Kind}
}

func (d *Declaration) templateRefPath() []string { return strings.Split(d.TemplateRefPath, ".") }

// hold evaluates notRolledWhen: the first condition that holds says why
// the kind's controller leaves running pods alone.
func (d *Declaration) hold(u *unstructured.Unstructured) Hold {
	for _, c := range d.NotRolledWhen {
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, strings.Split(c.Path, ".")...)
		if !found || err != nil || fmt.Sprint(v) != c.Equals {
			continue
		}
		until := c.Until
		if until == "" {
			until = c.Path + " no longer equals " + c.Equals
		}
		return Hold{Reason: "declared", Why: c.Why, Until: until}
	}
	return Hold{}
}

// decodeProblem words a JSON decoding error for people: encoding/json names
// Go types ("cannot unmarshal bool into Go struct field Condition...").
func decodeProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		hint := ""
		if typeErr.Value == "bool" || typeErr.Value == "number" {
			hint = ` (quote it: "true")`
		}
		return fmt.Sprintf("%s: expected %s, not %s%s", typeErr.Field, jsonKind(typeErr.Type), typeErr.Value, hint)
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + field
	}
	return err.Error()
}
