package controllers

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// A webhook replica whose view of the ConfigPolicies is behind (its watch
// relists after an API server restart) stamps the hash and drops the
// snapshots of a revision: the controller's write did not stick whole,
// while its hash looks current. The controller compares the whole stamp
// after its patch, and writes it again.
var _ = Describe("the stamp the rollout controller writes", func() {
	It("is written again whole when a webhook replica drops its snapshots and keeps the hash", func() {
		ns := policyNamespace("stamp-whole", func(s *v1alpha1.ConfigPolicySpec) { s.Revisions.Enabled = true })
		cm := configMap(ns, "cfg", "port: 80")
		d := deployment(ns, "web", "cfg")
		create(cm, d)
		dropped := dropSnapshotsOnce(ns)

		setValue(cm, "port: 81")
		Eventually(templateHash(d), 10*time.Second).Should(Equal(hashOf(cm)))
		Eventually(templateSnapshots(d), 10*time.Second).Should(Equal("ConfigMap/cfg="+snapshotOf(cm)),
			"the revision's pods must read its snapshot, not the live ConfigMap")
		Expect(dropped.Load()).To(BeEquivalentTo(1), "the stale replica answered the controller's first write")
	})
})

// templateSnapshots is the config-snapshots annotation on a Deployment's
// pod template, as stored.
func templateSnapshots(d *appsv1.Deployment) func() string {
	return func() string {
		var got appsv1.Deployment
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), &got)).To(Succeed())
		return got.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
	}
}

// snapshotOf is the name of the snapshot of the stored ConfigMap cm's
// content, as configward names it.
func snapshotOf(cm *corev1.ConfigMap) string {
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	key, err := env.HashKey(ctx)
	Expect(err).NotTo(HaveOccurred())
	return revision.SnapshotName(key, cm.Namespace, refs.ConfigMap, cm.Name, digest.Content(digest.KeyDigests(cm.Data, cm.BinaryData), nil))
}

// dropSnapshotsOnce installs a mutating webhook, served by the test, that
// plays a webhook replica with an old view of the policies for ns: it takes
// the config-snapshots annotation off the first Deployment update that
// carries one, and lets everything else through. It returns how many it
// dropped.
func dropSnapshotsOnce(ns string) *atomic.Int32 {
	var dropped atomic.Int32
	certPEM, keyPEM, err := env.CA.Issue()
	Expect(err).NotTo(HaveOccurred())
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	Expect(err).NotTo(HaveOccurred())
	listener, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	Expect(err).NotTo(HaveOccurred())
	server := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, "not a review", http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		var d appsv1.Deployment
		if json.Unmarshal(review.Request.Object.Raw, &d) == nil && d.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation] != "" &&
			review.Request.Operation == admissionv1.Update && dropped.CompareAndSwap(0, 1) {
			patch, _ := json.Marshal([]map[string]string{{"op": "remove",
				"path": "/spec/template/metadata/annotations/" + workload.EscapePointer(v1alpha1.ConfigSnapshotsAnnotation)}})
			resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(rw).Encode(review)
	})}
	go func() { _ = server.Serve(listener) }()
	DeferCleanup(func() { _ = server.Close() })

	url := "https://" + listener.Addr().(*net.TCPAddr).String() + "/"
	config := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "stale-replica-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "stale-replica.configward.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: env.CA.CertPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:     ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5)}}}
	create(config)
	DeferCleanup(func() { Expect(env.Client.Delete(ctx, config)).To(Succeed()) })
	return &dropped
}
