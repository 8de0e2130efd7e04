package reloadreports

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/channel"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory/inventorytest"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// An agent asks, before a reload, whether the channels on its pod's disk
// hold one set: the answer follows the channels' notes, is about the
// asking pod's config alone, and writes nothing.
func TestAnswers(t *testing.T) {
	flags := revision.Source{Kind: refs.ConfigMap, Name: "flags"}
	limits := revision.Source{Kind: refs.ConfigMap, Name: "limits"}
	content := map[string]map[string]string{
		"flags-1": {"flags.yaml": "beta: false"}, "flags-2": {"flags.yaml": "beta: true"},
		"limits-1": {"limits.yaml": "rps: 10"}, "limits-2": {"limits.yaml": "rps: 20"},
	}
	snapshot := func(name string, of revision.Source) *corev1.ConfigMap {
		return revision.ConfigMapSnapshot(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: of.Name}, Data: content[name]}, name)
	}
	// The channels controller is half way through writing the set: flags'
	// canary channel holds flags-2 with the set's note, limits' still
	// limits-1 with the note of its write before.
	at := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	set := channel.Note{At: at, Record: "configset-pair-2", Version: "v2", Holds: revision.Snapshots{flags: "flags-2", limits: "limits-2"}}
	before := channel.Note{At: at.Add(-time.Hour), Holds: revision.Snapshots{limits: "limits-1"}}
	flagsCh := channel.ConfigMap(snapshot("flags-2", flags), "flags", "canary", set)
	limitsCh := channel.ConfigMap(snapshot("limits-1", limits), "limits", "canary", before)
	volume := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web-1", UID: "uid-web-1", Annotations: map[string]string{v1alpha1.ChannelWaveAnnotation: "canary"}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{volume(flagsCh.Name), volume(limitsCh.Name)}, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "other-1", UID: "uid-other-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	cache := inventorytest.Cache(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, flagsCh, limitsCh,
		snapshot("flags-1", flags), snapshot("flags-2", flags), snapshot("limits-1", limits), snapshot("limits-2", limits), pod, other)
	h := &Handler{Reviews: tokenReviews(map[string]*corev1.Pod{"token-web": pod, "token-other": other}), Pods: cache, Inventory: inventorytest.Inventory(cache),
		Writer: nil, Kinds: workload.Builtin(), Keys: hashkey.Fixed([]byte("installation key"))}

	ask := func(token string, disk map[string]string) (reload.Answer, int) {
		q := reload.Report{Ask: true}
		for config, snap := range disk {
			values := map[string][]byte{}
			for k, v := range content[snap] {
				values[k] = []byte(v)
			}
			q.Configs = append(q.Configs, reload.ConfigReport{Config: config, AllKeys: true, Keys: reload.Fingerprints(reload.FingerprintKey([]byte(token)), values)})
		}
		body, _ := json.Marshal(q)
		req := httptest.NewRequest(http.MethodPost, reload.ReportPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req) // Writer is nil: an answer that wrote would panic
		var ans reload.Answer
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
				t.Fatalf("answer %q: %v", rec.Body, err)
			}
		}
		return ans, rec.Code
	}
	fc, lc := "ConfigMap/"+flagsCh.Name, "ConfigMap/"+limitsCh.Name

	ans, code := ask("token-web", map[string]string{fc: "flags-2", lc: "limits-1"})
	if code != http.StatusOK || ans.Outcome != reload.Asked || ans.Holds || !slices.Equal(ans.WaitingFor, []string{lc}) {
		t.Errorf("new flags, old limits: %d %+v; want the set not held, waiting for %s", code, ans, lc)
	}
	if ans.Sets[fc] != "configset-pair-2@v2" || ans.Sets[lc] != "configset-pair-2@v2" {
		t.Errorf("sets %v: want both channels in configset-pair-2@v2", ans.Sets)
	}
	ans, _ = ask("token-web", map[string]string{fc: "flags-1", lc: "limits-1"})
	if ans.Holds {
		t.Errorf("old flags, old limits, while flags' channel holds the set: %+v; want not held (flags is behind the newest note)", ans)
	}

	// The limits channel written: the set is whole on a disk that holds it.
	limitsCh = channel.ConfigMap(snapshot("limits-2", limits), "limits", "canary", set)
	var live corev1.ConfigMap
	if err := cache.Get(t.Context(), client.ObjectKeyFromObject(limitsCh), &live); err != nil {
		t.Fatal(err)
	}
	limitsCh.ResourceVersion = live.ResourceVersion
	if err := cache.Update(t.Context(), limitsCh); err != nil {
		t.Fatal(err)
	}
	ans, _ = ask("token-web", map[string]string{fc: "flags-2", lc: "limits-2"})
	if !ans.Holds || len(ans.WaitingFor) != 0 {
		t.Errorf("both new: %+v; want held", ans)
	}
	ans, _ = ask("token-web", map[string]string{fc: "flags-2", lc: "limits-1"})
	if ans.Holds {
		t.Errorf("new flags, old limits once both are written: %+v; want not held", ans)
	}

	// Another pod asks about config it does not mount: nothing binds it.
	ans, code = ask("token-other", map[string]string{fc: "flags-2", lc: "limits-1"})
	if code != http.StatusOK || !ans.Holds || len(ans.Sets) != 0 {
		t.Errorf("a pod asking about another's channels: %d %+v; want nothing bound", code, ans)
	}
	if _, code := ask("token-of-nobody", map[string]string{fc: "flags-2"}); code != http.StatusUnauthorized {
		t.Errorf("a question without a pod's token: %d", code)
	}
}
