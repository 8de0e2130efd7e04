package inventory

import (
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// Copied says whether configward copies the content of o, an object a pod
// spec names: o exists, is no copy itself (a snapshot or a channel), and is
// a ConfigMap or, where secrets says Secrets are copied too (a policy's
// revisions of Secrets), a Secret of a type that gets copies
// (revision.Copied). Its reload mode says into what: the contents of a
// rollout-mode object are kept as revisions (KeptAsRevisions), those of a
// hot one reach pods through channels where delivery is on.
func Copied(o Object, secrets bool) bool {
	if !o.Exists {
		return false
	}
	if _, isSnapshot := revision.SnapshotOf(o.Labels, o.Annotations); isSnapshot {
		return false
	}
	if _, _, isChannel := channel.Of(o.Labels, o.Annotations); isChannel {
		return false
	}
	switch o.Kind {
	case refs.ConfigMap:
		return true
	case refs.Secret:
		return secrets && revision.Copied(o.Type)
	}
	return false
}

// KeptAsRevisions says whether each content of o gets a snapshot that the
// pods of a revision read: o is copied (Copied) and rollout-mode. Hot and
// ignore objects get none: they are meant to change under running pods.
func KeptAsRevisions(o Object, secrets bool) bool {
	return o.Mode == Rollout && Copied(o, secrets)
}
