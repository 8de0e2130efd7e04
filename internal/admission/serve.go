package admission

import (
	"context"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Webhook serves h as an admission webhook named name: panics are recovered
// into a denial that carries the request UID, and every decision is logged
// with who asked about what, never with the object itself.
func Webhook(name string, h admission.Handler) *admission.Webhook {
	return &admission.Webhook{Handler: logged{name: name, next: h}, RecoverPanic: ptr.To(true)}
}

type logged struct {
	name string
	next admission.Handler
}

func (l logged) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	var resp admission.Response
	if problem := incomplete(req); problem != "" {
		resp = malformed(req, problem)
	} else {
		resp = l.next.Handle(ctx, req)
	}
	log := ctrl.Log.WithName("admission").WithValues(
		"webhook", l.name, "uid", req.UID, "operation", req.Operation,
		"kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name,
		"user", req.UserInfo.Username, "dryRun", ptr.Deref(req.DryRun, false),
		"allowed", resp.Allowed, "patched", len(resp.Patches) > 0, "warnings", len(resp.Warnings),
		"duration", time.Since(start))
	if !resp.Allowed || len(resp.Warnings) > 0 {
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		log.Info("admission decision", "message", msg)
	} else {
		log.V(1).Info("admission decision")
	}
	return resp
}

// incomplete says what a review lacks that every review the API server
// sends has. Such a review is refused by every webhook alike: a handler
// must never allow it because it found nothing it has rules for.
func incomplete(req admission.Request) string {
	switch {
	case req.UID == "":
		return "the request has no uid"
	case req.Kind.Kind == "" || req.Kind.Version == "":
		return "the kind is not set"
	case req.Resource.Resource == "" || req.Resource.Version == "":
		return "the resource is not set"
	case req.Operation == "":
		return "the operation is not set"
	}
	return ""
}
