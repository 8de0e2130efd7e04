package admission

import (
	"context"
	"fmt"
	"reflect"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/webhookserver"
)

// ConfigDeliveriesPath is where writes of ConfigDeliveries are judged.
const ConfigDeliveriesPath = "/mutate-configdeliveries"

// Fails closed: a record decides which revision consumers keep, so one
// written without this check could pin workloads to any snapshot, or
// credit a request to someone who did not make it.
//
// +kubebuilder:webhook:path=/mutate-configdeliveries,mutating=true,failurePolicy=fail,sideEffects=None,groups=configward.dev,resources=configdeliveries,verbs=create;update,versions=v1alpha1,name=configdeliveries.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5

// ConfigDeliveries lets only configward's controller create ConfigDelivery
// records and change what they deliver; anyone RBAC lets update them may
// write a request (spec.request), and this webhook records who did from
// the API server's own account of the request.
type ConfigDeliveries struct {
	// ChangeControl names configward's own identities (Configward).
	ChangeControl func(*corev1.Namespace) changecontrol.Settings
}

// Intake implements webhookserver.Handler.
func (h *ConfigDeliveries) Intake() webhookserver.Intake[string] {
	return ownKind("ConfigDelivery", "configdeliveries", func() client.Object { return &v1alpha1.ConfigDelivery{} })
}

// Review implements webhookserver.Handler.
func (h *ConfigDeliveries) Review(_ context.Context, r *webhookserver.Review[string]) admission.Response {
	rec := r.Object.(*v1alpha1.ConfigDelivery)
	user := r.Request.UserInfo
	if h.ChangeControl(nil).Configward.Includes(user) {
		return admission.Allowed("configward's controller")
	}
	name := fmt.Sprintf("ConfigDelivery %s/%s", r.Namespace, r.Name())
	if r.Operation == admissionv1.Create {
		return admission.Denied(fmt.Sprintf("[config-delivery] %s: only configward's controller creates ConfigDeliveries (a record decides which revision of its config each workload keeps). "+
			"Ask an existing delivery to promote, halt or resume with `configward delivery`.", name))
	}
	old, err := r.OldObject()
	if err != nil {
		return admission.Errored(400, err)
	}
	stored := old.(*v1alpha1.ConfigDelivery)
	mine, theirs := rec.Spec, stored.Spec
	mine.Request, theirs.Request = nil, nil
	if !reflect.DeepEqual(mine, theirs) || rec.Annotations[v1alpha1.BreakGlassSeenAnnotation] != stored.Annotations[v1alpha1.BreakGlassSeenAnnotation] {
		return admission.Denied(fmt.Sprintf("[config-delivery] %s: only spec.request may be changed; configward's controller keeps the rest (and the record's "+v1alpha1.BreakGlassSeenAnnotation+" annotation). "+
			"Use `configward delivery promote|halt|resume`.", name))
	}
	req, was := rec.Spec.Request, stored.Spec.Request
	switch {
	case req == nil && was == nil:
		return admission.Allowed("")
	case req == nil:
		return admission.Denied(fmt.Sprintf("[config-delivery] %s: spec.request records the last request and who made it; it may be replaced by a new request, not removed.", name))
	case was != nil && req.ID == was.ID:
		if *req != *was {
			return admission.Denied(fmt.Sprintf("[config-delivery] %s: a request is not changed once written (id %s); write a new one with a new id.", name, req.ID))
		}
		return admission.Allowed("")
	}
	if req.RequestedBy == user.Username {
		return admission.Allowed("")
	}
	return admission.Patched("request recorded", jsonpatch.Operation{Operation: "add", Path: "/spec/request/requestedBy", Value: user.Username})
}
