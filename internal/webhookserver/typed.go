package webhookserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/slimobject"
)

// Handler judges reviews the adapter (Adapt) has checked and decoded:
// the same preamble for every webhook, so a handler starts from an object
// of a kind it judges, in an operation it judges, that came as the API
// server sends it. K is what the handler's Intake tells it about the kind
// (a workload kind's Type, say), found once per request.
type Handler[K any] interface {
	// Intake is read once, when the handler is adapted.
	Intake() Intake[K]
	Review(ctx context.Context, r *Review[K]) admission.Response
}

// Intake says which requests a handler judges and how to read them. A
// request outside it is allowed without a look; one that no API server
// sends (the kind does not match the resource, an object missing) is
// refused, never allowed by accident.
type Intake[K any] struct {
	// Operations are the operations judged.
	Operations []admissionv1.Operation
	// Kind returns how to read requests of kind gk, or false for a kind
	// the handler has no rules for.
	Kind func(gk schema.GroupKind) (Kind[K], bool)
	// Unjudged is why a request of such a kind is let through, with %s
	// for its kind: "configward has no workload rules for %s".
	Unjudged string
	// KeepBytes, when set and true at the time of a request, keeps the
	// objects' bytes (no one-pass decode): custom rules read the object as
	// the API server sent it.
	KeepBytes func() bool
}

// Kind is how a handler reads the requests of one kind.
type Kind[K any] struct {
	// Info is handed to the handler with each review of the kind.
	Info K
	// Resource is the resource, in the kind's group, that requests of the
	// kind must name.
	Resource string
	// New returns an empty object to decode into.
	New func() client.Object
	// OnePassVersion is the version whose Go type New returns, for which
	// the review and its objects are decoded in one pass (decoding is most
	// of a review's CPU); "" never, as for unstructured objects.
	OnePassVersion string
	// Subresources are the subresources judged; a write to another one is
	// allowed without a look.
	Subresources []string
}

// Review is one request the adapter has checked, with its object decoded.
type Review[K any] struct {
	admission.Request
	Kind Kind[K]
	// Object is the request's object, decoded for CREATE and UPDATE; nil
	// for DELETE.
	Object client.Object

	decoder Decoder
	old     client.Object
	oldErr  error
	oldRead bool
	// targets are what the objects were decoded into in one pass, nil
	// when they were decoded from their bytes.
	targets *decoded
}

// PassedOver returns what the one-pass decoding passed over in the pod
// specs of the old object and the object (see slimobject.SamePodSpecs),
// nil where it passed over nothing.
func (r *Review[K]) PassedOver() (old, object *slimobject.PassedOver) {
	if r.targets == nil {
		return nil, nil
	}
	return slimobject.PassedOverBy(r.targets.old), slimobject.PassedOverBy(r.targets.object)
}

// OldObject is the request's old object (UPDATE and DELETE), decoded on
// first use: most handlers need it on some paths only. Its error is the
// answer to give (see Undecodable).
func (r *Review[K]) OldObject() (client.Object, error) {
	if !r.oldRead {
		r.oldRead = true
		r.old = r.Kind.New()
		if err := r.decoder.DecodeRaw(r.Request.OldObject, r.old); err != nil {
			r.old, r.oldErr = nil, fmt.Errorf("configward: the old %s in this request cannot be decoded: %w", r.Request.Kind.Kind, err)
		}
	}
	return r.old, r.oldErr
}

// Name names the object for messages: the request's name, else the
// object's, else its generateName with a star (a create the API server has
// not named yet).
func (r *Review[K]) Name() string {
	switch {
	case r.Request.Name != "":
		return r.Request.Name
	case r.Object == nil:
		return ""
	case r.Object.GetName() != "":
		return r.Object.GetName()
	}
	return r.Object.GetGenerateName() + "*"
}

// Undecodable answers a request whose object cannot be decoded: the
// request is at fault (400).
func Undecodable(err error) admission.Response {
	return admission.Errored(http.StatusBadRequest, err)
}

// Adapt makes h an admission.Handler for Webhook.
func Adapt[K any](h Handler[K], decoder Decoder) admission.Handler {
	return &adapter[K]{next: h, intake: h.Intake(), decoder: decoder}
}

type adapter[K any] struct {
	next    Handler[K]
	intake  Intake[K]
	decoder Decoder
}

// Handle checks the request against the intake, decodes its object and
// hands it on. Webhook has refused reviews without a uid, kind, resource or
// operation already.
func (a *adapter[K]) Handle(ctx context.Context, req admission.Request) admission.Response {
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	k, ok := a.intake.Kind(gk)
	if !ok {
		return admission.Allowed(fmt.Sprintf(a.intake.Unjudged, req.Kind))
	}
	if req.Resource.Resource != k.Resource || req.Resource.Group != gk.Group {
		return malformed(req, "the kind does not match the resource")
	}
	if !slices.Contains(a.intake.Operations, req.Operation) {
		return admission.Allowed("")
	}
	if req.SubResource != "" && !slices.Contains(k.Subresources, req.SubResource) {
		return admission.Allowed("")
	}
	needsNew := req.Operation == admissionv1.Create || req.Operation == admissionv1.Update
	needsOld := req.Operation == admissionv1.Update || req.Operation == admissionv1.Delete
	if (needsNew && !present(req.Object)) || (needsOld && !present(req.OldObject)) {
		return malformed(req, fmt.Sprintf("%s of a %s without the objects it needs", req.Operation, req.Kind.Kind))
	}
	r := &Review[K]{Request: req, Kind: k, decoder: a.decoder}
	r.targets, _ = ctx.Value(decodedKey{}).(*decoded)
	if needsNew {
		r.Object = k.New()
		if err := a.decoder.DecodeRaw(req.Object, r.Object); err != nil {
			return Undecodable(fmt.Errorf("configward: the %s in this request cannot be decoded: %w", req.Kind.Kind, err))
		}
	}
	return a.next.Review(ctx, r)
}

// objectFor lets Webhook decode the review with its objects in one pass,
// for the kinds that allow it (see Kind.OnePassVersion), without what no
// handler reads where the kind has a slim form (see slimobject).
func (a *adapter[K]) objectFor(gvk metav1.GroupVersionKind) slimobject.Target {
	if a.intake.KeepBytes != nil && a.intake.KeepBytes() {
		return nil
	}
	k, ok := a.intake.Kind(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind})
	if !ok || k.OnePassVersion == "" || k.OnePassVersion != gvk.Version {
		return nil
	}
	obj := k.New()
	if t, ok := slimobject.For(obj); ok && !a.decoder.FullObjects {
		return t
	}
	return slimobject.Typed(obj)
}
