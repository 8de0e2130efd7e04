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
)

// bigDeployment has 10 containers and 20 references: per container one
// ConfigMap through envFrom and one Secret key through env; ConfigMap 3 is
// hot (so hot-config-in-env fires) and every Secret is readable by env.
func bigDeployment() (*appsv1.Deployment, []Reference) {
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
	var out []Reference
	for _, r := range refs.FromPodSpec(&d.Spec.Template.Spec) {
		reload := "rollout"
		if r.Name == "cm-3" {
			reload = "hot"
		}
		r.Path = RootPath(r.Path, "spec.template.spec")
		out = append(out, Reference{Ref: r, Target: Target{Exists: true, Keys: []string{"password", "x"}, Reload: reload}})
	}
	return d, out
}

func bigInput(t testing.TB) Input {
	d, references := bigDeployment()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(references) != 20 {
		t.Fatalf("want 20 references, got %d", len(references))
	}
	return Input{
		Request:    Request{Operation: "CREATE", Username: "alice", Kind: "Deployment", Namespace: "shop", Name: "big"},
		Object:     raw,
		Workload:   Workload{Kind: "Deployment", Namespace: "shop", Name: "big"},
		References: references,
	}
}

func TestBuiltinRulesOnABigDeployment(t *testing.T) {
	version, err := Compile(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := bigInput(t).Value(version)
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
	if count[HotConfigInEnv] != 1 || count[SecretInEnv] != 10 || len(count) != 2 {
		t.Fatalf("findings by rule: %v", count)
	}
	d := Settings{}.Decide(fs)
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
	in := Input{Object: []byte(`{"metadata":{"name":"x"}}`)}
	v, err := Compile(ctx, mk("Deny"))
	if err != nil {
		t.Fatal(err)
	}
	val, err := in.Value(v)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := v.Eval(ctx, val)
	if err != nil || len(fs) != 1 || fs[0].Rule != "team-label" || (Settings{}).ActionFor(fs[0]) != Deny {
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

func TestSettingsPrecedence(t *testing.T) {
	s := Settings{Actions: map[string]Action{SecretInEnv: Deny}}
	for _, tc := range []struct {
		f    Finding
		want Action
	}{
		{Finding{Rule: SecretInEnv}, Deny},
		{Finding{Rule: SubpathConfig, Action: Warn}, Warn},
		{Finding{Rule: SecretFileMode}, Audit},
		{Finding{Rule: "custom-thing"}, Warn},
	} {
		if got := s.ActionFor(tc.f); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.f.Rule, got, tc.want)
		}
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
		in   Input
		want int
	}{{"findings", bigInput(b), 11}, {"clean", clean, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := bc.in.Value(version)
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

func TestWarningIsOneLine(t *testing.T) {
	got := Warning(Finding{Rule: ConfigSchema, Message: "ConfigMap a/b breaks ConfigSchema \"s\" (2 violations):\n  key \"x\": bad\n  key \"y\": worse"})
	want := `[config-schema] ConfigMap a/b breaks ConfigSchema "s" (2 violations): key "x": bad; key "y": worse`
	if got != want {
		t.Errorf("Warning = %q\nwant %q", got, want)
	}
}
