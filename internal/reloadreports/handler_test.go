package reloadreports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory/inventorytest"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/workload"
)

var testScheme = scheme.Scheme()

const testNS = "shop"

// What an agent's report becomes: the pod's condition, judged against the
// config now, as the token's pod and no other; a program's words kept out
// where a Secret is among the config.
func TestReloadReports(t *testing.T) {
	hot := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: testNS, Name: name, Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}}
	}
	flags := &corev1.ConfigMap{ObjectMeta: hot("flags"), Data: map[string]string{"flags.yaml": "beta: false"}}
	creds := &corev1.Secret{ObjectMeta: hot("creds"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("hunter2-canary")}}
	mounted := func(name string, uid types.UID, volumes ...corev1.Volume) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: uid},
			Spec: corev1.PodSpec{Volumes: volumes, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
		for _, v := range volumes {
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/etc/" + v.Name})
		}
		return p
	}
	flagsVolume := corev1.Volume{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "flags"}}}}
	credsVolume := corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}
	web := mounted("web-1", "uid-web-1", flagsVolume)
	vault := mounted("vault-1", "uid-vault-1", flagsVolume, credsVolume)
	cache := inventorytest.Cache(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, flags, creds, web, vault)
	reviews := tokenReviews(map[string]*corev1.Pod{"token-web": web, "token-vault": vault})
	writer := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(web.DeepCopy(), vault.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).Build()
	key := []byte("installation key")
	recorded := events.NewFakeRecorder(100)
	live := &countingReader{Reader: cache}
	h := &Handler{Reviews: reviews, Pods: cache, Inventory: inventorytest.Inventory(cache), Writer: writer, Events: recorded,
		Kinds: workload.Builtin(), Keys: hashkey.Fixed(key), Live: live}

	post := func(token string, parts ...reload.ConfigReport) int {
		body, _ := json.Marshal(reload.Report{Configs: parts})
		req := httptest.NewRequest(http.MethodPost, reload.ReportPath, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	swapped := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	part := func(token, config string, data map[string]string, result, message string) reload.ConfigReport {
		values := map[string][]byte{}
		for k, v := range data {
			values[k] = []byte(v)
		}
		at := swapped
		return reload.ConfigReport{Config: config, AllKeys: true, Keys: reload.Fingerprints(reload.FingerprintKey([]byte(token)), values),
			SwappedAt: at, Result: result, At: at, Message: message}
	}
	stored := func(p *corev1.Pod) map[string]reload.PodEntry {
		var got corev1.Pod
		if err := writer.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		return reload.EntriesOf(&got)
	}

	if code := post("token-web", part("token-web", "ConfigMap/flags", map[string]string{"flags.yaml": "beta: false"}, reload.Applied, "reloaded")); code != http.StatusOK {
		t.Fatalf("a pod's own report: %d", code)
	}
	e := stored(web)["ConfigMap/flags"]
	if e.Result != reload.Applied || e.Message != "reloaded" || e.Content != reload.ContentID(key, testNS, "ConfigMap", "flags", digest.KeyDigests(flags.Data, nil)) {
		t.Errorf("web's entry %+v: want applied, the current content named", e)
	}

	t.Run("content the config does not have now is not named", func(t *testing.T) {
		post("token-web", part("token-web", "ConfigMap/flags", map[string]string{"flags.yaml": "beta: true"}, reload.Applied, "reloaded"))
		if e := stored(web)["ConfigMap/flags"]; e.Content != "" {
			t.Errorf("other content named %q", e.Content)
		}
	})
	t.Run("a program's words stay in a pod whose hot config includes a Secret", func(t *testing.T) {
		code := post("token-vault",
			part("token-vault", "ConfigMap/flags", map[string]string{"flags.yaml": "beta: false"}, reload.Rejected, "bad password hunter2-canary"),
			part("token-vault", "Secret/creds", map[string]string{"password": "hunter2-canary"}, reload.Rejected, "bad password hunter2-canary"))
		if code != http.StatusOK {
			t.Fatalf("%d", code)
		}
		got := stored(vault)
		for config, e := range got {
			if strings.Contains(e.Message, "hunter2") || e.Message != reload.Withheld {
				t.Errorf("%s: message %q, want it withheld", config, e.Message)
			}
		}
		if got["Secret/creds"].Content == "" || got["Secret/creds"].Result != reload.Rejected {
			t.Errorf("the Secret's entry %+v: want its current content named, rejected", got["Secret/creds"])
		}
	})
	t.Run("reports that are not the pod's own agent's are refused and change nothing", func(t *testing.T) {
		before := stored(web)
		for token, want := range map[string]int{"": http.StatusUnauthorized, "token-of-nobody": http.StatusUnauthorized} {
			if code := post(token, part(token, "ConfigMap/flags", map[string]string{"flags.yaml": "beta: false"}, reload.Rejected, "forged")); code != want {
				t.Errorf("token %q: %d, want %d", token, code, want)
			}
		}
		// vault's token may only speak for vault: a part about config vault
		// does not read is dropped, and web is never touched.
		post("token-vault", part("token-vault", "ConfigMap/other", map[string]string{"x": "y"}, reload.Rejected, "forged"))
		if after := stored(web); after["ConfigMap/flags"] != before["ConfigMap/flags"] {
			t.Errorf("web's entry changed by others' reports: %+v -> %+v", before, after)
		}
		if _, ok := stored(vault)["ConfigMap/other"]; ok {
			t.Errorf("a report about config the pod does not read was kept")
		}
	})
	t.Run("a report is authenticated before its body is read", func(t *testing.T) {
		body := &watchedBody{}
		req := httptest.NewRequest(http.MethodPost, reload.ReportPath, body)
		req.Header.Set("Authorization", "Bearer token-of-nobody")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || body.read {
			t.Errorf("a report with a token nobody has: %d, body read %v", rec.Code, body.read)
		}
	})
	t.Run("one ConfigReloadFailed Event per pod and content, however often it is reported", func(t *testing.T) {
		for len(recorded.Events) > 0 {
			<-recorded.Events
		}
		rejectedNow := func(value string) {
			for i := range 5 {
				swapped = swapped.Add(time.Minute) // a new swap each time, as a forger would say
				post("token-web", part("token-web", "ConfigMap/flags", map[string]string{"flags.yaml": value}, reload.Rejected, fmt.Sprint("bad ", i)))
				post("token-web", part("token-web", "ConfigMap/flags", map[string]string{"flags.yaml": value}, reload.Applied, ""))
			}
		}
		rejectedNow("beta: false") // the content now
		rejectedNow("beta: maybe") // a content nobody knows
		if n := len(recorded.Events); n != 2 {
			t.Errorf("%d Events for ten rejections of two contents, want 2", n)
		}
	})
	t.Run("fingerprints nobody knows make one live read per config while the cache holds the same content", func(t *testing.T) {
		h.live = liveReads{} // what the subtests before read
		before := live.gets.Load()
		for i := range 20 {
			post("token-web", part("token-web", "ConfigMap/flags", map[string]string{"flags.yaml": fmt.Sprint("unknown ", i)}, reload.Applied, ""))
		}
		if n := live.gets.Load() - before; n != 1 {
			t.Errorf("%d live reads for 20 reports of unknown content, want 1", n)
		}
	})
}

// tokenReviews stands for the API server's TokenReview: each token names a
// pod, or nothing.
func tokenReviews(tokens map[string]*corev1.Pod) client.Client {
	return fake.NewClientBuilder().WithScheme(testScheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			tr := obj.(*authenticationv1.TokenReview)
			p, ok := tokens[tr.Spec.Token]
			if !ok || len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != reload.Audience {
				return nil // not authenticated
			}
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:" + testNS + ":default",
				Extra:    map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {p.Name}, "authentication.kubernetes.io/pod-uid": {string(p.UID)}}}}
			return nil
		},
	}).Build()
}

// watchedBody says whether it was read.
type watchedBody struct{ read bool }

func (b *watchedBody) Read([]byte) (int, error) {
	b.read = true
	return 0, io.EOF
}

// countingReader counts the reads that pass through it to the cache.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}
