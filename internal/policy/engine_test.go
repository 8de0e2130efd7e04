package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/rules"
)

// bigDeployment has 10 containers and 20 references: per container one
// ConfigMap through envFrom and one Secret key through env; ConfigMap 3 is
// hot (so hot-config-in-env fires) and every Secret is readable by env.
func bigDeployment() (*appsv1.Deployment, []ruleinput.Reference) {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "shop"},
	}
	for i := range 10 {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "app",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("cm-%d", i)}}}},
			Env: []corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("secret-%d", i)}, Key: "password"}}}},
		})
	}
	var out []ruleinput.Reference
	for _, r := range refs.FromPodSpec(&d.Spec.Template.Spec) {
		reload := "rollout"
		if r.Name == "cm-3" {
			reload = "hot"
		}
		r.Path = ruleinput.RootPath(r.Path, "spec.template.spec")
		out = append(out, ruleinput.Reference{Ref: r, Target: ruleinput.Target{Exists: true, Keys: []string{"password", "x"}, Reload: reload}})
	}
	return d, out
}

func bigInput(t testing.TB) ruleinput.Input {
	d, references := bigDeployment()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(references) != 20 {
		t.Fatalf("want 20 references, got %d", len(references))
	}
	return ruleinput.Input{
		Request:    ruleinput.Request{Operation: "CREATE", Username: "alice", Kind: "Deployment", Namespace: "shop", Name: "big"},
		Object:     raw,
		Workload:   ruleinput.Workload{Kind: "Deployment", Namespace: "shop", Name: "big"},
		References: references,
	}
}

func TestBuiltinRulesOnABigDeployment(t *testing.T) {
	version, err := Compile(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := bigInput(t).Value(version.WantsObjects)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := version.Eval(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, f := range fs {
		count[f.Rule]++
	}
	if count[rules.HotConfigInEnv] != 1 || count[rules.SecretInEnv] != 10 || len(count) != 2 {
		t.Fatalf("findings by rule: %v", count)
	}
	d := rules.Settings{}.Decide(fs)
	if len(d.Denied) != 1 || len(d.Warned) != 10 {
		t.Fatalf("decision: %d denied, %d warned", len(d.Denied), len(d.Warned))
	}
}

func TestCompileReportsBrokenRegoWithItsLine(t *testing.T) {
	_, err := Compile(context.Background(), map[string]string{
		"custom/broken.rego": "package configward.custom.broken\n\nfindings contains f if {\n\tf := \n}\n",
	})
	if err == nil || !strings.Contains(err.Error(), "custom/broken.rego:") {
		t.Fatalf("want a compile error naming the file and line, got %v", err)
	}
}

func TestCustomRuleFindingsAndBadActions(t *testing.T) {
	mk := func(action string) map[string]string {
		return map[string]string{"custom/team.rego": `package configward.custom.team
findings contains {"rule": "team-label", "path": "metadata.labels", "message": "needs a team label", "action": "` + action + `"} if {
	not input.object.metadata.labels.team
}`}
	}
	ctx := context.Background()
	in := ruleinput.Input{Object: []byte(`{"metadata":{"name":"x"}}`)}
	v, err := Compile(ctx, mk("Deny"))
	if err != nil {
		t.Fatal(err)
	}
	val, err := in.Value(v.WantsObjects)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := v.Eval(ctx, val)
	if err != nil || len(fs) != 1 || fs[0].Rule != "team-label" || (rules.Settings{}).ActionFor(fs[0]) != rules.Deny {
		t.Fatalf("custom finding: %v, %v", fs, err)
	}
	v, err = Compile(ctx, mk("deny"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Eval(ctx, val); err == nil || !strings.Contains(err.Error(), `unknown action "deny"`) {
		t.Fatalf("want an unknown-action error, got %v", err)
	}
}

func TestVersionsDifferInHash(t *testing.T) {
	ctx := context.Background()
	before, err := Compile(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Compile(ctx, map[string]string{"custom/x.rego": "package configward.custom.x\nfindings := set()\n"})
	if err != nil {
		t.Fatal(err)
	}
	if before.Hash == v.Hash || !v.WantsObjects || before.WantsObjects {
		t.Fatal("a version with custom modules must differ in hash and want objects")
	}
}

// BenchmarkBuiltinRules measures one admission's worth of rule evaluation
// for a Deployment of 10 containers with 20 references: building the input
// document and evaluating every rule. "findings" has a hot ConfigMap in env
// and a Secret in env in every container (11 findings, each a formatted
// message); "clean" has the same references with nothing to report.
func BenchmarkBuiltinRules(b *testing.B) {
	ctx := context.Background()
	version, err := Compile(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	clean := bigInput(b)
	clean.References = slices.Clone(clean.References)
	for i := range clean.References {
		clean.References[i].Kind, clean.References[i].Target.Reload = refs.ConfigMap, "rollout"
	}
	for _, bc := range []struct {
		name string
		in   ruleinput.Input
		want int
	}{{"findings", bigInput(b), 11}, {"clean", clean, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := bc.in.Value(version.WantsObjects)
				if err != nil {
					b.Fatal(err)
				}
				fs, err := version.Eval(ctx, v)
				if err != nil || len(fs) != bc.want {
					b.Fatalf("%d findings (%v), want %d", len(fs), err, bc.want)
				}
			}
		})
	}
}
