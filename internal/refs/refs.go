// Package refs lists the ConfigMaps and Secrets a pod spec consumes, how it
// consumes them and which keys it reads. It is pure: it sees only the spec,
// never the cluster, so the same answer serves admission, the rollout
// controller and the offline check.
//
// Field paths are rooted at a Pod ("spec.volumes[1].configMap"). For a pod
// template, replace the leading "spec" with the template's spec path (see
// workload.Type.PodSpecPath), e.g. "spec.template.spec.volumes[1].configMap".
package refs

import (
	"cmp"
	"fmt"
	"slices"

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
	for i, v := range spec.Volumes {
		for _, src := range volumeSources(v, fmt.Sprintf("spec.volumes[%d]", i)) {
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
	for i, v := range spec.Volumes {
		if v.CSI == nil || v.CSI.Driver != CSIDriver || v.CSI.VolumeAttributes[CSIClassAttribute] == "" {
			continue
		}
		src := Ref{Kind: SecretProviderClass, Name: v.CSI.VolumeAttributes[CSIClassAttribute], Via: CSI, Volume: v.Name,
			Path: fmt.Sprintf("spec.volumes[%d].csi", i)}
		out = append(out, mounted(src, cs)...)
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
	for i, c := range spec.InitContainers {
		cs = append(cs, container{Init, c.Name, fmt.Sprintf("spec.initContainers[%d]", i), c.VolumeMounts, c.EnvFrom, c.Env})
	}
	for i, c := range spec.Containers {
		cs = append(cs, container{Regular, c.Name, fmt.Sprintf("spec.containers[%d]", i), c.VolumeMounts, c.EnvFrom, c.Env})
	}
	for i, c := range spec.EphemeralContainers {
		cs = append(cs, container{Ephemeral, c.Name, fmt.Sprintf("spec.ephemeralContainers[%d]", i), c.VolumeMounts, c.EnvFrom, c.Env})
	}
	return cs
}

func (c container) envRefs() []Ref {
	var out []Ref
	for j, ef := range c.envFrom {
		r := Ref{Via: EnvFrom, Container: c.name, ContainerType: c.typ, EnvPrefix: ef.Prefix}
		switch {
		case ef.ConfigMapRef != nil:
			r.Kind, r.Name, r.Optional = ConfigMap, ef.ConfigMapRef.Name, isTrue(ef.ConfigMapRef.Optional)
			r.Path = fmt.Sprintf("%s.envFrom[%d].configMapRef", c.path, j)
		case ef.SecretRef != nil:
			r.Kind, r.Name, r.Optional = Secret, ef.SecretRef.Name, isTrue(ef.SecretRef.Optional)
			r.Path = fmt.Sprintf("%s.envFrom[%d].secretRef", c.path, j)
		default:
			continue
		}
		out = append(out, r)
	}
	for j, e := range c.env {
		if e.ValueFrom == nil {
			continue
		}
		r := Ref{Via: Env, Container: c.name, ContainerType: c.typ}
		switch vf := e.ValueFrom; {
		case vf.ConfigMapKeyRef != nil:
			r.Kind, r.Name, r.Optional = ConfigMap, vf.ConfigMapKeyRef.Name, isTrue(vf.ConfigMapKeyRef.Optional)
			r.Keys = []string{vf.ConfigMapKeyRef.Key}
			r.Path = fmt.Sprintf("%s.env[%d].valueFrom.configMapKeyRef", c.path, j)
		case vf.SecretKeyRef != nil:
			r.Kind, r.Name, r.Optional = Secret, vf.SecretKeyRef.Name, isTrue(vf.SecretKeyRef.Optional)
			r.Keys = []string{vf.SecretKeyRef.Key}
			r.Path = fmt.Sprintf("%s.env[%d].valueFrom.secretKeyRef", c.path, j)
		default:
			continue
		}
		out = append(out, r)
	}
	return out
}

// volumeSources returns the ConfigMap and Secret sources of one volume,
// without mount details. Other projected sources (downwardAPI,
// serviceAccountToken, clusterTrustBundle, podCertificate) are not
// ConfigMaps or Secrets.
func volumeSources(v corev1.Volume, path string) []Ref {
	base := Ref{Via: Volume, Volume: v.Name}
	switch {
	case v.ConfigMap != nil:
		s := v.ConfigMap
		base.Kind, base.Name, base.Optional = ConfigMap, s.Name, isTrue(s.Optional)
		base.Keys, base.MaxMode = itemKeys(s.Items), maxMode(s.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode, s.Items)
		base.Path = path + ".configMap"
		return []Ref{base}
	case v.Secret != nil:
		s := v.Secret
		base.Kind, base.Name, base.Optional = Secret, s.SecretName, isTrue(s.Optional)
		base.Keys, base.MaxMode = itemKeys(s.Items), maxMode(s.DefaultMode, corev1.SecretVolumeSourceDefaultMode, s.Items)
		base.Path = path + ".secret"
		return []Ref{base}
	case v.Projected != nil:
		var out []Ref
		base.Via = Projected
		for k, src := range v.Projected.Sources {
			r := base
			switch {
			case src.ConfigMap != nil:
				s := src.ConfigMap
				r.Kind, r.Name, r.Optional = ConfigMap, s.Name, isTrue(s.Optional)
				r.Keys, r.MaxMode = itemKeys(s.Items), maxMode(v.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode, s.Items)
				r.Path = fmt.Sprintf("%s.projected.sources[%d].configMap", path, k)
			case src.Secret != nil:
				s := src.Secret
				r.Kind, r.Name, r.Optional = Secret, s.Name, isTrue(s.Optional)
				r.Keys, r.MaxMode = itemKeys(s.Items), maxMode(v.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode, s.Items)
				r.Path = fmt.Sprintf("%s.projected.sources[%d].secret", path, k)
			default:
				continue
			}
			out = append(out, r)
		}
		return out
	}
	return nil
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
			r.Keys = slices.Clone(src.Keys)
			r.Container, r.ContainerType = c.name, c.typ
			r.MountFieldPath = fmt.Sprintf("%s.volumeMounts[%d]", c.path, k)
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

func maxMode(defaultMode *int32, fallback int32, items []corev1.KeyToPath) int32 {
	def := fallback
	if defaultMode != nil {
		def = *defaultMode
	}
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

// Consumption is everything a pod spec takes from one object.
type Consumption struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
	// Optional holds only when every use is optional: one required use is
	// enough for the pod to wait on the object.
	Optional bool `json:"optional"`
	// Keys is nil when some use takes every key, otherwise the sorted union.
	Keys []string `json:"keys"`
}

// Consumed merges refs per object, sorted by Kind then Name.
func Consumed(refs []Ref) []Consumption {
	type id struct {
		kind Kind
		name string
	}
	byID := map[id]*Consumption{}
	allKeys := map[id]bool{}
	var order []id
	for _, r := range refs {
		k := id{r.Kind, r.Name}
		c, seen := byID[k]
		if !seen {
			c = &Consumption{Kind: r.Kind, Name: r.Name, Optional: true}
			byID[k] = c
			order = append(order, k)
		}
		c.Optional = c.Optional && r.Optional
		if r.Keys == nil {
			allKeys[k] = true
		}
		c.Keys = append(c.Keys, r.Keys...)
	}
	slices.SortFunc(order, func(a, b id) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	out := make([]Consumption, 0, len(order))
	for _, k := range order {
		c := *byID[k]
		if allKeys[k] {
			c.Keys = nil
		} else {
			c.Keys = sortedUnique(c.Keys)
		}
		out = append(out, c)
	}
	return out
}
