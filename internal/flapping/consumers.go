package flapping

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/refs"
)

// Object says whether one ConfigMap or Secret of namespace is flapping now
// under th, with its record. A nil tracker knows of none.
func (t *Tracker) Object(th Threshold, namespace string, kind refs.Kind, name string) (Record, bool) {
	if t == nil {
		return Record{}, false
	}
	return t.Flapping(Key{Kind: string(kind), Namespace: namespace, Name: name}, th, time.Now())
}

// Input returns the first ConfigMap or Secret spec consumes that rolls the
// workload (rolls says which: hot config, which is counted where its
// delivery can be held, rolls nothing) and is flapping now under th: the
// workload's rollouts are held while it is (its other config's changes
// wait with it, and roll together once it has settled). A nil tracker
// knows of none.
func (t *Tracker) Input(th Threshold, namespace string, spec *corev1.PodSpec, rolls func(kind refs.Kind, name string) bool) (Key, Record, bool) {
	if t == nil || spec == nil {
		return Key{}, Record{}, false
	}
	for _, c := range refs.ConsumedBy(spec) {
		if rec, ok := t.Object(th, namespace, c.Kind, c.Name); ok && rolls(c.Kind, c.Name) {
			return Key{Kind: string(c.Kind), Namespace: namespace, Name: c.Name}, rec, true
		}
	}
	return Key{}, Record{}, false
}
