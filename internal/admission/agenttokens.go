package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/reload"
)

// AgentTokensPath is where token requests of the reload agent's audience
// are judged.
const AgentTokensPath = "/validate-agent-tokens"

// AgentTokensMatchCondition sends the webhook only the token requests of
// the agent's audience: every other token (a pod's own, a client's) never
// waits on configward. The chart's webhook and every test install carry it.
const AgentTokensMatchCondition = "has(object.spec.audiences) && object.spec.audiences.exists(a, a == '" + reload.Audience + "')"

// Fails closed: a token of the agent's audience speaks for a pod's program
// to the delivery gate.
//
// +kubebuilder:webhook:path=/validate-agent-tokens,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=serviceaccounts/token,verbs=create,versions=v1,name=agent-tokens.validate.configward.dev,admissionReviewVersions=v1,timeoutSeconds=5

// AgentTokens lets only the kubelet, which mounts the agent's projected
// token into the agent's container, and cluster administrators mint tokens
// of the agent's audience. The built-in edit role may create
// serviceaccounts/token: an editor could otherwise mint a token bound to
// any pod of the namespace (a canary's) and report for its program,
// halting a delivery or passing a wave its program never spoke on.
//
// A kubelet gets one only for a pod that mounts it in the agent's own
// container: a pod whose other containers mount a token of the agent's
// audience would let its program (or whoever may exec into it) hold the
// agent's credential, so the token is refused and the pod does not start.
// This is judged when the token is minted rather than when the pod is
// written, so no scoping of the pod webhooks can let such a pod past it.
type AgentTokens struct {
	// Minters are the groups, besides the nodes, that may mint them: the
	// cluster's administrators (system:masters unless set).
	Minters []string
	// Pods (a cache) and Live (the API server, for a pod the cache has not
	// seen yet) read the pod a kubelet's token is bound to.
	Pods, Live client.Reader
}

// NodesGroup is the group of every kubelet's identity.
const NodesGroup = "system:nodes"

// DefaultAgentTokenMinters are the administrators who may mint an agent's
// token by hand: the API server's superusers.
var DefaultAgentTokenMinters = []string{"system:masters"}

func (h *AgentTokens) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Resource.Resource != "serviceaccounts" || req.SubResource != "token" {
		return admission.Allowed("configward judges token requests only")
	}
	var tr authenticationv1.TokenRequest
	if err := json.Unmarshal(req.Object.Raw, &tr); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("configward: the TokenRequest cannot be decoded: %w", err))
	}
	if !slices.Contains(tr.Spec.Audiences, reload.Audience) {
		return admission.Allowed("not a reload agent's token")
	}
	user := req.UserInfo
	if isNode(user) {
		if why, err := h.mountedElsewhere(ctx, req.Namespace, tr.Spec.BoundObjectRef); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("configward: reading the pod of the token: %w", err))
		} else if why != "" {
			return admission.Denied(why)
		}
		return admission.Allowed("the kubelet mounts the reload agent's projected token")
	}
	if minter := slices.IndexFunc(user.Groups, func(g string) bool { return slices.Contains(h.minters(), g) }); minter >= 0 {
		return admission.Allowed("a cluster administrator (" + user.Groups[minter] + ")")
	}
	return admission.Denied(fmt.Sprintf("[agent-token] %s may not mint a token of audience %s for %s/%s: such a token speaks for a pod's program to configward's delivery gate "+
		"(a report that its program applied or rejected a change), so only the kubelet mints it, for the reload agent's own projected volume, and cluster administrators (%s). "+
		"To give a pod an agent, annotate its template configward.dev/reload-agent; configward injects the agent and its token.",
		user.Username, reload.Audience, req.Namespace, req.Name, strings.Join(h.minters(), ", ")))
}

func (h *AgentTokens) minters() []string {
	if len(h.Minters) == 0 {
		return DefaultAgentTokenMinters
	}
	return h.Minters
}

// isNode says the request is a kubelet's: its node identity, in the nodes'
// group.
func isNode(u authenticationv1.UserInfo) bool {
	return strings.HasPrefix(u.Username, "system:node:") && slices.Contains(u.Groups, NodesGroup)
}

// mountedElsewhere says why the pod a kubelet's token is bound to may not
// have it: a container other than the agent mounts a volume that projects
// a token of the agent's audience. "" when none does, or when the token is
// bound to no pod (then no pod mounts it).
func (h *AgentTokens) mountedElsewhere(ctx context.Context, namespace string, ref *authenticationv1.BoundObjectReference) (string, error) {
	if ref == nil || ref.Kind != "Pod" || h.Pods == nil {
		return "", nil
	}
	var pod corev1.Pod
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	err := h.Pods.Get(ctx, key, &pod)
	if apierrors.IsNotFound(err) && h.Live != nil {
		err = h.Live.Get(ctx, key, &pod)
	}
	if err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if c := reload.AgentTokenMountedElsewhere(&pod.Spec); c != "" {
		return fmt.Sprintf("[agent-token] Pod %s/%s mounts a token of audience %s in container %s: only configward's reload agent may hold that token, "+
			"which speaks for the pod's program to configward's delivery gate. Remove the volume from the container.", namespace, pod.Name, reload.Audience, c), nil
	}
	return "", nil
}
