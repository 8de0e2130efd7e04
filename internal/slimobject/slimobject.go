// Package slimobject decodes the object of a workload or Pod review
// without the parts configward's admission paths never read: managed
// fields, status, containers' resources, probes and lifecycle hooks, the
// pod's affinity, overhead, resources and topology constraints, and a
// StatefulSet's volume claim templates. They are most of the cost of
// decoding a workload: quantities and times parsed, maps, slices and
// pointers built (BenchmarkDecoding: 432 allocations for a Deployment of
// 10 containers read whole, 105 slim).
//
// The decoder still reads their bytes (a review is one JSON text) but
// builds nothing from them, and the object handed on is the usual typed
// one with those fields empty, so every reader downstream (the rules, the
// hash, the pins, the channels, the reload agent) is unchanged. The parts
// of a pod spec are kept as slices of the review's bytes, so that an update
// can still tell whether the whole pod spec changed (SamePodSpecs).
//
// What the slim decoding promises, and FuzzSlimDecoding checks on every
// input: where the typed decoding of a text succeeds, the slim one succeeds
// with the same object, but for the fields above left empty. The slim
// decoding may accept a text the typed one refuses, when what is wrong
// lies only in a field it passes over; the API server never sends such a
// text (it decoded the object itself before admission).
package slimobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Target is where a review's object is decoded.
type Target interface {
	// Into is what the JSON decoder fills.
	Into() any
	// Object returns the typed object with what was decoded.
	Object() runtime.Object
}

// For returns a slim Target that fills obj, a new object of one of the
// built-in workload kinds or a Pod, or false for any other type.
func For(obj runtime.Object) (Target, bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &pod{into: o}, true
	case *appsv1.Deployment:
		return &deployment{into: o}, true
	case *appsv1.StatefulSet:
		return &statefulSet{into: o}, true
	case *appsv1.DaemonSet:
		return &daemonSet{into: o}, true
	case *appsv1.ReplicaSet:
		return &replicaSet{into: o}, true
	case *batchv1.Job:
		return &job{into: o}, true
	case *batchv1.CronJob:
		return &cronJob{into: o}, true
	}
	return nil, false
}

// Project returns obj as the slim decoding gives it, what it passes over
// left empty (obj itself when its type has no slim form): to compare an
// object decoded slim with one read whole, project both.
func Project(obj runtime.Object) (runtime.Object, error) {
	t, ok := For(reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object))
	if !ok {
		return obj, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if err := utiljson.Unmarshal(b, t.Into()); err != nil {
		return nil, err
	}
	return t.Object(), nil
}

// Typed is a Target that decodes every field into obj.
func Typed(obj runtime.Object) Target { return typed{obj} }

type typed struct{ obj runtime.Object }

func (t typed) Into() any              { return t.obj }
func (t typed) Object() runtime.Object { return t.obj }

// passed is a field the decoder passes over: its value is checked to be
// JSON (the whole text is, before decoding starts) and nothing is built.
type passed struct{}

func (*passed) UnmarshalJSON([]byte) error { return nil }

// kept is a part of a pod spec the decoder passes over, kept as the bytes
// of its value (slices of the review's own bytes, not copies: the review
// outlives its handling) so that an update can still tell whether the
// whole pod spec changed (see SamePodSpecs). Every occurrence is kept, in
// order: a key written twice is merged the way encoding/json merges it.
type kept struct {
	first []byte
	more  [][]byte
}

func (k *kept) UnmarshalJSON(b []byte) error {
	if k.first == nil {
		k.first = b
	} else {
		k.more = append(k.more, b)
	}
	return nil
}

func (k *kept) equal(o *kept) bool {
	if !bytes.Equal(k.first, o.first) || len(k.more) != len(o.more) {
		return false
	}
	for i := range k.more {
		if !bytes.Equal(k.more[i], o.more[i]) {
			return false
		}
	}
	return true
}

// decode decodes what was kept into into, as the typed decoding would
// have.
func (k *kept) decode(into any) error {
	if k.first == nil {
		return nil
	}
	for _, v := range append([][]byte{k.first}, k.more...) {
		if err := utiljson.Unmarshal(v, into); err != nil {
			return err
		}
	}
	return nil
}

// The shadows below embed the typed structs and hide the passed-over
// fields behind shallower ones of the same JSON name, which encoding/json
// fills instead.

type objectMeta struct {
	metav1.ObjectMeta `json:",inline"`
	ManagedFields     passed `json:"managedFields"`
}

// containerParts are the parts of a container passed over. They are
// written out in each shadow, not embedded: an embedded struct's fields
// would sit as deep as the typed container's own, and encoding/json drops
// a name two fields of the same depth claim.
type containerParts struct {
	Resources, LivenessProbe, ReadinessProbe, StartupProbe, Lifecycle *kept
}

func (p containerParts) equal(o containerParts) bool {
	return p.Resources.equal(o.Resources) && p.LivenessProbe.equal(o.LivenessProbe) && p.ReadinessProbe.equal(o.ReadinessProbe) &&
		p.StartupProbe.equal(o.StartupProbe) && p.Lifecycle.equal(o.Lifecycle)
}

func (p containerParts) decode(c *corev1.Container) error {
	return errors.Join(p.Resources.decode(&c.Resources), p.LivenessProbe.decode(&c.LivenessProbe), p.ReadinessProbe.decode(&c.ReadinessProbe),
		p.StartupProbe.decode(&c.StartupProbe), p.Lifecycle.decode(&c.Lifecycle))
}

type container struct {
	corev1.Container `json:",inline"`
	Resources        kept `json:"resources"`
	LivenessProbe    kept `json:"livenessProbe"`
	ReadinessProbe   kept `json:"readinessProbe"`
	StartupProbe     kept `json:"startupProbe"`
	Lifecycle        kept `json:"lifecycle"`
}

func (c *container) parts() containerParts {
	return containerParts{&c.Resources, &c.LivenessProbe, &c.ReadinessProbe, &c.StartupProbe, &c.Lifecycle}
}

type ephemeralContainer struct {
	corev1.EphemeralContainer `json:",inline"`
	Resources                 kept `json:"resources"`
	LivenessProbe             kept `json:"livenessProbe"`
	ReadinessProbe            kept `json:"readinessProbe"`
	StartupProbe              kept `json:"startupProbe"`
	Lifecycle                 kept `json:"lifecycle"`
}

func (c *ephemeralContainer) parts() containerParts {
	return containerParts{&c.Resources, &c.LivenessProbe, &c.ReadinessProbe, &c.StartupProbe, &c.Lifecycle}
}

type podSpec struct {
	corev1.PodSpec            `json:",inline"`
	InitContainers            []container          `json:"initContainers"`
	Containers                []container          `json:"containers"`
	EphemeralContainers       []ephemeralContainer `json:"ephemeralContainers"`
	Affinity                  kept                 `json:"affinity"`
	Overhead                  kept                 `json:"overhead"`
	Resources                 kept                 `json:"resources"`
	TopologySpreadConstraints kept                 `json:"topologySpreadConstraints"`
}

func (s *podSpec) typed() corev1.PodSpec {
	out := s.PodSpec
	out.InitContainers, out.Containers = containers(s.InitContainers), containers(s.Containers)
	if s.EphemeralContainers != nil {
		out.EphemeralContainers = make([]corev1.EphemeralContainer, len(s.EphemeralContainers))
		for i := range s.EphemeralContainers {
			out.EphemeralContainers[i] = s.EphemeralContainers[i].EphemeralContainer
		}
	}
	return out
}

// containers keeps nil as nil and [] as []: a spec compared with its old
// self must not differ by how an empty list was written.
func containers(cs []container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = cs[i].Container
	}
	return out
}

// PassedOver is what the slim decoding passed over in an object's pod
// spec.
type PassedOver struct{ spec *podSpec }

// PassedOverBy returns what t passed over in its object's pod spec, nil
// for a Target that passed over nothing of it (Typed).
func PassedOverBy(t Target) *PassedOver {
	if s, ok := t.(interface{ podSpec() *podSpec }); ok {
		return &PassedOver{s.podSpec()}
	}
	return nil
}

// SamePodSpecs reports whether two pod specs decoded slim, equal in what
// was decoded (the caller has compared them), are equal as whole pod
// specs: what was passed over is the same bytes, or, where the bytes
// differ, decodes to semantically equal parts (as equality.Semantic
// compares the typed specs). Specs decoded whole (nil) are equal already.
func SamePodSpecs(a, b *corev1.PodSpec, passedA, passedB *PassedOver) bool {
	if passedA == nil || passedB == nil {
		return passedA == passedB
	}
	x, y := passedA.spec, passedB.spec
	if len(x.InitContainers) != len(y.InitContainers) || len(x.Containers) != len(y.Containers) || len(x.EphemeralContainers) != len(y.EphemeralContainers) {
		return false
	}
	same := x.Affinity.equal(&y.Affinity) && x.Overhead.equal(&y.Overhead) && x.Resources.equal(&y.Resources) &&
		x.TopologySpreadConstraints.equal(&y.TopologySpreadConstraints)
	for i := 0; same && i < len(x.InitContainers); i++ {
		same = x.InitContainers[i].parts().equal(y.InitContainers[i].parts())
	}
	for i := 0; same && i < len(x.Containers); i++ {
		same = x.Containers[i].parts().equal(y.Containers[i].parts())
	}
	for i := 0; same && i < len(x.EphemeralContainers); i++ {
		same = x.EphemeralContainers[i].parts().equal(y.EphemeralContainers[i].parts())
	}
	if same {
		return true
	}
	wholeA, errA := passedA.whole(a)
	wholeB, errB := passedB.whole(b)
	return errA == nil && errB == nil && equality.Semantic.DeepEqual(wholeA, wholeB)
}

// whole is a copy of spec, decoded slim, with what was passed over
// decoded into it.
func (p *PassedOver) whole(spec *corev1.PodSpec) (*corev1.PodSpec, error) {
	out := spec.DeepCopy()
	s := p.spec
	if len(out.InitContainers) != len(s.InitContainers) || len(out.Containers) != len(s.Containers) || len(out.EphemeralContainers) != len(s.EphemeralContainers) {
		return nil, errors.New("the pod spec is not the one decoded")
	}
	errs := []error{s.Affinity.decode(&out.Affinity), s.Overhead.decode(&out.Overhead), s.Resources.decode(&out.Resources),
		s.TopologySpreadConstraints.decode(&out.TopologySpreadConstraints)}
	for i := range s.InitContainers {
		errs = append(errs, s.InitContainers[i].parts().decode(&out.InitContainers[i]))
	}
	for i := range s.Containers {
		errs = append(errs, s.Containers[i].parts().decode(&out.Containers[i]))
	}
	for i := range s.EphemeralContainers {
		var c corev1.Container
		err := s.EphemeralContainers[i].parts().decode(&c)
		e := &out.EphemeralContainers[i].EphemeralContainerCommon
		e.Resources, e.LivenessProbe, e.ReadinessProbe, e.StartupProbe, e.Lifecycle = c.Resources, c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

type podTemplate struct {
	Metadata objectMeta `json:"metadata"`
	Spec     podSpec    `json:"spec"`
}

func (t *podTemplate) typed() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: t.Metadata.ObjectMeta, Spec: t.Spec.typed()}
}

// head is what every kind has at its top; status is not named, so passed
// over as any unknown field is.
type head struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        objectMeta `json:"metadata"`
}

type pod struct {
	into *corev1.Pod
	head
	Spec podSpec `json:"spec"`
}

func (p *pod) podSpec() *podSpec { return &p.Spec }
func (p *pod) Into() any         { return p }
func (p *pod) Object() runtime.Object {
	*p.into = corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.Metadata.ObjectMeta, Spec: p.Spec.typed()}
	return p.into
}

type deployment struct {
	into *appsv1.Deployment
	head
	Spec struct {
		appsv1.DeploymentSpec `json:",inline"`
		Template              podTemplate `json:"template"`
	} `json:"spec"`
}

func (d *deployment) podSpec() *podSpec { return &d.Spec.Template.Spec }
func (d *deployment) Into() any         { return d }
func (d *deployment) Object() runtime.Object {
	*d.into = appsv1.Deployment{TypeMeta: d.TypeMeta, ObjectMeta: d.Metadata.ObjectMeta, Spec: d.Spec.DeploymentSpec}
	d.into.Spec.Template = d.Spec.Template.typed()
	return d.into
}

type statefulSet struct {
	into *appsv1.StatefulSet
	head
	Spec struct {
		appsv1.StatefulSetSpec `json:",inline"`
		Template               podTemplate `json:"template"`
		VolumeClaimTemplates   passed      `json:"volumeClaimTemplates"`
	} `json:"spec"`
}

func (s *statefulSet) podSpec() *podSpec { return &s.Spec.Template.Spec }
func (s *statefulSet) Into() any         { return s }
func (s *statefulSet) Object() runtime.Object {
	*s.into = appsv1.StatefulSet{TypeMeta: s.TypeMeta, ObjectMeta: s.Metadata.ObjectMeta, Spec: s.Spec.StatefulSetSpec}
	s.into.Spec.Template = s.Spec.Template.typed()
	return s.into
}

type daemonSet struct {
	into *appsv1.DaemonSet
	head
	Spec struct {
		appsv1.DaemonSetSpec `json:",inline"`
		Template             podTemplate `json:"template"`
	} `json:"spec"`
}

func (d *daemonSet) podSpec() *podSpec { return &d.Spec.Template.Spec }
func (d *daemonSet) Into() any         { return d }
func (d *daemonSet) Object() runtime.Object {
	*d.into = appsv1.DaemonSet{TypeMeta: d.TypeMeta, ObjectMeta: d.Metadata.ObjectMeta, Spec: d.Spec.DaemonSetSpec}
	d.into.Spec.Template = d.Spec.Template.typed()
	return d.into
}

type replicaSet struct {
	into *appsv1.ReplicaSet
	head
	Spec struct {
		appsv1.ReplicaSetSpec `json:",inline"`
		Template              podTemplate `json:"template"`
	} `json:"spec"`
}

func (r *replicaSet) podSpec() *podSpec { return &r.Spec.Template.Spec }
func (r *replicaSet) Into() any         { return r }
func (r *replicaSet) Object() runtime.Object {
	*r.into = appsv1.ReplicaSet{TypeMeta: r.TypeMeta, ObjectMeta: r.Metadata.ObjectMeta, Spec: r.Spec.ReplicaSetSpec}
	r.into.Spec.Template = r.Spec.Template.typed()
	return r.into
}

type jobSpec struct {
	batchv1.JobSpec `json:",inline"`
	Template        podTemplate `json:"template"`
}

func (s *jobSpec) typed() batchv1.JobSpec {
	out := s.JobSpec
	out.Template = s.Template.typed()
	return out
}

type job struct {
	into *batchv1.Job
	head
	Spec jobSpec `json:"spec"`
}

func (j *job) podSpec() *podSpec { return &j.Spec.Template.Spec }
func (j *job) Into() any         { return j }
func (j *job) Object() runtime.Object {
	*j.into = batchv1.Job{TypeMeta: j.TypeMeta, ObjectMeta: j.Metadata.ObjectMeta, Spec: j.Spec.typed()}
	return j.into
}

type cronJob struct {
	into *batchv1.CronJob
	head
	Spec struct {
		batchv1.CronJobSpec `json:",inline"`
		JobTemplate         struct {
			Metadata objectMeta `json:"metadata"`
			Spec     jobSpec    `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

func (c *cronJob) podSpec() *podSpec { return &c.Spec.JobTemplate.Spec.Template.Spec }
func (c *cronJob) Into() any         { return c }
func (c *cronJob) Object() runtime.Object {
	*c.into = batchv1.CronJob{TypeMeta: c.TypeMeta, ObjectMeta: c.Metadata.ObjectMeta, Spec: c.Spec.CronJobSpec}
	c.into.Spec.JobTemplate = batchv1.JobTemplateSpec{ObjectMeta: c.Spec.JobTemplate.Metadata.ObjectMeta, Spec: c.Spec.JobTemplate.Spec.typed()}
	return c.into
}
