package builtinrules_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/builtinrules"
	"github.com/configward/configward/internal/check"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/regoengine"
	"github.com/configward/configward/internal/ruleinput"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
)

// The parity suite: the built-in rules in Go and in Rego (policies/, the
// documented contract) must find the same findings, with the same
// messages, paths and actions, in every input. Its inputs are the
// fixtures below, the manifests the docs, demo and e2e apply
// (config/samples) and the check fixtures, the fuzz corpora of manifests
// and admission bodies, and generated ones (TestParityOnGeneratedInputs,
// FuzzParity).

var builtinRego = sync.OnceValues(func() (*regoengine.Version, error) {
	return regoengine.Compile(context.Background(), nil)
})

// sameFindings fails t where Go and Rego differ on in.
func sameFindings(t testing.TB, what string, in ruleinput.Input) {
	t.Helper()
	version, err := builtinRego()
	if err != nil {
		t.Fatal(err)
	}
	value, err := in.Value(false)
	if err != nil {
		t.Fatal(err)
	}
	want, err := version.EvalBuiltin(context.Background(), value)
	if err != nil {
		t.Fatalf("%s: the Rego rules failed: %v", what, err)
	}
	got := builtinrules.Findings(in)
	rules.SortFindings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: the Go rules differ from the Rego rules\ninput: %+v\nGo:   %s\nRego: %s", what, in, describe(got), describe(want))
	}
}

func describe(fs []rules.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\n  %s %s %s: %s", f.Rule, f.Action, f.Path, f.Message)
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// TestParityOnFixtures covers each branch of each rule once on purpose.
func TestParityOnFixtures(t *testing.T) {
	deploy := ruleinput.Workload{Kind: "Deployment", Namespace: "shop", Name: "web"}
	ref := func(kind refs.Kind, via refs.Via, path string, mod func(*ruleinput.Reference)) ruleinput.Reference {
		r := ruleinput.Reference{Ref: refs.Ref{Kind: kind, Name: "settings", Via: via, Path: path, Container: "app", ContainerType: refs.Regular},
			Target: ruleinput.Target{Known: true, Exists: true, Keys: []string{"a"}, Reload: "rollout"}}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	hot := func(r *ruleinput.Reference) { r.Target.Reload = "hot" }
	for name, in := range map[string]ruleinput.Input{
		"nothing": {Workload: deploy},
		"hot in env": {Workload: deploy, References: []ruleinput.Reference{
			ref(refs.ConfigMap, refs.Env, "spec.template.spec.containers[0].env[0]", func(r *ruleinput.Reference) { hot(r); r.Keys = []string{"a"} }),
			ref(refs.ConfigMap, refs.EnvFrom, "spec.template.spec.containers[0].envFrom[0]", hot),
			ref(refs.ConfigMap, refs.Env, "spec.template.spec.initContainers[0].env[0]", func(r *ruleinput.Reference) { hot(r); r.ContainerType = refs.Init }),
		}},
		"secret in env": {Workload: deploy, References: []ruleinput.Reference{
			ref(refs.Secret, refs.Env, "spec.template.spec.containers[0].env[0]", func(r *ruleinput.Reference) { r.Keys = []string{"password"} }),
			ref(refs.Secret, refs.EnvFrom, "spec.template.spec.ephemeralContainers[0].envFrom[0]", func(r *ruleinput.Reference) { r.ContainerType = refs.Ephemeral }),
		}},
		"subPath": {Workload: ruleinput.Workload{Kind: "StatefulSet", Namespace: "db", Name: "pg", RolloutDisabled: true}, References: []ruleinput.Reference{
			ref(refs.ConfigMap, refs.Volume, "spec.template.spec.volumes[0]", func(r *ruleinput.Reference) {
				hot(r)
				r.SubPath, r.MountPath, r.MountFieldPath = "app.conf", "/etc/app.conf", "spec.template.spec.containers[0].volumeMounts[0]"
			}),
			ref(refs.ConfigMap, refs.Projected, "spec.template.spec.volumes[1].projected.sources[0]", func(r *ruleinput.Reference) {
				r.SubPathExpr, r.MountFieldPath = "$(POD)", "spec.template.spec.containers[0].volumeMounts[1]"
			}),
			ref(refs.ConfigMap, refs.Volume, "spec.template.spec.volumes[2]", func(r *ruleinput.Reference) { r.Container = ""; r.SubPath = "x" }),
		}},
		"secret file mode": {Workload: deploy, References: []ruleinput.Reference{
			ref(refs.Secret, refs.Volume, "spec.template.spec.volumes[0]", func(r *ruleinput.Reference) { r.MaxMode = 0o644 }),
			ref(refs.Secret, refs.Volume, "spec.template.spec.volumes[0]", func(r *ruleinput.Reference) { r.MaxMode = 0o644; r.Container = "sidecar" }),
			ref(refs.Secret, refs.Projected, "spec.template.spec.volumes[1].projected.sources[0]", func(r *ruleinput.Reference) { r.MaxMode = 0o400 }),
		}},
		"missing": {Workload: deploy, References: []ruleinput.Reference{
			ref(refs.ConfigMap, refs.Volume, "spec.template.spec.volumes[0]", func(r *ruleinput.Reference) { r.Target = ruleinput.Target{Known: true} }),
			ref(refs.ConfigMap, refs.Volume, "spec.template.spec.volumes[1]", func(r *ruleinput.Reference) { r.Target = ruleinput.Target{} }),
			ref(refs.Secret, refs.Env, "spec.template.spec.containers[0].env[0]", func(r *ruleinput.Reference) { r.Keys = []string{"b", "a", "c"} }),
			ref(refs.Secret, refs.Env, "spec.template.spec.containers[0].env[1]", func(r *ruleinput.Reference) { r.Keys = []string{"b"}; r.Optional = true }),
			ref(refs.SecretProviderClass, refs.CSI, "spec.template.spec.volumes[2]", func(r *ruleinput.Reference) { r.Target = ruleinput.Target{Known: true} }),
		}},
	} {
		sameFindings(t, name, in)
	}
}

// TestParityOnManifests judges every workload of the samples the docs and
// the demo apply and of check's fixtures, with the ConfigMaps and Secrets
// of the same files as targets and then with each of the facts a target
// can have forced on all of them.
func TestParityOnManifests(t *testing.T) {
	var paths []string
	for _, dir := range []string{"../../config/samples", "../check/testdata"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".json")) {
				paths = append(paths, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	workloads := 0
	for _, path := range paths {
		objs, err := check.Load([]string{path}, nil)
		if err != nil {
			continue // a fixture of a bad manifest
		}
		workloads += judgeAll(t, path, objs)
	}
	if workloads < 10 {
		t.Fatalf("only %d workloads in %d files: the manifests moved?", workloads, len(paths))
	}
}

// TestParityOnFuzzCorpora judges the manifests kept in check's fuzz corpus
// and the objects of the admission bodies kept in the webhook's.
func TestParityOnFuzzCorpora(t *testing.T) {
	entries, workloads := 0, 0
	for _, dir := range []string{"../check/testdata/fuzz/FuzzLoadManifests", "../admission/testdata/fuzz/FuzzWebhookBodies"} {
		files, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			for _, data := range corpusValues(t, f) {
				entries++
				if obj := admissionObject(data); obj != nil {
					data = obj
				}
				if objs, err := check.Load([]string{"-"}, bytes.NewReader(data)); err == nil {
					workloads += judgeAll(t, f, objs)
				}
			}
		}
	}
	if entries == 0 || workloads == 0 {
		t.Fatalf("%d fuzz corpus entries, %d workloads in them", entries, workloads)
	}
	t.Logf("%d fuzz corpus entries, %d workloads in them", entries, workloads)
}

// TestParityOnGeneratedInputs judges inputs drawn from small sets of
// values, so that names, paths and keys collide as they do in real pod
// specs and every branch of every rule is taken many times.
func TestParityOnGeneratedInputs(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		data := make([]byte, 64+rng.IntN(512))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		sameFindings(t, "generated input "+strconv.Itoa(i), generate(data))
	}
}

// FuzzParity is the generated inputs' suite, driven by the fuzzer.
func FuzzParity(f *testing.F) {
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, 40))
	f.Fuzz(func(t *testing.T, data []byte) { sameFindings(t, "fuzzed input", generate(data)) })
}

// judgeAll compares the rules on every workload of objs, under several
// sets of target facts, and returns how many workloads it found.
func judgeAll(t *testing.T, what string, objs []check.Object) int {
	t.Helper()
	given := map[string]ruleinput.Target{}
	for _, o := range objs {
		var keys []string
		switch c := o.Obj.(type) {
		case *corev1.ConfigMap:
			for k := range c.Data {
				keys = append(keys, k)
			}
			for k := range c.BinaryData {
				keys = append(keys, k)
			}
		case *corev1.Secret:
			for k := range c.Data {
				keys = append(keys, k)
			}
			for k := range c.StringData {
				keys = append(keys, k)
			}
		default:
			continue
		}
		slices.Sort(keys)
		kind := o.Obj.GetObjectKind().GroupVersionKind().Kind
		given[o.Obj.GetNamespace()+"/"+kind+"/"+o.Obj.GetName()] = ruleinput.Target{Known: true, Exists: true, Keys: keys,
			Reload: o.Obj.GetAnnotations()[v1alpha1.ReloadAnnotation]}
	}
	facts := map[string]func(ns string, kind refs.Kind, name string) ruleinput.Target{
		"as given": func(ns string, kind refs.Kind, name string) ruleinput.Target {
			if t, ok := given[ns+"/"+string(kind)+"/"+name]; ok {
				return t
			}
			return ruleinput.Target{Known: true}
		},
		"unknown": func(string, refs.Kind, string) ruleinput.Target { return ruleinput.Target{} },
		"hot, no keys": func(string, refs.Kind, string) ruleinput.Target {
			return ruleinput.Target{Known: true, Exists: true, Reload: "hot"}
		},
		"rollout": func(string, refs.Kind, string) ruleinput.Target {
			return ruleinput.Target{Known: true, Exists: true, Reload: "rollout", Keys: []string{"config.yaml", "password"}}
		},
	}
	found := 0
	for _, o := range objs {
		w, ok := workload.Builtin().For(o.Obj)
		if !ok {
			continue
		}
		spec, err := w.PodSpec()
		if err != nil {
			continue
		}
		found++
		for name, target := range facts {
			req := ruleinput.Request{Operation: "CREATE", Kind: w.Type.Kind.Kind, Namespace: o.Obj.GetNamespace(), Name: o.Obj.GetName()}
			in, err := ruleinput.WorkloadInput(req, w, spec, func(kind refs.Kind, n string) (ruleinput.Target, error) {
				return target(o.Obj.GetNamespace(), kind, n), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sameFindings(t, fmt.Sprintf("%s: %s %s, targets %s", what, req.Kind, req.Name, name), in)
			in.Workload.RolloutDisabled = !in.Workload.RolloutDisabled
			sameFindings(t, fmt.Sprintf("%s: %s %s, targets %s, rollouts flipped", what, req.Kind, req.Name, name), in)
		}
	}
	return found
}
