// Package ruleinputtest holds the rule inputs that tests and benchmarks of
// the rules share.
package ruleinputtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/ruleinput"
)

// BigDeployment has 10 containers and 20 references: per container one
// ConfigMap through envFrom and one Secret key through env; ConfigMap 3 is
// hot (so hot-config-in-env fires) and every Secret is readable by env.
func BigDeployment() (*appsv1.Deployment, []ruleinput.Reference) {
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

func BigInput(t testing.TB) ruleinput.Input {
	d, references := BigDeployment()
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

// Benchmark is one input of the rules benchmarks and the number of findings
// the built-in rules make of it.
type Benchmark struct {
	Name string
	In   ruleinput.Input
	Want int
}

// Benchmarks are one admission's worth of rule evaluation for the
// Deployment of 10 containers with 20 references: "findings" has a hot
// ConfigMap in env and a Secret in env in every container (11 findings,
// each a formatted message); "clean" has the same references with nothing
// to report.
func Benchmarks(t testing.TB) []Benchmark {
	clean := BigInput(t)
	clean.References = slices.Clone(clean.References)
	for i := range clean.References {
		clean.References[i].Kind, clean.References[i].Target.Reload = refs.ConfigMap, "rollout"
	}
	return []Benchmark{{"findings", BigInput(t), 11}, {"clean", clean, 0}}
}
