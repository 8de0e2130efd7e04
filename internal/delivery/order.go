package delivery

import (
	"cmp"
	"slices"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// sortNewestFirst orders deliveries by creation, newest first; records
// created in the same second by name, which carries a sequence number.
func sortNewestFirst(recs []*v1alpha1.ConfigDelivery) {
	slices.SortFunc(recs, func(a, b *v1alpha1.ConfigDelivery) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(seq(b), seq(a)), cmp.Compare(b.Name, a.Name))
	})
}

func seq(d *v1alpha1.ConfigDelivery) int64 { return d.Spec.Sequence }
