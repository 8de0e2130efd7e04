package admission

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Requests that never reach the inventory: the handler must answer them
// clearly on its own.
func TestConfigHashRequestsItDoesNotStamp(t *testing.T) {
	h := &ConfigHash{Decoder: admission.NewDecoder(clientgoscheme.Scheme)}
	deployment := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	for name, tc := range map[string]struct {
		req         admissionv1.AdmissionRequest
		wantAllowed bool
		wantCode    int32
	}{
		"delete": {admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Kind: deployment}, true, 200},
		"not a workload": {admissionv1.AdmissionRequest{Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Service"}}, true, 200},
		"a kind that disagrees with its group": {admissionv1.AdmissionRequest{Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Deployment"}}, true, 200},
		"undecodable object": {admissionv1.AdmissionRequest{Operation: admissionv1.Create, Kind: deployment,
			Object: runtime.RawExtension{Raw: []byte(`{"spec": 42`)}}, false, 400},
		"opted out": {admissionv1.AdmissionRequest{Operation: admissionv1.Create, Kind: deployment,
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","annotations":{"configward.dev/rollout":"disabled"}}}`)}}, true, 200},
		"pod owned by a controller": {admissionv1.AdmissionRequest{Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"1","controller":true}]}}`)}}, true, 200},
		// A hash written into a Deployment's ReplicaSet makes the deployment
		// controller take it for the current one, and no pod is replaced.
		"replicaset owned by a deployment": {admissionv1.AdmissionRequest{Operation: admissionv1.Update, Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"x","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"d","uid":"1","controller":true}]}}`)}}, true, 200},
		"job owned by a cronjob": {admissionv1.AdmissionRequest{Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x","ownerReferences":[{"apiVersion":"batch/v1","kind":"CronJob","name":"c","uid":"1","controller":true}]}}`)}}, true, 200},
	} {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: tc.req})
			if resp.Allowed != tc.wantAllowed || len(resp.Patches) != 0 {
				t.Fatalf("allowed=%v patches=%v, want allowed=%v and no patch", resp.Allowed, resp.Patches, tc.wantAllowed)
			}
			if resp.Result != nil && resp.Result.Code != 0 && resp.Result.Code != tc.wantCode {
				t.Fatalf("code %d, want %d (%s)", resp.Result.Code, tc.wantCode, resp.Result.Message)
			}
		})
	}
}
