package refs

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

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

// ConsumedBy is Consumed(FromPodSpec(spec)), read by the same Entries
// without building a Ref: no field paths, no mount per container, which
// only rules and messages read. Every review and every controller look
// asks what a spec consumes, most of them several times; this is the
// cheap way to ask.
func ConsumedBy(spec *corev1.PodSpec) []Consumption {
	if spec == nil {
		return []Consumption{}
	}
	// Each use, and the keys of all of them in one list.
	type taken struct {
		kind     Kind
		name     string
		optional bool
		all      bool // every key
		from, to int  // its keys in keys
	}
	var uses []taken
	var keys []string
	take := func(e Entry, u use, all bool, key ...string) {
		from := len(keys)
		keys = append(keys, key...)
		uses = append(uses, taken{kind: e.Kind, name: u.name, optional: isTrue(u.optional), all: all, from: from, to: len(keys)})
	}
	takeItems := func(e Entry, u use) {
		from := len(keys)
		for _, it := range u.items {
			keys = append(keys, it.Key)
		}
		uses = append(uses, taken{kind: e.Kind, name: u.name, optional: isTrue(u.optional), all: len(u.items) == 0, from: from, to: len(keys)})
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if e, u, ok := first(Volume, v); ok {
			takeItems(e, u)
			continue
		}
		if v.Projected == nil {
			continue
		}
		for k := range v.Projected.Sources {
			if e, u, ok := first(Projected, &v.Projected.Sources[k]); ok {
				takeItems(e, u)
			}
		}
	}
	for _, l := range ContainerLists {
		for _, c := range l.containers(spec) {
			for j := range c.envFrom {
				if e, u, ok := first(EnvFrom, &c.envFrom[j]); ok {
					take(e, u, true)
				}
			}
			for j := range c.env {
				if e, u, ok := first(Env, &c.env[j]); ok {
					take(e, u, false, u.key)
				}
			}
		}
	}
	slices.SortFunc(uses, func(a, b taken) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	out := make([]Consumption, 0, len(uses))
	for start := 0; start < len(uses); {
		end := start + 1
		for end < len(uses) && uses[end].kind == uses[start].kind && uses[end].name == uses[start].name {
			end++
		}
		c := Consumption{Kind: uses[start].kind, Name: uses[start].name, Optional: true}
		all := false
		for _, t := range uses[start:end] {
			c.Optional = c.Optional && t.optional
			all = all || t.all
		}
		if !all {
			for _, t := range uses[start:end] {
				c.Keys = append(c.Keys, keys[t.from:t.to]...)
			}
			slices.Sort(c.Keys)
			c.Keys = slices.Compact(c.Keys)
		}
		out = append(out, c)
		start = end
	}
	return out
}
