package reloadreports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/inventory/inventorytest"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/workload"
)

// servingPod is a pod whose agent the injection set up to check ports, as
// the webhook's Pod cache holds it (trimmed: no env values).
func servingPod(name string, uid types.UID, certs ...reload.ServingCert) *corev1.Pod {
	spec, _ := json.Marshal(reload.Spec{Report: "https://configward", TokenFile: "/token", Certificates: certs})
	agent := corev1.Container{Name: reload.AgentContainer, Env: []corev1.EnvVar{{Name: reload.SpecEnv, Value: string(spec)}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: uid, Annotations: map[string]string{v1alpha1.ServingCertAnnotation: "8443"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}
	for _, c := range certs {
		v, m := reload.CertVolume(c)
		p.Spec.Volumes, agent.VolumeMounts = append(p.Spec.Volumes, v), append(agent.VolumeMounts, m)
	}
	p.Spec.InitContainers = []corev1.Container{agent}
	trimmed, _ := inventory.TransformPod(p)
	return trimmed.(*corev1.Pod)
}

// What an agent says its ports present becomes the pod's ServingCertificate
// condition, for the ports and Secrets its injection set up and no other;
// a stale leaf is one Event naming pod, port, serials and Certificate.
func TestServedCertificateReports(t *testing.T) {
	crt := "-----BEGIN CERTIFICATE-----\nrenewed\n-----END CERTIFICATE-----\n"
	webTLS := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web-tls", Annotations: map[string]string{cmapi.CertificateNameKey: "web"}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte(crt), "tls.key": []byte("private key hunter2")}}
	web := servingPod("web-1", "uid-web-1", reload.ServingCert{Port: 8443, Secret: "web-tls", Container: "web"})
	other := servingPod("other-1", "uid-other-1", reload.ServingCert{Port: 9443, Secret: "web-tls", Container: "web"})
	cache := inventorytest.Cache(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, webTLS, web, other)
	writer := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(web.DeepCopy(), other.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).Build()
	recorded := events.NewFakeRecorder(100)
	h := &Handler{Reviews: tokenReviews(map[string]*corev1.Pod{"token-web": web, "token-other": other}), Pods: cache, Inventory: inventorytest.Inventory(cache),
		Writer: writer, Events: recorded, Kinds: workload.Builtin(), Keys: hashkey.Fixed([]byte("installation key")), Live: cache}

	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	oldLeaf := reload.Leaf{Serial: "0A", NotBefore: day, NotAfter: day.Add(48 * time.Hour), SHA256: strings.Repeat("a", 64)}
	newLeaf := reload.Leaf{Serial: "0B", NotBefore: day.Add(24 * time.Hour), NotAfter: day.Add(72 * time.Hour), SHA256: strings.Repeat("b", 64)}
	report := func(token string, port int, secret, mountedCrt, result string, presented *reload.Leaf) reload.CertReport {
		return reload.CertReport{Port: port, Secret: secret, Keys: reload.Fingerprints(reload.FingerprintKey([]byte(token)), map[string][]byte{"tls.crt": []byte(mountedCrt)}),
			Mounted: newLeaf, SwappedAt: day.Add(25 * time.Hour), Result: result, Presented: presented, CheckedAt: day.Add(26 * time.Hour)}
	}
	post := func(token string, reports ...reload.CertReport) int {
		body, _ := json.Marshal(reload.Report{Certificates: reports})
		req := httptest.NewRequest(http.MethodPost, reload.ReportPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	stored := func(p *corev1.Pod) (corev1.PodCondition, map[int]reload.CertEntry) {
		var got corev1.Pod
		if err := writer.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		if c := podCondition(&got, v1alpha1.ServingCertConditionType); c != nil {
			return *c, reload.CertEntriesOf(&got)
		}
		return corev1.PodCondition{}, nil
	}

	if code := post("token-web", report("token-web", 8443, "web-tls", crt, reload.CertCurrent, &newLeaf)); code != http.StatusOK {
		t.Fatalf("a pod's own report: %d", code)
	}
	cond, entries := stored(web)
	if e := entries[8443]; cond.Status != corev1.ConditionTrue || e.Result != reload.CertCurrent || !e.MountedCurrent || e.Certificate != "web" || e.Presented.Serial != "0B" {
		t.Errorf("current: %s %+v", cond.Status, e)
	}
	if strings.Contains(cond.Message, "hunter2") {
		t.Errorf("the condition holds the key: %s", cond.Message)
	}

	t.Run("stale: the condition is False and one Event names pod, port, serials and Certificate", func(t *testing.T) {
		for i := range 3 {
			post("token-web", report("token-web", 8443, "web-tls", crt, reload.CertStale, &oldLeaf))
			// A forger's new leaf each time, between two honest reports.
			forged := oldLeaf
			forged.Serial, forged.SHA256 = fmt.Sprintf("0C%02d", i), strings.Repeat(fmt.Sprint(i), 64)
			post("token-web", report("token-web", 8443, "web-tls", crt, reload.CertStale, &forged))
			post("token-web", report("token-web", 8443, "web-tls", crt, reload.CertStale, &oldLeaf))
		}
		cond, entries := stored(web)
		if cond.Status != corev1.ConditionFalse || cond.Reason != reload.ReasonCertStale || entries[8443].Since.IsZero() {
			t.Errorf("stale: %s %s %+v", cond.Status, cond.Reason, entries[8443])
		}
		if n := len(recorded.Events); n != 1 {
			t.Fatalf("%d Events for nine reports of stale leaves, want 1", n)
		}
		ev := <-recorded.Events
		for _, want := range []string{"ServedCertificateStale", "web-1", "8443", "serial 0A", "serial 0B", "Certificate web"} {
			if !strings.Contains(ev, want) {
				t.Errorf("the Event %q does not say %q", ev, want)
			}
		}
	})
	t.Run("a mounted certificate that is not the Secret's now is told apart", func(t *testing.T) {
		post("token-web", report("token-web", 8443, "web-tls", "an older tls.crt", reload.CertCurrent, &newLeaf))
		if _, entries := stored(web); entries[8443].MountedCurrent {
			t.Errorf("an older mounted tls.crt counted as the Secret's: %+v", entries[8443])
		}
	})
	t.Run("a pod speaks for the ports its injection set up, and nothing else", func(t *testing.T) {
		before, _ := stored(web)
		// other's agent claims web's port, a Secret it does not check, a
		// result no agent sends, a serial no certificate has.
		post("token-other", report("token-other", 8443, "web-tls", crt, reload.CertCurrent, &newLeaf))
		post("token-other", report("token-other", 9443, "api-tls", crt, reload.CertCurrent, &newLeaf))
		post("token-other", report("token-other", 9443, "web-tls", crt, "fine", &newLeaf))
		long := newLeaf
		long.Serial = strings.Repeat("F", 200)
		post("token-other", report("token-other", 9443, "web-tls", crt, reload.CertCurrent, &long))
		post("token-other", report("token-other", 9443, "web-tls", crt, reload.CertUnreachable, &newLeaf))
		if after, _ := stored(web); after.Message != before.Message {
			t.Errorf("web's condition changed by another pod's report")
		}
		if cond, _ := stored(other); cond.Type != "" {
			t.Errorf("forged parts kept on other: %s", cond.Message)
		}
		post("token-other", report("token-other", 9443, "web-tls", crt, reload.CertUnreachable, nil))
		if cond, entries := stored(other); cond.Status != corev1.ConditionUnknown || entries[9443].Result != reload.CertUnreachable {
			t.Errorf("its own port unreachable: %s %+v", cond.Status, entries)
		}
	})
}
