package admission

import (
	"context"
	"fmt"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/webhookserver"
)

// BreakGlassSealsPath is where writes that set a break-glass reason get
// the reason sealed to their content.
const BreakGlassSealsPath = "/mutate-break-glass"

// BreakGlassSealsMatchCondition sends the webhook only the writes that
// carry a break-glass reason; the chart's webhook and every test install
// carry it.
const BreakGlassSealsMatchCondition = "has(object.metadata.annotations) && '" + v1alpha1.BreakGlassAnnotation + "' in object.metadata.annotations"

// Ignores failures: a write it cannot seal is still the write change
// control judges, and its reason is then honoured by no delivery, which
// asks for approvals as usual (the safe side).
//
// +kubebuilder:webhook:path=/mutate-break-glass,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=configmaps;secrets,verbs=create;update,versions=v1,name=break-glass.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5

// BreakGlassSeals seals a break-glass reason to the content of the write
// that sets it (delivery.BreakGlassSeal, in v1alpha1.BreakGlassSealAnnotation),
// with whether it asks for an immediate delivery. The seal is decided and
// written in the write itself, so a reason applies to that write's content
// only: a delivery of any other content (a later pipeline write that
// leaves the reason on the object, one made before delivery was turned
// on) does not honour it, and nothing done to the records afterwards
// re-arms it. Under dry-run the seal is in the answer only: nothing is
// kept, and nothing else is written.
type BreakGlassSeals struct {
	Keys *hashkey.Source
}

// Intake implements webhookserver.Handler.
func (h *BreakGlassSeals) Intake() webhookserver.Intake[string] {
	return configKinds("configward seals break-glass reasons of ConfigMaps and Secrets only, not %s",
		[]admissionv1.Operation{admissionv1.Create, admissionv1.Update}, "ConfigMap", "Secret")
}

// Review implements webhookserver.Handler.
func (h *BreakGlassSeals) Review(_ context.Context, r *webhookserver.Review[string]) admission.Response {
	obj := r.Object
	var was map[string]string
	if r.Operation == admissionv1.Update {
		old, err := r.OldObject()
		if err != nil {
			return webhookserver.Undecodable(err)
		}
		was = old.GetAnnotations()
	}
	now := obj.GetAnnotations()
	reason := changecontrol.NewBreakGlass(was, now)
	if reason == "" {
		return admission.Allowed("no new break-glass reason")
	}
	name := obj.GetName()
	if name == "" {
		name = r.Name()
	}
	content := revision.SnapshotName(h.Keys.Current().Bytes(), r.Namespace, refs.Kind(r.Kind.Info), name, digest.Content(inventory.KeyDigestsOf(obj), nil))
	seal := delivery.BreakGlassSeal(h.Keys.Current().Bytes(), content, reason, now[v1alpha1.BreakGlassDeliveryAnnotation] == v1alpha1.BreakGlassImmediate)
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(v1alpha1.BreakGlassSealAnnotation, "~", "~0"), "/", "~1")
	return admission.Patched(fmt.Sprintf("break-glass reason %q sealed to this write's content", reason), jsonpatch.Operation{Operation: "add", Path: path, Value: seal})
}
