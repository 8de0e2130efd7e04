package webhookscope

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/cel-go/cel"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// FuzzReferenceParity builds a pod spec from the fuzzer's bytes and holds
// the three readers of refs.Entries, the one map of where config enters a
// pod, to one another:
//
//   - the condition (WithConfig) sends a Pod, and a Deployment with the spec
//     as its template, to configward exactly when refs.FromPodSpec or
//     refs.CSIFromPodSpec finds something, and never fails to decide;
//   - revision.PodPatch, applied to the Pod as JSON, renames every reference
//     FromPodSpec finds to its snapshot, but those of ephemeral containers,
//     and changes nothing else.
func FuzzReferenceParity(f *testing.F) {
	for _, s := range paritySeeds {
		f.Add(s)
	}
	// Specs of every shape, beyond the ones written out.
	for i := range 24 {
		sum := sha256.Sum256([]byte{byte(i)})
		f.Add(sum[:])
	}
	condition := compileCondition(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := dice(data)
		spec := d.podSpec()
		checkCondition(t, condition, spec)
		checkPodPatch(t, spec)
	})
}

// paritySeeds are specs with one way of taking config each, and the
// distractors around them, as the choices podSpec reads.
var paritySeeds = [][]byte{
	{},
	seed(1, 0, volEmptyDir),
	seed(1, 0, volConfigMap, nameApp),
	seed(1, 0, volSecret, nameDB),
	seed(1, 0, volProjected, 2, srcDownwardAPI, srcConfigMap, nameApp),
	seed(1, 0, volProjected, 2, srcServiceAccountToken, srcSecret, nameDB),
	seed(1, 0, volProjected, 1, srcConfigMapAndSecret, nameApp, nameDB),
	seed(1, 0, volProjected, 0),
	seed(1, 0, volSecretsStore, classNamed, nameApp),
	seed(1, 0, volSecretsStore, classNone),
	seed(1, 0, volSecretsStore, classOtherAttribute),
	seed(1, 0, volSecretsStore, classNamed, nameEmpty),
	seed(1, 0, volOtherCSI, nameApp),
	seed(1, 0, volNoSource),
	seed(1, 0, volConfigMapAndSecret, nameApp, 0, 0, nameDB),
	seed(1, 0, volSecretAndProjected, nameDB, 0, 0, 1, srcSecret, nameApp),
	seed(1, 0, volConfigMapAndSecretsStore, nameApp, 0, 0, classNamed, nameShared),
	// A regular container with an env var of each kind, an envFrom of
	// each kind, and mounts of a volume and of none.
	seed(1, 1, volSecret, nameShared, 0, 0,
		0, 1,
		envKinds, envValue, envFieldRef, envResourceFieldRef, envConfigMapKey, nameApp, 0, envSecretKey, nameDB, 0,
		envBothKeys, nameApp, 0, nameDB, 0, envEmptyValueFrom,
		fromKinds, fromConfigMap, nameShared, 0, fromSecret, nameDB, 0, fromNeither, fromBoth, nameApp, 0, nameDB, 0,
		2, 1, mountElsewhere),
	// A Secret's key read in an init and a regular container, and a
	// ConfigMap's only in an ephemeral one.
	seed(0, 1, 1, envSecretKey, nameDB, 0, 0, 0, 1, 1, envSecretKey, nameDB, 0, 0, 0, 1, 1, envConfigMapKey, nameShared),
	// Config taken by an ephemeral container alone.
	seed(0, 0, 0, 1, 0, 1, fromSecret, nameDB),
	// One ConfigMap volume mounted in a container of each list.
	seed(1, 2, volConfigMap, nameApp, 0, 0, 1, 0, 0, 1, 2, 1, 0, 0, 1, 2, 1, 0, 0, 1, 2),
}

// The choices podSpec reads, by kind of thing it makes.
const (
	volConfigMap = iota
	volSecret
	volProjected
	volDownwardAPI
	volEmptyDir
	volSecretsStore
	volOtherCSI
	volNoSource
	volConfigMapAndSecret
	volSecretAndProjected
	volConfigMapAndSecretsStore
	volumeKinds
)

const (
	srcConfigMap = iota
	srcSecret
	srcDownwardAPI
	srcServiceAccountToken
	srcConfigMapAndSecret
	srcEmpty
	sourceKinds
)

const (
	envValue = iota
	envFieldRef
	envResourceFieldRef
	envConfigMapKey
	envSecretKey
	envBothKeys
	envEmptyValueFrom
	envKinds
)

const (
	fromConfigMap = iota
	fromSecret
	fromNeither
	fromBoth
	fromKinds
)

const (
	classNamed = iota
	classNone
	classOtherAttribute
	classKinds
)

// Names of objects, of volumes and of what mounts name; no object can be
// named "", but a spec can say so.
var (
	objectNames = []string{"app", "db", "shared", ""}
	volumeNames = []string{"v0", "v1", "v2"}
	mountNames  = []string{"v0", "v1", "v2", "elsewhere"}
)

const (
	nameApp = iota
	nameDB
	nameShared
	nameEmpty
)

const mountElsewhere = 3

// seed writes choices as podSpec reads them, one byte each.
func seed(choices ...int) []byte {
	out := make([]byte, len(choices))
	for i, c := range choices {
		out[i] = byte(c)
	}
	return out
}

// dice hands out the fuzzer's bytes as small choices. Past the end every
// choice is 0, which makes no more items, so every input is a spec.
type dice []byte

func (d *dice) pick(n int) int {
	if len(*d) == 0 {
		return 0
	}
	c := int((*d)[0]) % n
	*d = (*d)[1:]
	return c
}

func (d *dice) name() string    { return objectNames[d.pick(len(objectNames))] }
func (d *dice) optional() *bool { return []*bool{nil, new(false), new(true)}[d.pick(3)] }

func (d *dice) podSpec() corev1.PodSpec {
	var spec corev1.PodSpec
	for range d.pick(4) {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volumeNames[d.pick(len(volumeNames))], VolumeSource: d.volumeSource()})
	}
	for range d.pick(3) {
		spec.InitContainers = append(spec.InitContainers, d.container("init"))
	}
	for range d.pick(3) {
		spec.Containers = append(spec.Containers, d.container("app"))
	}
	for range d.pick(3) {
		spec.EphemeralContainers = append(spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(d.container("debug"))})
	}
	return spec
}

func (d *dice) volumeSource() corev1.VolumeSource {
	switch d.pick(volumeKinds) {
	case volConfigMap:
		return corev1.VolumeSource{ConfigMap: d.configMapVolume()}
	case volSecret:
		return corev1.VolumeSource{Secret: d.secretVolume()}
	case volProjected:
		return corev1.VolumeSource{Projected: d.projected()}
	case volDownwardAPI:
		return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}
	case volEmptyDir:
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	case volSecretsStore:
		return corev1.VolumeSource{CSI: d.csi(refs.CSIDriver)}
	case volOtherCSI:
		return corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "ebs.csi.aws.com", VolumeAttributes: map[string]string{refs.CSIClassAttribute: d.name()}}}
	case volNoSource:
		return corev1.VolumeSource{}
	// The API server refuses a volume of two kinds, but only after the
	// webhooks have seen it.
	case volConfigMapAndSecret:
		return corev1.VolumeSource{ConfigMap: d.configMapVolume(), Secret: d.secretVolume()}
	case volSecretAndProjected:
		return corev1.VolumeSource{Secret: d.secretVolume(), Projected: d.projected()}
	default: // volConfigMapAndSecretsStore
		return corev1.VolumeSource{ConfigMap: d.configMapVolume(), CSI: d.csi(refs.CSIDriver)}
	}
}

func (d *dice) configMapVolume() *corev1.ConfigMapVolumeSource {
	return &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}, Optional: d.optional(), Items: d.items()}
}

func (d *dice) secretVolume() *corev1.SecretVolumeSource {
	return &corev1.SecretVolumeSource{SecretName: d.name(), Optional: d.optional(), Items: d.items()}
}

func (d *dice) items() []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for range d.pick(3) {
		key := []string{"a", "b"}[d.pick(2)]
		out = append(out, corev1.KeyToPath{Key: key, Path: key, Mode: []*int32{nil, new(int32(0o400))}[d.pick(2)]})
	}
	return out
}

// projected makes a projected volume whose sources are nil when it has
// none, as the API server hands them to a webhook's condition: null.
func (d *dice) projected() *corev1.ProjectedVolumeSource {
	p := &corev1.ProjectedVolumeSource{}
	for range d.pick(4) {
		var src corev1.VolumeProjection
		switch d.pick(sourceKinds) {
		case srcConfigMap:
			src.ConfigMap = &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}, Optional: d.optional(), Items: d.items()}
		case srcSecret:
			src.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}, Optional: d.optional(), Items: d.items()}
		case srcDownwardAPI:
			src.DownwardAPI = &corev1.DownwardAPIProjection{}
		case srcServiceAccountToken:
			src.ServiceAccountToken = &corev1.ServiceAccountTokenProjection{Path: "token"}
		case srcConfigMapAndSecret:
			src.ConfigMap = &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}}
			src.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}}
		}
		p.Sources = append(p.Sources, src)
	}
	return p
}

func (d *dice) csi(driver string) *corev1.CSIVolumeSource {
	s := &corev1.CSIVolumeSource{Driver: driver}
	switch d.pick(classKinds) {
	case classNamed:
		s.VolumeAttributes = map[string]string{refs.CSIClassAttribute: d.name()}
	case classOtherAttribute:
		s.VolumeAttributes = map[string]string{"usePodIdentity": "true"}
	}
	return s
}

func (d *dice) container(name string) corev1.Container {
	c := corev1.Container{Name: name, Image: name + ":1"}
	for range d.pick(envKinds + 1) {
		c.Env = append(c.Env, d.envVar(len(c.Env)))
	}
	for range d.pick(fromKinds + 1) {
		c.EnvFrom = append(c.EnvFrom, d.envFrom())
	}
	for range d.pick(3) {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: mountNames[d.pick(len(mountNames))], MountPath: "/m" + strconv.Itoa(len(c.VolumeMounts))})
	}
	return c
}

func (d *dice) envVar(i int) corev1.EnvVar {
	e := corev1.EnvVar{Name: "E" + strconv.Itoa(i)}
	cmKey := func() *corev1.ConfigMapKeySelector {
		return &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}, Key: "k", Optional: d.optional()}
	}
	secretKey := func() *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}, Key: "k", Optional: d.optional()}
	}
	switch d.pick(envKinds) {
	case envValue:
		e.Value = "x"
	case envFieldRef:
		e.ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	case envResourceFieldRef:
		e.ValueFrom = &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}
	case envConfigMapKey:
		e.ValueFrom = &corev1.EnvVarSource{ConfigMapKeyRef: cmKey()}
	case envSecretKey:
		e.ValueFrom = &corev1.EnvVarSource{SecretKeyRef: secretKey()}
	case envBothKeys:
		e.ValueFrom = &corev1.EnvVarSource{ConfigMapKeyRef: cmKey(), SecretKeyRef: secretKey()}
	case envEmptyValueFrom:
		e.ValueFrom = &corev1.EnvVarSource{}
	}
	return e
}

func (d *dice) envFrom() corev1.EnvFromSource {
	cm := func() *corev1.ConfigMapEnvSource {
		return &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}, Optional: d.optional()}
	}
	secret := func() *corev1.SecretEnvSource {
		return &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: d.name()}, Optional: d.optional()}
	}
	switch d.pick(fromKinds) {
	case fromConfigMap:
		return corev1.EnvFromSource{ConfigMapRef: cm()}
	case fromSecret:
		return corev1.EnvFromSource{SecretRef: secret(), Prefix: "S_"}
	case fromNeither:
		return corev1.EnvFromSource{Prefix: "NONE_"}
	default: // fromBoth
		return corev1.EnvFromSource{ConfigMapRef: cm(), SecretRef: secret()}
	}
}

// compileCondition compiles WithConfig for the built-in kinds with what
// the API server's matchConditions dialect needs of CEL: optional types.
func compileCondition(tb testing.TB) cel.Program {
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("request", cel.DynType), cel.OptionalTypes())
	if err != nil {
		tb.Fatal(err)
	}
	ast, issues := env.Compile(WithConfig(workload.Builtin()))
	if issues.Err() != nil {
		tb.Fatal(issues.Err())
	}
	program, err := env.Program(ast)
	if err != nil {
		tb.Fatal(err)
	}
	return program
}

// checkCondition says the condition sends a create of a Pod with spec, and
// of a Deployment with it as its template, exactly when spec references
// config. The object reaches CEL as the API server converts it, nil slices
// as nulls included.
func checkCondition(t *testing.T, condition cel.Program, spec corev1.PodSpec) {
	found := map[string]bool{}
	for _, r := range append(refs.FromPodSpec(&spec), refs.CSIFromPodSpec(&spec)...) {
		found[string(r.Kind)+"/"+r.Name] = true
	}
	for _, w := range []struct {
		group, kind string
		object      runtime.Object
	}{
		{"", "Pod", &corev1.Pod{Spec: spec}},
		{"apps", "Deployment", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}},
	} {
		object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w.object)
		if err != nil {
			t.Fatal(err)
		}
		request := map[string]any{"operation": "CREATE", "kind": map[string]any{"group": w.group, "version": "v1", "kind": w.kind}}
		out, _, err := condition.Eval(map[string]any{"object": object, "request": request})
		if err != nil {
			t.Fatalf("the condition fails on a %s (the webhook's failurePolicy then decides): %v\nspec: %s", w.kind, err, asJSON(spec))
		}
		if sent := out.Value() == true; sent != (len(found) > 0) {
			t.Fatalf("the condition sends a %s: %v, but refs finds %v\nspec: %s", w.kind, sent, found, asJSON(spec))
		}
	}
}

// checkPodPatch says PodPatch, with a snapshot of every source the spec
// references, renames each reference but an ephemeral container's to its
// snapshot, pins exactly those sources and changes nothing else.
func checkPodPatch(t *testing.T, spec corev1.PodSpec) {
	before := refs.FromPodSpec(&spec)
	snaps := revision.Snapshots{}
	for _, r := range before {
		if r.Name != "" { // No object is named "", so none has a snapshot.
			snaps[revision.Source{Kind: r.Kind, Name: r.Name}] = "snapshot-of-" + strings.ToLower(string(r.Kind)) + "-" + r.Name
		}
	}
	ops, pinned := revision.PodPatch(&spec, snaps)
	doc, err := json.Marshal(corev1.Pod{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	patched := applyPatch(t, doc, ops)
	var got corev1.Pod
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	after := refs.FromPodSpec(&got.Spec)
	if len(after) != len(before) {
		t.Fatalf("%d references before the patch, %d after\nspec: %s\nops: %v", len(before), len(after), asJSON(spec), ops)
	}
	wantPinned := map[revision.Source]bool{}
	renamed := map[string]string{} // JSON pointer of a name: its snapshot, in JSON
	for i, r := range before {
		want := r
		src := revision.Source{Kind: r.Kind, Name: r.Name}
		// Ephemeral containers are added to running pods, never created
		// with one, so the patch leaves their own references alone.
		ephemeralOwn := (r.Via == refs.Env || r.Via == refs.EnvFrom) && r.ContainerType == refs.Ephemeral
		if snap, ok := snaps[src]; ok && !ephemeralOwn {
			want.Name = snap
			wantPinned[src] = true
			renamed[jsonPointer(r.NamePath)] = strconv.Quote(snap)
		}
		if !reflect.DeepEqual(after[i], want) {
			t.Errorf("after the patch reference %d is\n%+v\nwant\n%+v", i, after[i], want)
		}
	}
	if !maps.Equal(pinned, wantPinned) {
		t.Errorf("pinned %v, want %v", pinned, wantPinned)
	}
	checkOnlyRenamed(t, leaves(t, doc), leaves(t, patched), renamed)
	if t.Failed() {
		t.Logf("spec: %s\nops: %v", asJSON(spec), ops)
	}
}

// checkOnlyRenamed says the patched document differs from the original
// only in the names renamed lists, each now its snapshot.
func checkOnlyRenamed(t *testing.T, original, patched map[string]string, renamed map[string]string) {
	for at, value := range patched {
		want, isRenamed := renamed[at]
		if !isRenamed {
			want, isRenamed = original[at]
			if !isRenamed {
				t.Errorf("the patch added %s: %s", at, value)
				continue
			}
		}
		if value != want {
			t.Errorf("%s is %s after the patch, want %s", at, value, want)
		}
	}
	for at := range original {
		if _, ok := patched[at]; !ok {
			t.Errorf("the patch removed %s", at)
		}
	}
	for at := range renamed {
		if _, ok := patched[at]; !ok {
			t.Errorf("the patch did not rename %s", at)
		}
	}
}

func applyPatch(t *testing.T, doc []byte, ops any) []byte {
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) == "null" {
		return doc
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(doc)
	if err != nil {
		t.Fatalf("the patch does not apply: %v\nops: %s\ndoc: %s", err, raw, doc)
	}
	return out
}

// leaves maps every JSON pointer of doc to its value, objects and arrays
// standing for themselves by their kind, scalars by their JSON.
func leaves(t *testing.T, doc []byte) map[string]string {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			out[at] = "{}"
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			out[at] = "[]"
			for i, e := range v {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		default:
			b, _ := json.Marshal(v)
			out[at] = string(b)
		}
	}
	walk("", v)
	return out
}

// jsonPointer is the pointer of a field path rooted at a Pod, written here
// apart from revision's so that the two are checked against each other.
func jsonPointer(fieldPath string) string {
	r := strings.NewReplacer(".", "/", "[", "/", "]", "")
	return "/" + r.Replace(fieldPath)
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
