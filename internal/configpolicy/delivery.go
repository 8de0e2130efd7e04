package configpolicy

import (
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/configward/configward/internal/analysis"
	"github.com/configward/configward/internal/api/v1alpha1"
)

// delivery returns the delivery settings in force in ns and the policy
// they come from: those of the first policy by name that selects ns and
// has any. Settings of several policies are not merged: waves of two
// policies do not combine into one order, so one policy decides, and the
// choice is stable. nil: changes reach every consumer as plain rollouts.
//
// Delivery needs revisions wherever it applies, and a policy with delivery
// settings must turn revisions on itself (validateDelivery), so revisions
// are on wherever its settings are in force (revisions: any policy turns
// them on); rollouts are on too, as a policy cannot turn revisions on and
// rollouts off.
func (a *Active) delivery(ns *corev1.Namespace) (policy string, s *v1alpha1.DeliverySettings) {
	for _, p := range a.selecting(ns) {
		if p.spec.Delivery != nil && (policy == "" || p.Name < policy) {
			policy, s = p.Name, p.spec.Delivery
		}
	}
	return policy, s
}

// validateDelivery refuses delivery settings that cannot work.
func validateDelivery(spec *field.Path, s v1alpha1.ConfigPolicySpec) field.ErrorList {
	d := s.Delivery
	if d == nil {
		return nil
	}
	var errs field.ErrorList
	at := spec.Child("delivery")
	if !s.Revisions.Enabled {
		errs = append(errs, field.Invalid(at, "waves", "delivery needs revisions: a consumer whose wave has not come keeps reading the revision it runs, "+
			"which only a snapshot of the old content can give; set spec.revisions.enabled: true in this policy"))
	}
	if len(d.Waves) == 0 {
		errs = append(errs, field.Required(at.Child("waves"), "at least one wave"))
	}
	seen := map[string]bool{}
	for i, w := range d.Waves {
		wp := at.Child("waves").Index(i)
		if w.Name == "" {
			errs = append(errs, field.Required(wp.Child("name"), "every wave has a name"))
		} else if seen[w.Name] {
			errs = append(errs, field.Duplicate(wp.Child("name"), w.Name))
		}
		seen[w.Name] = true
		if w.Selector != nil && w.Percent != nil {
			errs = append(errs, field.Invalid(wp, w.Name, "a wave takes its consumers by selector or by percent, not both"))
		}
		if w.Selector != nil {
			if _, err := metav1.LabelSelectorAsSelector(w.Selector); err != nil {
				errs = append(errs, field.Invalid(wp.Child("selector"), w.Selector, err.Error()))
			}
		}
		if w.Percent != nil && (*w.Percent < 1 || *w.Percent > 100) {
			errs = append(errs, field.Invalid(wp.Child("percent"), *w.Percent, "a share between 1 and 100"))
		}
		if w.PodPercent != nil && (*w.PodPercent < 1 || *w.PodPercent > 100) {
			errs = append(errs, field.Invalid(wp.Child("podPercent"), *w.PodPercent, "a share between 1 and 100"))
		}
	}
	if d.ProgressDeadlineSeconds < 0 {
		errs = append(errs, field.Invalid(at.Child("progressDeadlineSeconds"), d.ProgressDeadlineSeconds, "must not be negative"))
	}
	if d.PropagationSeconds != nil && *d.PropagationSeconds < 0 {
		errs = append(errs, field.Invalid(at.Child("propagationSeconds"), *d.PropagationSeconds, "must not be negative"))
	}
	if d.SoakSeconds != nil && *d.SoakSeconds < 0 {
		errs = append(errs, field.Invalid(at.Child("soakSeconds"), *d.SoakSeconds, "must not be negative"))
	}
	switch d.OnFailure {
	case "", v1alpha1.FailureHalt, v1alpha1.FailureRollback:
	default:
		errs = append(errs, field.NotSupported(at.Child("onFailure"), d.OnFailure, []string{string(v1alpha1.FailureHalt), string(v1alpha1.FailureRollback)}))
	}
	if d.BakeSeconds != nil && *d.BakeSeconds < 0 {
		errs = append(errs, field.Invalid(at.Child("bakeSeconds"), *d.BakeSeconds, "must not be negative"))
	}
	return append(errs, validateAnalysis(at.Child("analysis"), d.Analysis)...)
}

// validateAnalysis refuses checks that cannot be measured; the CRD's own
// rules say most of it, this says it again for settings that did not pass
// the API server (configward check) and adds what a schema cannot: a query
// template that does not render.
func validateAnalysis(at *field.Path, a *v1alpha1.Analysis) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if p := a.Prometheus; p != nil {
		if err := analysis.CheckAddress(p.Address); err != nil {
			errs = append(errs, field.Invalid(at.Child("prometheus", "address"), redacted(p.Address), err.Error()))
		}
	}
	if len(a.Checks) == 0 {
		errs = append(errs, field.Required(at.Child("checks"), "at least one check"))
	}
	for i, c := range a.Checks {
		cp := at.Child("checks").Index(i)
		switch {
		case (c.Query == "") == (c.Webhook == nil):
			errs = append(errs, field.Invalid(cp, c.Name, "a check has either a query or a webhook"))
		case c.Query != "":
			if err := analysis.Validate(c.Query); err != nil {
				errs = append(errs, field.Invalid(cp.Child("query"), c.Query, err.Error()))
			}
			if c.Max == nil && c.Min == nil {
				errs = append(errs, field.Required(cp.Child("max"), "a query check needs max, min or both"))
			}
			if c.Max != nil && c.Min != nil && *c.Min > *c.Max {
				errs = append(errs, field.Invalid(cp.Child("min"), *c.Min, "above max"))
			}
		default:
			if err := analysis.CheckAddress(c.Webhook.URL); err != nil {
				errs = append(errs, field.Invalid(cp.Child("webhook", "url"), redacted(c.Webhook.URL), err.Error()))
			}
			if c.CompareTo != "" {
				errs = append(errs, field.Invalid(cp.Child("compareTo"), c.CompareTo, "compareTo applies to query checks"))
			}
		}
		if c.CompareTo != "" && c.CompareTo != v1alpha1.CompareToRest {
			errs = append(errs, field.NotSupported(cp.Child("compareTo"), c.CompareTo, []string{v1alpha1.CompareToRest}))
		}
		if c.Interval.Duration < 0 {
			errs = append(errs, field.Invalid(cp.Child("interval"), c.Interval.Duration.String(), "must not be negative"))
		}
		if c.FailureLimit < 0 {
			errs = append(errs, field.Invalid(cp.Child("failureLimit"), c.FailureLimit, "must not be negative"))
		}
		if c.Tolerance != nil && *c.Tolerance < 0 {
			errs = append(errs, field.Invalid(cp.Child("tolerance"), *c.Tolerance, "must not be negative"))
		}
	}
	return errs
}

// DefaultPropagationSeconds is how long a wave of hot config waits for
// pods without a reload agent: the kubelet's default sync period (1
// minute) plus as much again for its cache and the pod's own jitter.
const DefaultPropagationSeconds int32 = 120

// DeliveryDefaults fills what the CRD's defaults fill, for settings that
// did not pass the API server's defaulting (configward check, tests).
func DeliveryDefaults(d v1alpha1.DeliverySettings) v1alpha1.DeliverySettings {
	if d.ProgressDeadlineSeconds == 0 {
		d.ProgressDeadlineSeconds = 300
	}
	if d.SoakSeconds == nil {
		soak := int32(60)
		d.SoakSeconds = &soak
	}
	if d.OnFailure == "" {
		d.OnFailure = v1alpha1.FailureHalt
	}
	if d.PropagationSeconds == nil {
		p := DefaultPropagationSeconds
		d.PropagationSeconds = &p
	}
	if d.Analysis != nil {
		a := *d.Analysis
		a.Checks = slices.Clone(a.Checks)
		for i := range a.Checks {
			c := &a.Checks[i]
			if c.Interval.Duration == 0 {
				c.Interval.Duration = 30 * time.Second
			}
			if c.OnNoData == "" {
				c.OnNoData = v1alpha1.InconclusiveWait
			}
			if c.OnError == "" {
				c.OnError = v1alpha1.InconclusiveWait
			}
		}
		d.Analysis = &a
	}
	return d
}

// redacted is an address as a refusal may quote it: without user info or
// query string, which is why it is refused and may carry a credential.
func redacted(address string) string {
	u, err := url.Parse(address)
	if err != nil {
		return "(not a URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
