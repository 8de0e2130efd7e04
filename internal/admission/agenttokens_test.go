package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/reload"
)

func TestAgentTokens(t *testing.T) {
	request := func(username string, groups []string, audiences ...string) admission.Request {
		raw, _ := json.Marshal(authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web-canary"}}})
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "shop", Name: "default",
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, SubResource: "token",
			Kind:     metav1.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"},
			UserInfo: authenticationv1.UserInfo{Username: username, Groups: groups},
			Object:   runtime.RawExtension{Raw: raw}}}
	}
	editor := []string{"system:authenticated"}
	for _, tc := range []struct {
		name    string
		req     admission.Request
		allowed bool
	}{
		{"an editor mints an agent's token bound to a canary pod", request("jane", editor, reload.Audience), false},
		{"among other audiences", request("jane", editor, "vault", reload.Audience), false},
		{"a node name without the nodes' group", request("system:node:n1", editor, reload.Audience), false},
		{"a service account of kube-system", request("system:serviceaccount:kube-system:deployment-controller", editor, reload.Audience), false},
		{"the kubelet, for the agent's projected volume", request("system:node:n1", []string{NodesGroup, "system:authenticated"}, reload.Audience), true},
		{"a cluster administrator", request("admin", []string{"system:masters", "system:authenticated"}, reload.Audience), true},
		{"an editor's token of another audience", request("jane", editor, "vault"), true},
		{"an editor's token of the API server's audiences", request("jane", editor), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := (&AgentTokens{}).Handle(context.Background(), tc.req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v (%s), want %v", resp.Allowed, resp.Result.Message, tc.allowed)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, "only the kubelet mints it") {
				t.Errorf("refusal %q does not say who may", resp.Result.Message)
			}
		})
	}
	if resp := (&AgentTokens{Minters: []string{"platform-admins"}}).Handle(context.Background(), request("ops", []string{"platform-admins"}, reload.Audience)); !resp.Allowed {
		t.Errorf("a group named as minters: %s", resp.Result.Message)
	}
}
