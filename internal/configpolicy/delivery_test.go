package configpolicy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/configward/configward/internal/api/v1alpha1"
)

func TestValidateDelivery(t *testing.T) {
	pct := func(n int32) *int32 { return &n }
	waves := []v1alpha1.Wave{{Name: "canary", Percent: pct(10)}, {Name: "rest"}}
	for _, tc := range []struct {
		name string
		spec v1alpha1.ConfigPolicySpec
		want string // "" for valid
	}{
		{"with revisions", v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true}, Delivery: &v1alpha1.DeliverySettings{Waves: waves}}, ""},
		{"without revisions", v1alpha1.ConfigPolicySpec{Delivery: &v1alpha1.DeliverySettings{Waves: waves}},
			`spec.delivery: Invalid value: "waves": delivery needs revisions`},
		{"duplicate wave", v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true},
			Delivery: &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "a"}, {Name: "a"}}}}, `spec.delivery.waves[1].name: Duplicate value: "a"`},
		{"selector and percent", v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true},
			Delivery: &v1alpha1.DeliverySettings{Waves: []v1alpha1.Wave{{Name: "a", Percent: pct(5), Selector: &metav1.LabelSelector{}}}}}, "by selector or by percent, not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateDelivery(field.NewPath("spec"), tc.spec).ToAggregate()
			switch {
			case tc.want == "" && errs != nil:
				t.Fatalf("refused: %v", errs)
			case tc.want != "" && (errs == nil || !strings.Contains(errs.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", errs, tc.want)
			}
		})
	}
}
