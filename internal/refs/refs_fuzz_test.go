package refs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzPodSpecReferences decodes fuzzed JSON into a PodSpec and lists its
// references. It asserts that FromPodSpec does not panic, leaves the spec as
// it was, answers the same twice, and that every Ref is what its Path says:
// the path resolves in the spec to a configMap/secret source of the Ref's
// Kind whose name (empty or not) is the Ref's Name, with the same optional,
// keys (nil for all, else sorted and unique), mode and container; a
// MountFieldPath resolves to a mount of the Ref's volume in that container,
// and is empty only when no container mounts the volume. The number of Refs
// is counted independently from the spec, volumes come before env refs,
// Consumed merges them as documented, and ConsumedBy answers what Consumed
// does.
func FuzzPodSpecReferences(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"volumes":[{"name":"cfg","configMap":{"name":"flags","items":[{"key":"z","path":"z"},{"key":"a","path":"a","mode":256},{"key":"z","path":"z2"}],"optional":true,"defaultMode":420}}],
		  "containers":[{"name":"api","volumeMounts":[{"name":"cfg","mountPath":"/etc/app","subPath":"a","readOnly":true},{"name":"cfg","mountPath":"/x"}]}]}`,
		`{"volumes":[{"name":"s","secret":{"secretName":"db","items":[]}},{"name":"unmounted","configMap":{"name":""}}],
		  "initContainers":[{"name":"init","volumeMounts":[{"name":"s","mountPath":"/s","subPathExpr":"$(POD)"}]}]}`,
		`{"volumes":[{"name":"all","projected":{"defaultMode":384,"sources":[{"downwardAPI":{}},{"configMap":{"name":"app","items":[{"key":"b","path":"b"},{"key":"a","path":"a","mode":4095}]}},{"serviceAccountToken":{"path":"t"}},{"secret":{"name":"creds","optional":false}}]}}],
		  "containers":[{"name":"a","volumeMounts":[{"name":"all","mountPath":"/p"}]},{"name":"b","volumeMounts":[{"name":"all","mountPath":"/q"}]}]}`,
		`{"containers":[{"name":"app","envFrom":[{"prefix":"P_","configMapRef":{"name":"env","optional":true}},{"secretRef":{"name":"sec"}},{"prefix":"none"}],
		  "env":[{"name":"A","value":"x"},{"name":"B","valueFrom":{"configMapKeyRef":{"name":"cm","key":"k"}}},{"name":"C","valueFrom":{"secretKeyRef":{"name":"s","key":"","optional":true}}},{"name":"D","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]}],
		  "ephemeralContainers":[{"name":"debug","envFrom":[{"configMapRef":{"name":"env"}}],"volumeMounts":[{"name":"v","mountPath":"/v"}]}],
		  "volumes":[{"name":"v","secret":{"secretName":"eph"}}]}`,
		`{"volumes":[{"name":"x","configMap":{"name":"a"},"secret":{"secretName":"b"}}],"containers":[{"name":"","volumeMounts":[{"name":"x"}]}]}`,
		// One object taken several ways: Consumed and ConsumedBy merge keys,
		// every-key uses and optional alike.
		`{"volumes":[{"name":"v","configMap":{"name":"app","items":[{"key":"b","path":"b"}]}},{"name":"p","projected":{"sources":[{"configMap":{"name":"app","items":[{"key":"a","path":"a"},{"key":"b","path":"b2"}],"optional":true}},{"secret":{"name":"db","items":[{"key":"u","path":"u"}]}}]}}],
		  "containers":[{"name":"c","envFrom":[{"configMapRef":{"name":"env","optional":true}}],"env":[{"name":"X","valueFrom":{"configMapKeyRef":{"name":"app","key":"c"}}},{"name":"Y","valueFrom":{"secretKeyRef":{"name":"db","key":"p","optional":true}}},{"name":"Z","valueFrom":{"configMapKeyRef":{"name":"env","key":"k"}}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var spec corev1.PodSpec
		if err := json.Unmarshal(data, &spec); err != nil {
			t.Skip("not a PodSpec in JSON: FromPodSpec only ever sees decoded specs")
		}
		before, err := json.Marshal(&spec)
		if err != nil {
			t.Skip("the decoded spec does not encode back, so whether FromPodSpec changed it cannot be compared")
		}
		got := FromPodSpec(&spec)
		if after, _ := json.Marshal(&spec); !bytes.Equal(before, after) {
			t.Fatalf("FromPodSpec changed the spec:\n%s\nthen\n%s", before, after)
		}
		if again := FromPodSpec(&spec); !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic:\n%v\nthen\n%v", got, again)
		}

		if want := countRefs(&spec); len(got) != want {
			t.Fatalf("%d refs, want %d from the spec: %v", len(got), want, got)
		}
		seen := map[string]bool{}
		envStarted := false
		for i, r := range got {
			id := r.Path + " " + r.MountFieldPath
			if seen[id] {
				t.Errorf("ref %d: %s listed twice", i, id)
			}
			seen[id] = true
			if isEnv := r.Via == Env || r.Via == EnvFrom; isEnv {
				envStarted = true
			} else if envStarted {
				t.Errorf("ref %d: volume ref %s after env refs", i, r.Path)
			}
			if err := checkRef(&spec, r); err != nil {
				t.Errorf("ref %d %+v: %v", i, r, err)
			}
			// Keys are the Ref's own: mounted() clones them per mount.
			for j := range i {
				if len(r.Keys) > 0 && len(got[j].Keys) > 0 && &r.Keys[0] == &got[j].Keys[0] {
					t.Errorf("refs %d and %d share their Keys", j, i)
				}
			}
		}
		checkConsumed(t, got, Consumed(got))
		if by := ConsumedBy(&spec); !reflect.DeepEqual(by, Consumed(got)) {
			t.Fatalf("ConsumedBy differs from Consumed(FromPodSpec):\n%+v\n%+v", by, Consumed(got))
		}
	})
}

// countRefs counts the references FromPodSpec should return, from the spec
// alone. A source or env var with several kinds set (the API server refuses
// one) counts once, as its first of configMap, secret, projected.
func countRefs(spec *corev1.PodSpec) int {
	mounts := map[string]int{}
	n := 0
	forContainers(spec, func(_ ContainerType, _ int, _ string, vm []corev1.VolumeMount, ef []corev1.EnvFromSource, env []corev1.EnvVar) {
		for _, m := range vm {
			mounts[m.Name]++
		}
		for _, e := range ef {
			if e.ConfigMapRef != nil || e.SecretRef != nil {
				n++
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && (e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.SecretKeyRef != nil) {
				n++
			}
		}
	})
	for _, v := range spec.Volumes {
		sources := 0
		switch {
		case v.ConfigMap != nil, v.Secret != nil:
			sources = 1
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil || s.Secret != nil {
					sources++
				}
			}
		}
		n += sources * max(1, mounts[v.Name])
	}
	return n
}

func forContainers(spec *corev1.PodSpec, fn func(ContainerType, int, string, []corev1.VolumeMount, []corev1.EnvFromSource, []corev1.EnvVar)) {
	for i, c := range spec.InitContainers {
		fn(Init, i, c.Name, c.VolumeMounts, c.EnvFrom, c.Env)
	}
	for i, c := range spec.Containers {
		fn(Regular, i, c.Name, c.VolumeMounts, c.EnvFrom, c.Env)
	}
	for i, c := range spec.EphemeralContainers {
		fn(Ephemeral, i, c.Name, c.VolumeMounts, c.EnvFrom, c.Env)
	}
}

// fieldPath splits "spec.volumes[1].projected.sources[0].secret" into
// names and indexes: [spec volumes 1 projected sources 0 secret].
func fieldPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		name, idx, ok := strings.Cut(part, "[")
		out = append(out, name)
		if ok {
			out = append(out, strings.TrimSuffix(idx, "]"))
		}
	}
	return out
}

func index(s string, n int) (int, error) {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= n {
		return 0, fmt.Errorf("index %q out of range [0,%d)", s, n)
	}
	return i, nil
}

// source is what a reference's Path points at.
type source struct {
	kind     Kind
	name     string
	optional *bool
	items    []corev1.KeyToPath
	allItems bool    // keys: every key (envFrom) rather than items
	key      *string // keys: this one (env)
	mode     *int32
	fallback int32
	via      Via
	volume   string
	prefix   string
	ctype    ContainerType
	cname    string
}

// resolve finds the source at a Ref's Path.
func resolve(spec *corev1.PodSpec, path string) (source, error) {
	p := fieldPath(path)
	if len(p) < 3 || p[0] != "spec" {
		return source{}, fmt.Errorf("path %q is not under spec", path)
	}
	if p[1] == "volumes" {
		i, err := index(p[2], len(spec.Volumes))
		if err != nil {
			return source{}, err
		}
		v := spec.Volumes[i]
		rest := strings.Join(p[3:], ".")
		s := source{via: Volume, volume: v.Name}
		switch {
		case rest == "configMap" && v.ConfigMap != nil:
			c := v.ConfigMap
			s.kind, s.name, s.optional, s.items, s.mode, s.fallback = ConfigMap, c.Name, c.Optional, c.Items, c.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode
		case rest == "secret" && v.Secret != nil && v.ConfigMap == nil:
			c := v.Secret
			s.kind, s.name, s.optional, s.items, s.mode, s.fallback = Secret, c.SecretName, c.Optional, c.Items, c.DefaultMode, corev1.SecretVolumeSourceDefaultMode
		case len(p) == 7 && p[3] == "projected" && p[4] == "sources" && v.Projected != nil && v.ConfigMap == nil && v.Secret == nil:
			k, err := index(p[5], len(v.Projected.Sources))
			if err != nil {
				return source{}, err
			}
			src := v.Projected.Sources[k]
			s.via, s.mode, s.fallback = Projected, v.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode
			switch {
			case p[6] == "configMap" && src.ConfigMap != nil:
				s.kind, s.name, s.optional, s.items = ConfigMap, src.ConfigMap.Name, src.ConfigMap.Optional, src.ConfigMap.Items
			case p[6] == "secret" && src.Secret != nil && src.ConfigMap == nil:
				s.kind, s.name, s.optional, s.items = Secret, src.Secret.Name, src.Secret.Optional, src.Secret.Items
			default:
				return source{}, fmt.Errorf("no configMap or secret source at %q", path)
			}
		default:
			return source{}, fmt.Errorf("no configMap or secret source at %q", path)
		}
		return s, nil
	}
	var found *source
	var ferr error
	forContainers(spec, func(ct ContainerType, i int, name string, _ []corev1.VolumeMount, ef []corev1.EnvFromSource, env []corev1.EnvVar) {
		if containerField(ct) != p[1] || strconv.Itoa(i) != p[2] {
			return
		}
		s := source{ctype: ct, cname: name}
		rest := p[3:]
		switch {
		case len(rest) == 3 && rest[0] == "envFrom":
			j, err := index(rest[1], len(ef))
			if err != nil {
				ferr = err
				return
			}
			e := ef[j]
			s.via, s.prefix, s.allItems = EnvFrom, e.Prefix, true
			switch {
			case rest[2] == "configMapRef" && e.ConfigMapRef != nil:
				s.kind, s.name, s.optional = ConfigMap, e.ConfigMapRef.Name, e.ConfigMapRef.Optional
			case rest[2] == "secretRef" && e.SecretRef != nil && e.ConfigMapRef == nil:
				s.kind, s.name, s.optional = Secret, e.SecretRef.Name, e.SecretRef.Optional
			default:
				ferr = fmt.Errorf("no configMapRef or secretRef at %q", path)
				return
			}
		case len(rest) == 4 && rest[0] == "env" && rest[2] == "valueFrom":
			j, err := index(rest[1], len(env))
			if err != nil {
				ferr = err
				return
			}
			vf := env[j].ValueFrom
			s.via = Env
			switch {
			case vf == nil:
				ferr = fmt.Errorf("no valueFrom at %q", path)
				return
			case rest[3] == "configMapKeyRef" && vf.ConfigMapKeyRef != nil:
				s.kind, s.name, s.optional, s.key = ConfigMap, vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Optional, &vf.ConfigMapKeyRef.Key
			case rest[3] == "secretKeyRef" && vf.SecretKeyRef != nil && vf.ConfigMapKeyRef == nil:
				s.kind, s.name, s.optional, s.key = Secret, vf.SecretKeyRef.Name, vf.SecretKeyRef.Optional, &vf.SecretKeyRef.Key
			default:
				ferr = fmt.Errorf("no key ref at %q", path)
				return
			}
		default:
			ferr = fmt.Errorf("path %q names no env source", path)
			return
		}
		found = &s
	})
	if found == nil {
		if ferr == nil {
			ferr = fmt.Errorf("path %q names no container", path)
		}
		return source{}, ferr
	}
	return *found, nil
}

func containerField(ct ContainerType) string {
	switch ct {
	case Init:
		return "initContainers"
	case Ephemeral:
		return "ephemeralContainers"
	}
	return "containers"
}

// mountAt finds the container and mount at a Ref's MountFieldPath.
func mountAt(spec *corev1.PodSpec, path string) (ContainerType, string, corev1.VolumeMount, error) {
	p := fieldPath(path)
	if len(p) != 5 || p[0] != "spec" || p[3] != "volumeMounts" {
		return "", "", corev1.VolumeMount{}, fmt.Errorf("mount path %q is not spec.<containers>[i].volumeMounts[k]", path)
	}
	var (
		ct    ContainerType
		name  string
		mount *corev1.VolumeMount
		err   error = fmt.Errorf("mount path %q names no container", path)
	)
	forContainers(spec, func(c ContainerType, i int, n string, vm []corev1.VolumeMount, _ []corev1.EnvFromSource, _ []corev1.EnvVar) {
		if containerField(c) != p[1] || strconv.Itoa(i) != p[2] {
			return
		}
		k, e := index(p[4], len(vm))
		if e != nil {
			err = e
			return
		}
		ct, name, mount, err = c, n, &vm[k], nil
	})
	if err != nil {
		return "", "", corev1.VolumeMount{}, err
	}
	return ct, name, *mount, nil
}

func isMounted(spec *corev1.PodSpec, volume string) bool {
	mounted := false
	forContainers(spec, func(_ ContainerType, _ int, _ string, vm []corev1.VolumeMount, _ []corev1.EnvFromSource, _ []corev1.EnvVar) {
		for _, m := range vm {
			mounted = mounted || m.Name == volume
		}
	})
	return mounted
}

// checkRef says how r differs from what its paths resolve to.
func checkRef(spec *corev1.PodSpec, r Ref) error {
	s, err := resolve(spec, r.Path)
	if err != nil {
		return err
	}
	if r.Kind != s.kind || r.Name != s.name || r.Via != s.via {
		return fmt.Errorf("the spec has %s %q via %s there", s.kind, s.name, s.via)
	}
	if want := s.optional != nil && *s.optional; r.Optional != want {
		return fmt.Errorf("optional %v, the spec says %v", r.Optional, want)
	}
	var keys []string
	switch {
	case s.key != nil:
		keys = []string{*s.key}
	case s.allItems:
	default:
		for _, it := range s.items {
			keys = append(keys, it.Key)
		}
	}
	if keys != nil {
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	if !slices.Equal(r.Keys, keys) || (r.Keys == nil) != (keys == nil) {
		return fmt.Errorf("keys %q, the spec says %q", r.Keys, keys)
	}
	if s.via == Env || s.via == EnvFrom {
		if r.Container != s.cname || r.ContainerType != s.ctype || r.EnvPrefix != s.prefix || r.MaxMode != 0 ||
			r.Volume != "" || r.MountFieldPath != "" || r.MountPath != "" || r.SubPath != "" || r.SubPathExpr != "" || r.ReadOnly {
			return fmt.Errorf("env ref with wrong container or volume fields, want container %s %q prefix %q", s.ctype, s.cname, s.prefix)
		}
		return nil
	}
	def := s.fallback
	if s.mode != nil {
		def = *s.mode
	}
	mode := def
	if len(s.items) > 0 {
		mode = 0
		for _, it := range s.items {
			if it.Mode != nil {
				mode |= *it.Mode
			} else {
				mode |= def
			}
		}
	}
	if r.MaxMode != mode || r.Volume != s.volume || r.EnvPrefix != "" {
		return fmt.Errorf("mode %o volume %q, the spec says %o %q", r.MaxMode, r.Volume, mode, s.volume)
	}
	if r.MountFieldPath == "" {
		if isMounted(spec, r.Volume) {
			return fmt.Errorf("no mount, but volume %q is mounted", r.Volume)
		}
		if r.Container != "" || r.ContainerType != "" || r.MountPath != "" || r.SubPath != "" || r.SubPathExpr != "" || r.ReadOnly {
			return fmt.Errorf("unmounted volume ref with mount fields")
		}
		return nil
	}
	ct, cname, m, err := mountAt(spec, r.MountFieldPath)
	if err != nil {
		return err
	}
	if m.Name != r.Volume || ct != r.ContainerType || cname != r.Container ||
		m.MountPath != r.MountPath || m.SubPath != r.SubPath || m.SubPathExpr != r.SubPathExpr || m.ReadOnly != r.ReadOnly {
		return fmt.Errorf("the mount at %s is %+v in %s container %q", r.MountFieldPath, m, ct, cname)
	}
	return nil
}

func checkConsumed(t *testing.T, refs []Ref, cs []Consumption) {
	t.Helper()
	type id struct {
		kind Kind
		name string
	}
	type want struct {
		optional, all bool
		keys          []string
	}
	wants := map[id]*want{}
	for _, r := range refs {
		w := wants[id{r.Kind, r.Name}]
		if w == nil {
			w = &want{optional: true}
			wants[id{r.Kind, r.Name}] = w
		}
		w.optional = w.optional && r.Optional
		w.all = w.all || r.Keys == nil
		w.keys = append(w.keys, r.Keys...)
	}
	if len(cs) != len(wants) {
		t.Fatalf("Consumed: %d objects, want %d", len(cs), len(wants))
	}
	for i, c := range cs {
		if i > 0 && (cs[i-1].Kind > c.Kind || cs[i-1].Kind == c.Kind && cs[i-1].Name >= c.Name) {
			t.Errorf("Consumed: %s %q after %s %q", c.Kind, c.Name, cs[i-1].Kind, cs[i-1].Name)
		}
		w := wants[id{c.Kind, c.Name}]
		if w == nil {
			t.Fatalf("Consumed: %s %q is no ref's", c.Kind, c.Name)
		}
		var keys []string
		if !w.all {
			keys = slices.Compact(slices.Sorted(slices.Values(w.keys)))
		}
		if c.Optional != w.optional || (c.Keys == nil) != w.all || !slices.Equal(c.Keys, keys) {
			t.Errorf("Consumed: %+v, want optional %v keys %q", c, w.optional, keys)
		}
	}
}
