package admission

import (
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/rules"
)

// Recorder is where a handler's decisions leave their trace: Events on the
// objects, through Effects, which records only what could be real.
type Recorder struct {
	Events  recorder.EventRecorder
	Effects *effects.Ledger
}

// respond is the one way every handler turns an outcome into an answer:
// denied findings, one per line, become the denial; warned ones and the
// exemption notes become warnings; audited ones become audit annotations.
// Unless the request is a dry run, and when record says the request is
// worth it, findings are counted and, for a request let through, left as
// Events on obj (a refused object is not stored, and its denial is in the
// client's output).
func respond(out rules.Outcome, req admission.Request, obj client.Object, rec Recorder, record bool) admission.Response {
	dryRun := ptr.Deref(req.DryRun, false)
	d := out.Decision
	var resp admission.Response
	if len(d.Denied) > 0 {
		lines := make([]string, len(d.Denied))
		for i, f := range d.Denied {
			lines[i] = rules.Line(f)
		}
		resp = admission.Denied(strings.Join(lines, "\n"))
	} else {
		resp = admission.Allowed("")
	}
	for _, f := range d.Warned {
		resp.Warnings = append(resp.Warnings, rules.Warning(f))
	}
	for _, n := range out.Notes {
		resp.Warnings = append(resp.Warnings, rules.Warning(n))
	}
	if dryRun {
		return resp
	}
	for _, f := range d.Audited {
		if resp.AuditAnnotations == nil {
			resp.AuditAnnotations = map[string]string{}
		}
		l := rules.Line(f)
		if f.Exemption != "" {
			l += " (" + rules.ActionNote(f, rules.Audit) + ")"
		}
		if prev, ok := resp.AuditAnnotations[f.Rule]; ok {
			l = prev + "\n" + l
		}
		resp.AuditAnnotations[f.Rule] = l
	}
	if !record {
		return resp
	}
	if len(d.Denied) > 0 {
		rec.Effects.Refusal(req, func() { countFindings(d) })
	} else {
		rec.Effects.Record(req, obj, func(ref client.Object) { countFindings(d); rec.event(ref, d) })
	}
	return resp
}

// countFindings counts every finding by rule and action taken.
func countFindings(d rules.Decision) {
	for action, fs := range map[rules.Action][]rules.Finding{rules.Deny: d.Denied, rules.Warn: d.Warned, rules.Audit: d.Audited} {
		for _, f := range fs {
			decisions.WithLabelValues(f.Rule, string(action)).Inc()
			if f.Exemption != "" {
				exemptionsUsed.WithLabelValues(f.Rule).Inc()
			}
		}
	}
}

// event leaves an Event on the object for each finding it was let through
// with, so the detail survives after kubectl's output scrolls away.
func (rec Recorder) event(obj client.Object, d rules.Decision) {
	if rec.Events == nil || obj.GetName() == "" {
		return
	}
	for action, fs := range map[rules.Action][]rules.Finding{rules.Warn: d.Warned, rules.Audit: d.Audited} {
		for _, f := range fs {
			rec.Events.Eventf(obj, nil, corev1.EventTypeWarning, rules.EventReason(f.Rule), "Admit", "%s (%s)", rules.Line(f), rules.ActionNote(f, action))
		}
	}
}

// invalid refuses a configward object the way the API server refuses an
// invalid one: 422 with every problem as a cause, which kubectl prints as
// `The ConfigPolicy "x" is invalid:` followed by one line per field.
func invalid(kind, name string, errs field.ErrorList) admission.Response {
	status := apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), name, errs).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}
