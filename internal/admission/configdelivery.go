package admission

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/webhookserver"
)

// ConfigDeliveriesPath is where writes of ConfigDeliveries are judged.
const ConfigDeliveriesPath = "/mutate-configdeliveries"

// Fails closed: a record decides which revision consumers keep, so one
// written without this check could pin workloads to any snapshot, or
// credit a request to someone who did not make it. The status subresource
// and deletions are judged too: a status is what pins workloads, and an
// open record deleted is a delivery's history and requests lost.
// configward's own writes never reach it (the chart's matchCondition), so
// an outage of the webhook never stalls the controller.
//
// +kubebuilder:webhook:path=/mutate-configdeliveries,mutating=true,failurePolicy=fail,sideEffects=None,groups=configward.dev,resources=configdeliveries;configdeliveries/status,verbs=create;update;delete,versions=v1alpha1,name=configdeliveries.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5

// ConfigDeliveries lets only configward's controller create ConfigDelivery
// records, change what they deliver, their status and the metadata that
// can delete them; anyone RBAC lets update them may write a request
// (spec.request), and this webhook records who did from the API server's
// own account of the request.
type ConfigDeliveries struct {
	// ChangeControl names configward's own identities (Configward).
	ChangeControl func(*corev1.Namespace) changecontrol.Settings
}

// Intake implements webhookserver.Handler.
func (h *ConfigDeliveries) Intake() webhookserver.Intake[string] {
	in := ownKind("ConfigDelivery", "configdeliveries", func() client.Object { return &v1alpha1.ConfigDelivery{} })
	in.Operations = append(in.Operations, admissionv1.Delete)
	kind := in.Kind
	in.Kind = func(gk schema.GroupKind) (webhookserver.Kind[string], bool) {
		k, ok := kind(gk)
		k.Subresources = []string{"status"}
		return k, ok
	}
	return in
}

// recordDeleters are who may delete an open record besides configward:
// namespace deletion must complete.
var recordDeleters = []string{changecontrol.ServiceAccountUser("kube-system", "namespace-controller")}

// Review implements webhookserver.Handler.
func (h *ConfigDeliveries) Review(_ context.Context, r *webhookserver.Review[string]) admission.Response {
	user := r.Request.UserInfo
	if h.ChangeControl(nil).Configward.Includes(user) {
		return admission.Allowed("configward's controller")
	}
	name := fmt.Sprintf("ConfigDelivery %s/%s", r.Namespace, r.Name())
	switch {
	case r.Operation == admissionv1.Create:
		return admission.Denied(fmt.Sprintf("[config-delivery] %s: only configward's controller creates ConfigDeliveries (a record decides which revision of its config each workload keeps). "+
			"Ask an existing delivery to promote, halt or resume with `configward delivery`.", name))
	case r.SubResource == "status":
		return admission.Denied(fmt.Sprintf("[config-delivery] %s: only configward's controller writes a record's status, which decides the revision its consumers keep. "+
			"Use `configward delivery promote|halt|resume`.", name))
	}
	old, err := r.OldObject()
	if err != nil {
		return admission.Errored(400, err)
	}
	stored := old.(*v1alpha1.ConfigDelivery)
	if r.Operation == admissionv1.Delete {
		if !delivery.Open(stored.Status.State) || slices.Contains(recordDeleters, user.Username) {
			return admission.Allowed("")
		}
		return admission.Denied(fmt.Sprintf("[config-delivery] %s is open (%s): deleting it would lose the delivery's history and requests, and configward would start it again. "+
			"Let it finish (`configward delivery promote`), or turn delivery off for the namespace in its ConfigPolicy, which cancels it; finished records may be deleted.", name, orPlaced(stored.Status.State)))
	}
	rec := r.Object.(*v1alpha1.ConfigDelivery)
	if what := changedMetadata(&rec.ObjectMeta, &stored.ObjectMeta); what != "" {
		return admission.Denied(fmt.Sprintf("[config-delivery] %s: its %s may not be changed: configward's controller keeps them (owner references and finalizers decide when a record is deleted). "+
			"Use `configward delivery promote|halt|resume`.", name, what))
	}
	mine, theirs := rec.Spec, stored.Spec
	mine.Request, theirs.Request = nil, nil
	if !reflect.DeepEqual(mine, theirs) {
		return admission.Denied(fmt.Sprintf("[config-delivery] %s: only spec.request may be changed; configward's controller keeps the rest. "+
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
	if !delivery.Open(stored.Status.State) {
		// The controller never looks at a finished record again: a request
		// there would do nothing, and its generation would stay ahead of
		// the status' observedGeneration, so tools that wait would wait on
		// it for ever.
		return admission.Denied(fmt.Sprintf("[config-delivery] %s is finished (%s) and takes no requests. "+
			"`configward delivery` asks the newest delivery of a config; a finished one is changed by changing the config again.", name, stored.Status.State))
	}
	if req.RequestedBy == user.Username {
		return admission.Allowed("")
	}
	return admission.Patched("request recorded", jsonpatch.Operation{Operation: "add", Path: "/spec/request/requestedBy", Value: user.Username})
}

// changedMetadata names what of a record's metadata an update changes that
// only configward may: its owners and finalizers (which decide when the
// garbage collector deletes it) and its configward.dev/ labels and
// annotations; "" when none.
func changedMetadata(now, was *metav1.ObjectMeta) string {
	var what []string
	if !equality.Semantic.DeepEqual(now.OwnerReferences, was.OwnerReferences) {
		what = append(what, "owner references")
	}
	if !equality.Semantic.DeepEqual(now.Finalizers, was.Finalizers) {
		what = append(what, "finalizers")
	}
	if !sameOwn(now.Labels, was.Labels) {
		what = append(what, v1alpha1.GroupVersion.Group+"/ labels")
	}
	if !sameOwn(now.Annotations, was.Annotations) {
		what = append(what, v1alpha1.GroupVersion.Group+"/ annotations")
	}
	return strings.Join(what, " and ")
}

// sameOwn says a and b hold the same configward.dev/ keys and values.
func sameOwn(a, b map[string]string) bool {
	own := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if strings.HasPrefix(k, v1alpha1.GroupVersion.Group+"/") {
				out[k] = v
			}
		}
		return out
	}
	return maps.Equal(own(a), own(b))
}

// orPlaced names a record's state, "not placed yet" for none.
func orPlaced(s v1alpha1.DeliveryState) string {
	if s == "" {
		return "not placed yet"
	}
	return string(s)
}
