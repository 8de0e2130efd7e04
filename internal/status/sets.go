package status

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
)

// Set is where one ConfigSet stands: a set waiting for its members has no
// delivery yet, so no workload's line shows it.
type Set struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Condition is the one of Ready, Reconciling and Stalled that is true
	// (Reconciling while the status describes an older generation).
	Condition string `json:"condition"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
}

// setsOf lists the ConfigSets as their conditions say they stand. A
// cluster without the ConfigSet CRD has none; without the right to read
// them, status still works and says what it cannot show.
func setsOf(ctx context.Context, c client.Reader, in []client.ListOption) ([]Set, string, error) {
	var list v1alpha1.ConfigSetList
	if read, note, err := listOptional(ctx, c, &list, in, "configsets.configward.dev", "", "where each ConfigSet stands does not show"); !read {
		return nil, note, err
	}
	out := make([]Set, 0, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		set := Set{Namespace: s.Namespace, Name: s.Name, Version: s.Spec.Version, Condition: delivery.Standing(s.Status.Conditions, s.Generation)}
		if c := meta.FindStatusCondition(s.Status.Conditions, set.Condition); c != nil && c.ObservedGeneration >= s.Generation {
			set.Reason, set.Message = c.Reason, c.Message
		} else {
			set.Message = "configward's controller has not looked at this generation yet"
		}
		out = append(out, set)
	}
	slices.SortFunc(out, func(a, b Set) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, "", nil
}
