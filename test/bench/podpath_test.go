package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/webhookserver"
)

// BenchmarkPodPathReview measures configward's CPU for one review on the
// Pod path of config revisions: an AdmissionReview of a pod of the
// fixture's Deployment (10 ConfigMaps and Secrets, through envFrom, env
// keys and volumes) whose annotation names their 10 snapshots, served over
// the review codec as the API server sends it: the body decoded, the
// adapter's checks, 10 cache lookups of the snapshots, the rewrite and the
// answer encoded. The snapshots exist in a real informer cache synced
// against a real API server.
func BenchmarkPodPathReview(b *testing.B) {
	cfg := controlPlane(b)
	c := newClient(b, cfg)
	ctx := context.Background()
	createNamespace(b, c, admissionNamespace)
	dep := seedAdmissionFixture(b, ctx, c)
	inv, _ := startInventoryCache(b, cfg)
	body := pinnedPodReview(b, ctx, c, inv, dep)
	h := webhookserver.Webhook("pod-config", webhookserver.Adapt(&admission.PodConfig{Inventory: inv}, webhookserver.Decoder{Scheme: scheme.Scheme()}))
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, admission.PodConfigPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec
	}
	if out := serve().Body.String(); !strings.Contains(out, `"allowed":true`) || !strings.Contains(out, `"patch":`) {
		b.Fatalf("the pod was not pinned: %s", out)
	}
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

// pinnedPodReview writes the snapshots of everything dep's pods read, as
// the controller writes them, waits until inv sees them, and returns the
// review of a pod of dep whose annotation names them, as the API server
// sends it.
func pinnedPodReview(b testing.TB, ctx context.Context, c client.Client, inv *inventory.Inventory, dep *appsv1.Deployment) []byte {
	b.Helper()
	snaps, err := inv.Snapshots(ctx, hashkey.Fixed(benchKey).Current().Bytes(), admissionNamespace, refs.ConsumedBy(&dep.Spec.Template.Spec), true, nil)
	if err != nil || len(snaps) != 10 {
		b.Fatalf("%d snapshots named (%v), want 10", len(snaps), err)
	}
	for src, name := range snaps {
		obj, _, err := inventory.ReadLive(ctx, c, src.Kind, client.ObjectKey{Namespace: admissionNamespace, Name: src.Name})
		if err != nil {
			b.Fatal(err)
		}
		var snap client.Object
		switch o := obj.(type) {
		case *corev1.Secret:
			snap = revision.SecretSnapshot(o, name)
		case *corev1.ConfigMap:
			snap = revision.ConfigMapSnapshot(o, name)
		}
		if err := createIgnoringExisting(ctx, c, snap); err != nil {
			b.Fatal(err)
		}
	}
	// The webhook's cache sees them before the loop starts.
	for written := false; !written; {
		written = true
		for src, name := range snaps {
			if ok, err := inv.SnapshotWritten(ctx, admissionNamespace, src, name); err != nil || !ok {
				written = false
			}
		}
	}

	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: admissionNamespace, GenerateName: "web-7d9f8-", Labels: dep.Spec.Template.Labels,
			Annotations: map[string]string{v1alpha1.ConfigSnapshotsAnnotation: snaps.Encode()}},
		Spec: dep.Spec.Template.Spec,
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("bench-0000"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: admissionNamespace,
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}
