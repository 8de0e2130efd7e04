package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

func toObjects(objs []any) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o.(client.Object)
	}
	return out
}

// appSnapshot is the name of the snapshot of ConfigMap "app" holding data.
func appSnapshot(data map[string]string) string {
	return revision.SnapshotName(testKey, testNS, refs.ConfigMap, "app", digest.Content(digest.KeyDigests(data, nil), nil))
}

// snapshotOf is the snapshot configward writes of cm.
func snapshotOf(cm *corev1.ConfigMap, name string) *corev1.ConfigMap {
	s := revision.ConfigMapSnapshot(cm, name)
	s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	return s
}

var revisionsOn = v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true}}

func TestConfigHashStampsSnapshotsWhereRevisionsAreOn(t *testing.T) {
	c := hashCache(t)
	h := &ConfigHash{Kinds: workload.Builtin(), Inventory: newInventory(c), Keys: hashkey.Fixed(testKey), Namespaces: c, Policies: policiesWith(t, revisionsOn)}
	d := deployment("web", podSpec([]corev1.EnvVar{envSecretKey("PW", "db", "password")}, envFromConfigMap("app"), envFromConfigMap("flags")))
	resp := serve(h).Handle(context.Background(), req{op: admissionv1.Create, kind: deploymentKind, name: "web", object: d}.build(t))
	hash := digest.PodTemplateHash(testKey, testNS, []digest.Entry{appEntry,
		{Kind: "Secret", Name: "db", Content: digest.Content(digest.SecretKeyDigests(map[string][]byte{"password": []byte("hunter2")}), []string{"password"})}})
	// Secrets are not copied unless a policy says so; hot config never is.
	want := []jsonpatch.Operation{{Operation: "add", Path: "/spec/template/metadata/annotations", Value: map[string]string{
		v1alpha1.ConfigHashAnnotation: hash, v1alpha1.ConfigSnapshotsAnnotation: "ConfigMap/app=" + appSnapshot(appData)}}}
	expect{allowed: true, code: 200, patches: want}.check(t, resp)

	h.Policies = policiesWith(t, v1alpha1.ConfigPolicySpec{Revisions: v1alpha1.RevisionSettings{Enabled: true, Secrets: true}})
	resp = serve(h).Handle(context.Background(), req{op: admissionv1.Create, kind: deploymentKind, name: "web", object: d}.build(t))
	snaps := resp.Patches[0].Value.(map[string]string)[v1alpha1.ConfigSnapshotsAnnotation]
	if !strings.HasPrefix(snaps, "ConfigMap/app=app-") || !strings.Contains(snaps, ",Secret/db=db-") {
		t.Fatalf("with Secrets: %q", snaps)
	}
}

// kubectl rollout undo copies an earlier ReplicaSet's template, hash and
// snapshots included: kept when the snapshots exist, with the hash it was
// rolled back from recorded on the Deployment; reset otherwise.
func TestConfigHashKeepsARollbackToARevisionWithSnapshots(t *testing.T) {
	oldData := map[string]string{"app.yaml": "port: 79", "log.yaml": "level: info"}
	oldHash := digest.PodTemplateHash(testKey, testNS, []digest.Entry{{Kind: "ConfigMap", Name: "app", Content: digest.Content(digest.KeyDigests(oldData, nil), nil)}})
	nowHash := digest.PodTemplateHash(testKey, testNS, []digest.Entry{appEntry})
	oldSnaps := "ConfigMap/app=" + appSnapshot(oldData)
	nowSnaps := "ConfigMap/app=" + appSnapshot(appData)
	stamped := func(hash, snaps string) *appsv1.Deployment {
		d := withTemplateAnnotations(deployment("web", podSpec(nil, envFromConfigMap("app"))),
			map[string]string{v1alpha1.ConfigHashAnnotation: hash, v1alpha1.ConfigSnapshotsAnnotation: snaps})
		d.UID = "web-uid"
		return d
	}
	rs := &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web-1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web-uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Template: stamped(oldHash, oldSnaps).Spec.Template}}
	oldCM := configMap("app", oldData, nil)
	for name, tc := range map[string]struct {
		withSnapshot bool
		want         expect
	}{
		"snapshots written": {true, expect{allowed: true, code: 200, patches: []jsonpatch.Operation{
			{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{v1alpha1.RolledBackFromAnnotation: nowHash}}},
			warnings: []string{"[config-revision] Deployment shop/web: rolled back to the revision with config hash " + oldHash + ", whose pods read snapshots " +
				oldSnaps + ". configward keeps it there until its config changes again or a new revision is deployed."}}},
		"snapshots gone": {false, expect{allowed: true, code: 200, patches: []jsonpatch.Operation{
			{Operation: "add", Path: "/spec/template/metadata/annotations/configward.dev~1config-hash", Value: nowHash},
			{Operation: "add", Path: "/spec/template/metadata/annotations/configward.dev~1config-snapshots", Value: nowSnaps}},
			warnings: []string{"[config-hash] Deployment shop/web: the config hash was reset to the current config's. " +
				"A rollback does not bring back old ConfigMap or Secret content; change the config itself to go back."}}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []any{namespace(testNS, nil), configMap("app", appData, nil), rs}
			if tc.withSnapshot {
				objs = append(objs, snapshotOf(oldCM, appSnapshot(oldData)))
			}
			c := newCache(t, toObjects(objs)...)
			h := &ConfigHash{Kinds: workload.Builtin(), Inventory: newInventory(c), Keys: hashkey.Fixed(testKey), Namespaces: c, Policies: policiesWith(t, revisionsOn)}
			r := req{op: admissionv1.Update, kind: deploymentKind, name: "web", object: stamped(oldHash, oldSnaps), oldObject: stamped(nowHash, nowSnaps)}
			tc.want.check(t, serve(h).Handle(context.Background(), r.build(t)))
		})
	}
}

// A pod is pointed at the snapshots its template names, and waits for one
// not written yet.
func TestPinPods(t *testing.T) {
	snap := appSnapshot(appData)
	withSnapshots := func(v string) *corev1.Pod {
		return withAnnotations(pod("", podSpec([]corev1.EnvVar{envConfigMapKey("A", "app", "app.yaml")}, envFromConfigMap("flags")), nil),
			map[string]string{v1alpha1.ConfigSnapshotsAnnotation: v})
	}
	create := func(p *corev1.Pod) req { return req{op: admissionv1.Create, kind: podKind, object: p} }
	for name, tc := range map[string]struct {
		written bool
		req     req
		want    expect
	}{
		"pinned": {true, create(withSnapshots("ConfigMap/app=" + snap)), expect{allowed: true, code: 200, message: "pointed at its revision's config snapshots", patches: []jsonpatch.Operation{
			{Operation: "replace", Path: "/spec/containers/0/env/0/valueFrom/configMapKeyRef/name", Value: snap}}}},
		"waiting for its snapshot": {false, create(withSnapshots("ConfigMap/app=" + snap)), denied("[config-revision] snapshot " + snap +
			" of ConfigMap shop/app is not written yet: Pod shop/* must read exactly its revision's config, so it waits for configward's controller to write it " +
			"(the pod's controller retries within seconds). If the refusal repeats, see the Events of the workload.")},
		"no snapshots": {false, create(pod("p", podSpec(nil, envFromConfigMap("app")), nil)), allowed("no config snapshots named")},
		"an annotation configward did not write": {true, create(withSnapshots("app")), denied(`[config-revision] Pod shop/*: its ` +
			`configward.dev/config-snapshots annotation is not one configward wrote ("app" is not Kind/name=snapshot), so its config cannot be pinned. ` +
			`Remove the annotation from the pod template; configward stamps it again.`)},
		"a snapshot of another ConfigMap": {true, create(withSnapshots("ConfigMap/flags=" + snap)), denied("[config-revision] snapshot " + snap +
			" of ConfigMap shop/flags is not written yet: Pod shop/* must read exactly its revision's config, so it waits for configward's controller to write it " +
			"(the pod's controller retries within seconds). If the refusal repeats, see the Events of the workload.")},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []any{namespace(testNS, nil), configMap("app", appData, nil)}
			if tc.written {
				objs = append(objs, snapshotOf(configMap("app", appData, nil), snap))
			}
			c := newCache(t, toObjects(objs)...)
			tc.want.check(t, serve(&PodConfig{Inventory: newInventory(c), Pending: time.Millisecond}).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

// A pod whose snapshot its controller is writing waits for it instead of
// being refused (the first pods of a new workload would leave a
// FailedCreate Warning on the normal path); where snapshots cannot be
// written, it is refused at once, saying why.
func TestPodConfigPendingAndBlocked(t *testing.T) {
	snap := appSnapshot(appData)
	p := withAnnotations(pod("", podSpec(nil, envFromConfigMap("app")), nil), map[string]string{v1alpha1.ConfigSnapshotsAnnotation: "ConfigMap/app=" + snap})
	create := req{op: admissionv1.Create, kind: podKind, object: p}

	t.Run("written while it waits", func(t *testing.T) {
		c := newCache(t, namespace(testNS, nil), configMap("app", appData, nil))
		go func() {
			time.Sleep(200 * time.Millisecond)
			_ = c.Create(context.Background(), snapshotOf(configMap("app", appData, nil), snap))
		}()
		resp := serve(&PodConfig{Inventory: newInventory(c), Namespaces: c, Pending: 5 * time.Second}).Handle(context.Background(), create.build(t))
		if !resp.Allowed || len(resp.Patches) != 1 {
			t.Fatalf("allowed %v, %d patches: %+v", resp.Allowed, len(resp.Patches), resp.Result)
		}
	})
	t.Run("writes blocked in the namespace", func(t *testing.T) {
		ns := namespace(testNS, nil)
		ns.Annotations = map[string]string{v1alpha1.SnapshotsBlockedAnnotation: "quota: exceeded quota: configmaps"}
		c := newCache(t, ns, configMap("app", appData, nil))
		start := time.Now()
		resp := serve(&PodConfig{Inventory: newInventory(c), Namespaces: c, Pending: 5 * time.Second}).Handle(context.Background(), create.build(t))
		if resp.Allowed || time.Since(start) > time.Second {
			t.Fatalf("allowed %v after %s, want refused at once", resp.Allowed, time.Since(start))
		}
		for _, want := range []string{"cannot be written", "(quota: exceeded quota: configmaps)", "takes the snapshot out of its workload's template", "RevisionsReady"} {
			if !strings.Contains(resp.Result.Message, want) {
				t.Errorf("message %q lacks %q", resp.Result.Message, want)
			}
		}
	})
}
