package builtinrules_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/ruleinput"
)

// chooser turns bytes into choices: each choice takes one byte (zero once
// they run out), so that a fuzzer's mutations change one choice at a time.
type chooser struct{ data []byte }

func (c *chooser) pick(n int) int {
	if len(c.data) == 0 {
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

func oneOf[T any](c *chooser, values ...T) T { return values[c.pick(len(values))] }

// Values that make names, paths and keys collide, and that quoting treats
// differently (quotes, backslashes, non-ASCII, invalid UTF-8, the empty
// string).
var (
	names     = []string{"settings", "db-password", "", `q"uote`, "back\\slash", "ключ", "\xff\xfe", "a b"}
	keyNames  = []string{"a", "b", "password", "config.yaml", `k"ey`, "", "é"}
	paths     = []string{"spec.template.spec.volumes[0]", "spec.template.spec.volumes[1]", "spec.template.spec.volumes[0].projected.sources[0]", "spec.template.spec.containers[0].env[0]", "spec.template.spec.containers[0].envFrom[0]", "spec.containers[1].env[2]", ""}
	mounts    = []string{"spec.template.spec.containers[0].volumeMounts[0]", "spec.template.spec.initContainers[0].volumeMounts[1]", ""}
	reloads   = []string{"", "rollout", "hot", "ignore", "Hot"}
	modes     = []int32{0, 0o400, 0o440, 0o444, 0o600, 0o644, 0o777, 0o004, 0o040, -1, 1 << 20}
	subPaths  = []string{"", "", "app.conf", `we"ird`, "ü/x"}
	workloads = []ruleinput.Workload{
		{Kind: "Deployment", Namespace: "shop", Name: "web"},
		{Kind: "CronJob", Namespace: "", Name: `n"ame`},
		{Kind: "Pod", Namespace: "ns\xff", Name: "p"},
	}
)

// generate draws an input from data.
func generate(data []byte) ruleinput.Input {
	c := &chooser{data: data}
	w := oneOf(c, workloads...)
	w.RolloutDisabled = c.pick(2) == 1
	in := ruleinput.Input{Workload: w, Request: ruleinput.Request{Operation: "CREATE", Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}}
	for range c.pick(9) {
		r := ruleinput.Reference{Ref: refs.Ref{
			Kind:          oneOf(c, refs.ConfigMap, refs.Secret, refs.SecretProviderClass),
			Name:          oneOf(c, names...),
			Optional:      c.pick(3) == 0,
			Keys:          keys(c),
			Via:           oneOf(c, refs.Env, refs.EnvFrom, refs.Volume, refs.Projected, refs.CSI),
			Path:          oneOf(c, paths...),
			Container:     oneOf(c, "app", "", "side car", `c"`),
			ContainerType: oneOf(c, refs.Regular, refs.Init, refs.Ephemeral, ""),
			EnvPrefix:     oneOf(c, "", "APP_"),
			Volume:        oneOf(c, "", "config"),
			MountPath:     oneOf(c, "", "/etc/app", `/we"ird`),
			SubPath:       oneOf(c, subPaths...),
			SubPathExpr:   oneOf(c, subPaths...),
			ReadOnly:      c.pick(2) == 1,
			MaxMode:       oneOf(c, modes...),
		}}
		r.MountFieldPath = oneOf(c, mounts...)
		r.Target = ruleinput.Target{Known: c.pick(4) != 0, Exists: c.pick(4) != 0, Keys: keys(c), Reload: oneOf(c, reloads...), Immutable: c.pick(2) == 1}
		in.References = append(in.References, r)
	}
	return in
}

// keys is nil (every key), empty, or a few key names.
func keys(c *chooser) []string {
	switch c.pick(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+c.pick(3))
	for i := range out {
		out[i] = oneOf(c, keyNames...)
	}
	return out
}

// corpusValues reads the []byte and string values of a Go fuzz corpus
// file ("go test fuzz v1", then one Go literal per line).
func corpusValues(t *testing.T, file string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		for _, prefix := range []string{"[]byte(", "string("} {
			if lit, ok := strings.CutPrefix(line, prefix); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(lit, ")")); err == nil {
					out = append(out, []byte(s))
				}
			}
		}
	}
	return out
}

// admissionObject is request.object of an AdmissionReview, or nil.
func admissionObject(data []byte) []byte {
	var review struct {
		Request struct {
			Object json.RawMessage `json:"object"`
		} `json:"request"`
	}
	if json.Unmarshal(data, &review) != nil || len(bytes.TrimSpace(review.Request.Object)) == 0 || review.Request.Object[0] != '{' {
		return nil
	}
	return review.Request.Object
}
