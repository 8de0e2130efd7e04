package delivery

import (
	"cmp"
	"slices"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// SortNewestFirst orders deliveries newest first (see newer).
func SortNewestFirst(recs []*v1alpha1.ConfigDelivery) {
	slices.SortFunc(recs, func(a, b *v1alpha1.ConfigDelivery) int { return compareAge(b, a) })
}

// newer says whether a is newer than b.
func newer(a, b *v1alpha1.ConfigDelivery) bool { return compareAge(a, b) > 0 }

// compareAge orders deliveries by creation; records created in the same
// second by their sequence number, then by name.
func compareAge(a, b *v1alpha1.ConfigDelivery) int {
	return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Spec.Sequence, b.Spec.Sequence), cmp.Compare(a.Name, b.Name))
}
