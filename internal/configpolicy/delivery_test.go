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
		{"checks", analysisSpec(check(func(c *v1alpha1.AnalysisCheck) {})), ""},
		{"a webhook check", analysisSpec(v1alpha1.AnalysisCheck{Name: "w", Webhook: &v1alpha1.WebhookCheck{URL: "https://checks.example/v"}}), ""},
		{"query and webhook", analysisSpec(check(func(c *v1alpha1.AnalysisCheck) { c.Webhook = &v1alpha1.WebhookCheck{URL: "https://x"} })), "either a query or a webhook"},
		{"neither", analysisSpec(v1alpha1.AnalysisCheck{Name: "n"}), "either a query or a webhook"},
		{"no bound", analysisSpec(check(func(c *v1alpha1.AnalysisCheck) { c.Max = nil })), "needs max, min or both"},
		{"min above max", analysisSpec(check(func(c *v1alpha1.AnalysisCheck) { m := 0.5; c.Min = &m })), "above max"},
		{"a template that does not render", analysisSpec(check(func(c *v1alpha1.AnalysisCheck) { c.Query = `sum(x{pod=~"{{ .Podz }}"})` })), "checks[0].query"},
		{"compareTo on a webhook", analysisSpec(v1alpha1.AnalysisCheck{Name: "w", Webhook: &v1alpha1.WebhookCheck{URL: "https://x"}, CompareTo: "rest"}), "compareTo applies to query checks"},
		{"compareTo other", analysisSpec(check(func(c *v1alpha1.AnalysisCheck) { c.CompareTo = "before" })), `Unsupported value: "before"`},
		{"a Prometheus that is no URL", func() v1alpha1.ConfigPolicySpec {
			s := analysisSpec(check(func(c *v1alpha1.AnalysisCheck) {}))
			s.Delivery.Analysis.Prometheus = &v1alpha1.PrometheusSource{Address: "prometheus:9090"}
			return s
		}(), "must be an http or https URL"},
		// A token in an address would be copied into records and Events.
		{"a webhook URL with a query string", analysisSpec(v1alpha1.AnalysisCheck{Name: "w", Webhook: &v1alpha1.WebhookCheck{URL: "https://checks.example/v?token=tk-Q81"}}),
			`webhook.url: Invalid value: "https://checks.example/v": must not have a query string`},
		{"a webhook URL with user info", analysisSpec(v1alpha1.AnalysisCheck{Name: "w", Webhook: &v1alpha1.WebhookCheck{URL: "https://u:pw-Q81@checks.example/v"}}), "must not carry user info"},
		{"a Prometheus with a query string", func() v1alpha1.ConfigPolicySpec {
			s := analysisSpec(check(func(c *v1alpha1.AnalysisCheck) {}))
			s.Delivery.Analysis.Prometheus = &v1alpha1.PrometheusSource{Address: "https://prometheus:9090/?x=tk-Q81"}
			return s
		}(), "must not have a query string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateDelivery(field.NewPath("spec"), tc.spec).ToAggregate()
			switch {
			case tc.want == "" && errs != nil:
				t.Fatalf("refused: %v", errs)
			case tc.want != "" && (errs == nil || !strings.Contains(errs.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", errs, tc.want)
			case errs != nil && strings.Contains(errs.Error(), "Q81"):
				t.Errorf("the refusal quotes the credential: %v", errs)
			}
		})
	}
}

// check is a valid query check, changed by change.
func check(change func(*v1alpha1.AnalysisCheck)) v1alpha1.AnalysisCheck {
	limit := 0.01
	c := v1alpha1.AnalysisCheck{Name: "error-ratio", Query: `sum(rate(errors{pod=~"{{ .Pods }}"}[1m]))`, Max: &limit}
	change(&c)
	return c
}

func analysisSpec(checks ...v1alpha1.AnalysisCheck) v1alpha1.ConfigPolicySpec {
	return v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true}, Delivery: &v1alpha1.DeliverySettings{
		Waves: []v1alpha1.Wave{{Name: "all"}}, Analysis: &v1alpha1.Analysis{Prometheus: &v1alpha1.PrometheusSource{Address: "https://prometheus:9090"}, Checks: checks},
	}}
}
