package delivery

import (
	"fmt"
	"strings"

	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/revision"
)

// Delivered says whether the changes of o, a ConfigMap or Secret, are
// delivered in waves in a namespace with policy: delivery is on there, and
// o's contents are kept as revisions (inventory.KeptAsRevisions), which a
// delivery pins its consumers to.
func Delivered(o inventory.Object, policy configpolicy.NamespacePolicy) bool {
	return policy.Delivery != nil && inventory.KeptAsRevisions(o, policy.RevisionSecrets)
}

// Channelled says whether o, a ConfigMap or Secret, reaches pods through
// channels in a namespace with policy: delivery is on there, and o is hot
// and copied (inventory.Copied).
func Channelled(o inventory.Object, policy configpolicy.NamespacePolicy) bool {
	return policy.Delivery != nil && o.Mode == inventory.Hot && inventory.Copied(o, policy.RevisionSecrets)
}

// RecordName names the seq-th delivery of src: the kind, the config's name
// (cut to keep the name within a DNS subdomain's length) and seq.
func RecordName(src revision.Source, seq int64) string {
	name := src.Name
	if len(name) > 200 {
		name = name[:200]
	}
	return fmt.Sprintf("%s-%s-%d", strings.ToLower(string(src.Kind)), name, seq)
}

// SetRecordName names the delivery of one generation of the ConfigSet set
// (its name cut as RecordName cuts a config's).
func SetRecordName(set string, generation int64) string {
	if len(set) > 200 {
		set = set[:200]
	}
	return fmt.Sprintf("configset-%s-%d", set, generation)
}
