// Package refs lists the ConfigMaps and Secrets a pod spec consumes, how it
// consumes them and which keys it reads. It is pure: it sees only the spec,
// never the cluster, so the same answer serves admission, the rollout
// controller and the offline check.
//
// Field paths are rooted at a Pod ("spec.volumes[1].configMap"). For a pod
// template, replace the leading "spec" with the template's spec path (see
// workload.Type.PodSpecPath), e.g. "spec.template.spec.volumes[1].configMap".
//
// Entries is the one map of where config enters a pod, and the one place to
// change when a pod spec gains a way to take config: FromPodSpec and
// CSIFromPodSpec read a spec by it, revision.PodPatch rewrites the names it
// locates when a pod is created, and internal/webhookscope writes from it the
// CEL that decides which workload writes the API server sends to configward.
// A fuzz test in internal/webhookscope (FuzzReferenceParity) holds the three
// to one another.
package refs

import (
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Kind is the kind of object a reference points to.
type Kind string

const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
	// SecretProviderClass is the Secrets Store CSI driver's class of
	// external secrets a csi volume mounts (see CSIFromPodSpec).
	SecretProviderClass Kind = "SecretProviderClass"
)

// CSIDriver is the Secrets Store CSI driver's name in csi volumes, and
// CSIClassAttribute the volume attribute naming the SecretProviderClass.
const (
	CSIDriver         = "secrets-store.csi.k8s.io"
	CSIClassAttribute = "secretProviderClass"
)

// Via is the pod spec field through which the object reaches the pod.
type Via string

const (
	Volume    Via = "Volume"    // volumes[].configMap or volumes[].secret
	Projected Via = "Projected" // volumes[].projected.sources[]
	Env       Via = "Env"       // env[].valueFrom.*KeyRef
	EnvFrom   Via = "EnvFrom"   // envFrom[].*Ref
	CSI       Via = "CSI"       // volumes[].csi of the Secrets Store CSI driver
)

// ContainerType tells init, regular and ephemeral containers apart, because
// their fields live under different paths and rules may treat them apart.
type ContainerType string

const (
	Init      ContainerType = "Init"
	Regular   ContainerType = "Regular"
	Ephemeral ContainerType = "Ephemeral"
)

// Ref is one use of a ConfigMap or Secret by a pod spec.
//
// Volume-based refs come once per mount, so each carries the container and
// the mount details the subPath rule needs; a volume no container mounts
// still comes once, with an empty Container, because the kubelet still
// fetches it and the pod still waits for it.
type Ref struct {
	Kind     Kind   `json:"kind"`
	Name     string `json:"name"`
	Optional bool   `json:"optional"`
	// Keys is nil when every key is consumed, otherwise sorted and unique.
	Keys []string `json:"keys"`
	Via  Via      `json:"via"`
	// Path is the field path of the reference itself, for messages.
	Path string `json:"path"`
	// NamePath is the field path of the reference's name
	// ("spec.volumes[1].secret.secretName"), where a rewrite points it
	// elsewhere (revision.PodPatch). It stays out of the rule input, which
	// has Path for messages.
	NamePath string `json:"-"`

	Container     string        `json:"container"`
	ContainerType ContainerType `json:"containerType"`

	EnvPrefix string `json:"envPrefix"`

	Volume string `json:"volume"`
	// MountFieldPath is the field path of the volumeMount, empty when unmounted.
	MountFieldPath string `json:"mountFieldPath"`
	MountPath      string `json:"mountPath"`
	SubPath        string `json:"subPath"`
	SubPathExpr    string `json:"subPathExpr"`
	ReadOnly       bool   `json:"readOnly"`
	// MaxMode is the bitwise OR of the modes of every file this source
	// writes (defaultMode, 0644 when unset, and item modes). A numeric maximum
	// would hide bits: 0640 > 0604, yet 0604 is the one others can read.
	// Zero for env refs.
	MaxMode int32 `json:"maxMode"`
	// Files maps, for a volume source with items, each file it writes
	// (relative to the volume) to the key it holds; nil when every key is
	// written under its own name. The reload agent reads the files back
	// as keys; rules have Keys.
	Files map[string]string `json:"-"`
}

// Entry is one field through which a pod spec names a ConfigMap, a Secret
// or a SecretProviderClass: a row of Entries.
type Entry struct {
	Via  Via
	Kind Kind
	// List is the list whose items hold the reference, as a field path
	// with "[]" after each list on the way: from the pod spec ("volumes",
	// "volumes[].projected.sources") or, for an entry with Containers,
	// from each of their containers ("env").
	List string
	// Containers are the container lists the entry is read in; none for
	// the pod's own volumes.
	Containers []ContainerList
	// Field is the field path, in one item of List, of the object that
	// names the reference ("configMap", "valueFrom.secretKeyRef"): a
	// Ref's Path ends there.
	Field string
	// NameField is the field path, in Field, of the name ("name",
	// "secretName"): a Ref's NamePath ends there.
	NameField string
	// Driver, when set, is the one csi driver (the "driver" field of
	// Field) whose volumes the entry reads: another driver's attributes
	// mean nothing to configward.
	Driver string
	// NameRequired says an empty name names nothing: the Secrets Store CSI
	// driver refuses a volume without a class. An empty ConfigMap or
	// Secret name is still a reference: the pod waits for it, and the
	// rules say so.
	NameRequired bool
	// RewrittenAtCreate says revision.PodPatch points the reference at its
	// snapshot when a pod is created (only in containers a pod can have
	// then, see ContainerList). A SecretProviderClass has no snapshots.
	RewrittenAtCreate bool

	// read takes the entry's reference out of one item of List (a
	// *corev1.Volume, *corev1.VolumeProjection, *corev1.EnvFromSource or
	// *corev1.EnvVar); false when the item holds none.
	read func(item any) (use, bool)
}

// Entries is the one map of where config enters a pod (see the package
// comment for who follows it). FromPodSpec walks the spec's lists (a
// volume's own source before its projected ones, each container's envFrom
// before its env) and asks the entries of each list, in this order, which
// one an item holds. Where an item holds several (the API server refuses
// such a spec, but a mutating webhook sees it first), the first is read and
// only it is rewritten; a csi volume is read apart (CSIFromPodSpec).
var Entries = []Entry{
	{Via: Volume, Kind: ConfigMap, List: "volumes", Field: "configMap", NameField: "name", RewrittenAtCreate: true, read: volumeConfigMap},
	{Via: Volume, Kind: Secret, List: "volumes", Field: "secret", NameField: "secretName", RewrittenAtCreate: true, read: volumeSecret},
	{Via: Projected, Kind: ConfigMap, List: "volumes[].projected.sources", Field: "configMap", NameField: "name", RewrittenAtCreate: true, read: projectedConfigMap},
	{Via: Projected, Kind: Secret, List: "volumes[].projected.sources", Field: "secret", NameField: "name", RewrittenAtCreate: true, read: projectedSecret},
	{Via: CSI, Kind: SecretProviderClass, List: "volumes", Field: "csi", NameField: "volumeAttributes." + CSIClassAttribute,
		Driver: CSIDriver, NameRequired: true, read: csiClass},
	{Via: EnvFrom, Kind: ConfigMap, List: "envFrom", Containers: ContainerLists, Field: "configMapRef", NameField: "name", RewrittenAtCreate: true, read: envFromConfigMap},
	{Via: EnvFrom, Kind: Secret, List: "envFrom", Containers: ContainerLists, Field: "secretRef", NameField: "name", RewrittenAtCreate: true, read: envFromSecret},
	{Via: Env, Kind: ConfigMap, List: "env", Containers: ContainerLists, Field: "valueFrom.configMapKeyRef", NameField: "name", RewrittenAtCreate: true, read: envConfigMapKey},
	{Via: Env, Kind: Secret, List: "env", Containers: ContainerLists, Field: "valueFrom.secretKeyRef", NameField: "name", RewrittenAtCreate: true, read: envSecretKey},
}

// ContainerList is one of a pod spec's three lists of containers.
type ContainerList struct {
	Type  ContainerType
	Field string
	// PresentAtCreate says a pod can have containers in the list when it
	// is created. Ephemeral containers are added to a running pod through
	// its ephemeralcontainers subresource (the API server refuses a pod
	// created with any), so nothing of theirs is rewritten at CREATE.
	PresentAtCreate bool
}

// ContainerLists are the container lists in the order FromPodSpec reads
// them.
var ContainerLists = []ContainerList{
	{Type: Init, Field: "initContainers", PresentAtCreate: true},
	{Type: Regular, Field: "containers", PresentAtCreate: true},
	{Type: Ephemeral, Field: "ephemeralContainers", PresentAtCreate: false},
}

// Lists are the lists on the way from the pod spec (or a container) to an
// item of the entry's List, outermost first: [volumes projected.sources].
func (e Entry) Lists() []string { return strings.Split(e.List, "[].") }

// RewrittenAtCreate says revision.PodPatch points r at its snapshot when a
// pod is created: its entry says so, and a container's own reference sits
// in a container the pod can have then. A volume is the pod's, whichever
// containers mount it.
func (r Ref) RewrittenAtCreate() bool {
	for _, e := range Entries {
		if e.Via != r.Via || e.Kind != r.Kind {
			continue
		}
		if !e.RewrittenAtCreate || len(e.Containers) == 0 {
			return e.RewrittenAtCreate
		}
		return slices.ContainsFunc(e.Containers, func(l ContainerList) bool { return l.Type == r.ContainerType && l.PresentAtCreate })
	}
	return false
}

// use is what an entry reads from one list item.
type use struct {
	name     string
	optional *bool
	// key is the one key an env var reads.
	key string
	// items are the keys a volume source writes as files (none for every
	// key), and mode the mode of the files that set none of their own.
	items []corev1.KeyToPath
	mode  int32
	// driver is a csi volume's driver.
	driver string
}

// first finds the first entry via the given Via that item holds.
func first(via Via, item any) (Entry, use, bool) {
	for _, e := range Entries {
		if e.Via != via {
			continue
		}
		if u, ok := e.read(item); ok && (e.Driver == "" || u.driver == e.Driver) && (!e.NameRequired || u.name != "") {
			return e, u, true
		}
	}
	return Entry{}, use{}, false
}

// ref is the reference u makes through e in the list item at root (the pod
// spec's path or a container's) and the indexes of the entry's Lists.
func (e Entry) ref(u use, root string, indexes ...int) Ref {
	// Built in one buffer, Path a prefix of NamePath: every review finds
	// each reference of its pod spec, some several times.
	b := make([]byte, 0, len(root)+len(e.List)+8*len(indexes)+len(e.Field)+len(e.NameField)+2)
	b = append(b, root...)
	rest := e.List
	for k := 0; rest != "" || k == 0; k++ {
		list, after, _ := strings.Cut(rest, "[].")
		b = append(append(append(b, '.'), list...), '[')
		b = append(strconv.AppendInt(b, int64(indexes[k]), 10), ']')
		rest = after
	}
	b = append(append(b, '.'), e.Field...)
	n := len(b)
	namePath := string(append(append(b, '.'), e.NameField...))
	return Ref{Kind: e.Kind, Name: u.name, Optional: isTrue(u.optional), Via: e.Via, Path: namePath[:n], NamePath: namePath}
}

// FromPodSpec returns every ConfigMap and Secret reference in spec: volumes
// first, then each container's envFrom and env, init containers before
// regular before ephemeral, each in spec order.
func FromPodSpec(spec *corev1.PodSpec) []Ref {
	if spec == nil {
		return nil
	}
	cs := containersOf(spec)
	var out []Ref
	for i := range spec.Volumes {
		for _, src := range volumeSources(&spec.Volumes[i], i) {
			out = append(out, mounted(src, cs)...)
		}
	}
	for _, c := range cs {
		out = append(out, c.envRefs()...)
	}
	return out
}

// CSIFromPodSpec returns the SecretProviderClasses the pod spec mounts
// through the Secrets Store CSI driver, one Ref per mount as for volumes.
// They are apart from FromPodSpec's because nothing of them is in the
// cluster's ConfigMaps and Secrets: their content is outside, and only the
// versions the driver reports per pod tell a rotation (internal/secretversions).
// A csi volume of the driver without a class names nothing; the driver
// refuses to mount it.
func CSIFromPodSpec(spec *corev1.PodSpec) []Ref {
	if spec == nil {
		return nil
	}
	cs := containersOf(spec)
	var out []Ref
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if e, u, ok := first(CSI, v); ok {
			src := e.ref(u, "spec", i)
			src.Volume = v.Name
			out = append(out, mounted(src, cs)...)
		}
	}
	return out
}

// CSIClasses lists the SecretProviderClasses a pod spec mounts, sorted and
// unique.
func CSIClasses(spec *corev1.PodSpec) []string {
	var out []string
	for _, r := range CSIFromPodSpec(spec) {
		out = append(out, r.Name)
	}
	return sortedUnique(out)
}

// container flattens the three container types, which share these fields
// but not a Go type.
type container struct {
	typ     ContainerType
	name    string
	path    string
	mounts  []corev1.VolumeMount
	envFrom []corev1.EnvFromSource
	env     []corev1.EnvVar
}

func containersOf(spec *corev1.PodSpec) []container {
	var cs []container
	for _, list := range ContainerLists {
		for i, c := range list.containers(spec) {
			c.typ, c.path = list.Type, "spec."+list.Field+"["+strconv.Itoa(i)+"]"
			cs = append(cs, c)
		}
	}
	return cs
}

// containers reads the list's containers out of spec, without their type
// and path.
func (l ContainerList) containers(spec *corev1.PodSpec) []container {
	var cs []container
	switch l.Type {
	case Init:
		for _, c := range spec.InitContainers {
			cs = append(cs, container{name: c.Name, mounts: c.VolumeMounts, envFrom: c.EnvFrom, env: c.Env})
		}
	case Regular:
		for _, c := range spec.Containers {
			cs = append(cs, container{name: c.Name, mounts: c.VolumeMounts, envFrom: c.EnvFrom, env: c.Env})
		}
	case Ephemeral:
		for _, c := range spec.EphemeralContainers {
			cs = append(cs, container{name: c.Name, mounts: c.VolumeMounts, envFrom: c.EnvFrom, env: c.Env})
		}
	}
	return cs
}

func (c container) envRefs() []Ref {
	var out []Ref
	for j := range c.envFrom {
		from := &c.envFrom[j]
		if e, u, ok := first(EnvFrom, from); ok {
			r := e.ref(u, c.path, j)
			r.Container, r.ContainerType, r.EnvPrefix = c.name, c.typ, from.Prefix
			out = append(out, r)
		}
	}
	for j := range c.env {
		if e, u, ok := first(Env, &c.env[j]); ok {
			r := e.ref(u, c.path, j)
			r.Container, r.ContainerType, r.Keys = c.name, c.typ, []string{u.key}
			out = append(out, r)
		}
	}
	return out
}

// volumeSources returns the ConfigMap and Secret sources of one volume,
// without mount details: its own source, or else its projected ones. Other
// projected sources (downwardAPI, serviceAccountToken, clusterTrustBundle,
// podCertificate) are not ConfigMaps or Secrets.
func volumeSources(v *corev1.Volume, i int) []Ref {
	if e, u, ok := first(Volume, v); ok {
		r := e.ref(u, "spec", i)
		r.Volume, r.Keys, r.MaxMode, r.Files = v.Name, itemKeys(u.items), maxMode(u.mode, u.items), itemFiles(u.items)
		return []Ref{r}
	}
	if v.Projected == nil {
		return nil
	}
	mode := modeOr(v.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
	var out []Ref
	for k := range v.Projected.Sources {
		if e, u, ok := first(Projected, &v.Projected.Sources[k]); ok {
			r := e.ref(u, "spec", i, k)
			r.Volume, r.Keys, r.MaxMode, r.Files = v.Name, itemKeys(u.items), maxMode(mode, u.items), itemFiles(u.items)
			out = append(out, r)
		}
	}
	return out
}

// mounted expands a volume source into one Ref per mount of its volume.
func mounted(src Ref, cs []container) []Ref {
	var out []Ref
	for _, c := range cs {
		for k, m := range c.mounts {
			if m.Name != src.Volume {
				continue
			}
			r := src
			r.Keys, r.Files = slices.Clone(src.Keys), maps.Clone(src.Files)
			r.Container, r.ContainerType = c.name, c.typ
			r.MountFieldPath = c.path + ".volumeMounts[" + strconv.Itoa(k) + "]"
			r.MountPath, r.SubPath, r.SubPathExpr, r.ReadOnly = m.MountPath, m.SubPath, m.SubPathExpr, m.ReadOnly
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return []Ref{src}
	}
	return out
}

// itemKeys is nil for no items because the kubelet then projects every key.
func itemKeys(items []corev1.KeyToPath) []string {
	if len(items) == 0 {
		return nil
	}
	keys := make([]string, 0, len(items))
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	return sortedUnique(keys)
}

// itemFiles maps the files items write to their keys; nil for no items.
func itemFiles(items []corev1.KeyToPath) map[string]string {
	if len(items) == 0 {
		return nil
	}
	files := make(map[string]string, len(items))
	for _, it := range items {
		files[path.Clean(it.Path)] = it.Key
	}
	return files
}

// modeOr is a volume's defaultMode, or the API's default when it sets none.
func modeOr(defaultMode *int32, fallback int32) int32 {
	if defaultMode != nil {
		return *defaultMode
	}
	return fallback
}

// maxMode is the bitwise OR of the modes of the files a volume source
// writes, def being the mode of those that set none of their own.
func maxMode(def int32, items []corev1.KeyToPath) int32 {
	if len(items) == 0 {
		return def
	}
	// With items, only listed keys become files, each with its own mode
	// or the default, so the default counts only if some item uses it.
	var m int32
	for _, it := range items {
		if it.Mode != nil {
			m |= *it.Mode
		} else {
			m |= def
		}
	}
	return m
}

func isTrue(b *bool) bool { return b != nil && *b }

func sortedUnique(keys []string) []string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return slices.Compact(keys)
}
