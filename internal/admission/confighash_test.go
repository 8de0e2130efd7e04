package admission

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/workload"
)

// testKey is the installation key of the handler tests.
var testKey = []byte("admission-test-installation-key0")

// Requests that never reach the inventory: the handler must answer them
// clearly on its own.
func TestConfigHashRequestsItDoesNotStamp(t *testing.T) {
	h := &ConfigHash{Kinds: workload.Builtin()}
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
			// As the API server sends them: the kind's resource, and the
			// stored object with an update.
			if tc.req.Resource.Resource == "" {
				tc.req.Resource = metav1.GroupVersionResource{Group: tc.req.Kind.Group, Version: tc.req.Kind.Version, Resource: strings.ToLower(tc.req.Kind.Kind) + "s"}
			}
			if tc.req.Operation != admissionv1.Create {
				tc.req.OldObject = tc.req.Object
			}
			resp := serve(h).Handle(context.Background(), admission.Request{AdmissionRequest: tc.req})
			if resp.Allowed != tc.wantAllowed || len(resp.Patches) != 0 {
				t.Fatalf("allowed=%v patches=%v, want allowed=%v and no patch", resp.Allowed, resp.Patches, tc.wantAllowed)
			}
			if resp.Result != nil && resp.Result.Code != 0 && resp.Result.Code != tc.wantCode {
				t.Fatalf("code %d, want %d (%s)", resp.Result.Code, tc.wantCode, resp.Result.Message)
			}
		})
	}
}

var (
	appData  = map[string]string{"app.yaml": "port: 80", "log.yaml": "level: info"}
	dbData   = map[string]string{"password": "hunter2"}
	appEntry = digest.Entry{Kind: "ConfigMap", Name: "app", Content: digest.Content(digest.KeyDigests(appData, nil), nil)}
)

// hashCache holds a rollout ConfigMap "app", a hot one "flags" and a
// Secret "db".
func hashCache(t *testing.T) client.Client {
	return newCache(t,
		namespace(testNS, nil),
		configMap("app", appData, nil),
		configMap("flags", map[string]string{"level": "debug"}, map[string]string{v1alpha1.ReloadAnnotation: "hot"}),
		secret("db", dbData, nil),
	)
}

func withTemplateAnnotations(d *appsv1.Deployment, a map[string]string) *appsv1.Deployment {
	d.Spec.Template.Annotations = a
	return d
}

func TestConfigHash(t *testing.T) {
	appHash := digest.PodTemplateHash(testKey, testNS, []digest.Entry{appEntry})
	consumesApp := func() *appsv1.Deployment { return deployment("web", podSpec(nil, envFromConfigMap("app"))) }
	consumesHot := func() *appsv1.Deployment { return deployment("web", podSpec(nil, envFromConfigMap("flags"))) }
	stamped := func(d *appsv1.Deployment, hash string) *appsv1.Deployment {
		return withTemplateAnnotations(d, map[string]string{v1alpha1.ConfigHashAnnotation: hash})
	}
	create := func(obj any) req {
		return req{op: admissionv1.Create, kind: deploymentKind, resource: deploymentsRes, name: "web", object: obj}
	}
	update := func(obj, old any) req {
		return req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes, name: "web", object: obj, oldObject: old}
	}
	addMap := func(path, hash string) []jsonpatch.Operation {
		return []jsonpatch.Operation{{Operation: "add", Path: path, Value: map[string]string{v1alpha1.ConfigHashAnnotation: hash}}}
	}
	addKey := func(path, hash string) []jsonpatch.Operation {
		return []jsonpatch.Operation{{Operation: "add", Path: path, Value: hash}}
	}
	patched := func(p []jsonpatch.Operation, warnings ...string) expect {
		return expect{allowed: true, code: 200, patches: p, warnings: warnings}
	}
	const templateAnnotations = "/spec/template/metadata/annotations"
	const templateHashKey = "/spec/template/metadata/annotations/configward.dev~1config-hash"
	resetWarning := "[config-hash] Deployment shop/web: the config hash was reset to the current config's. " +
		"A rollback does not bring back old ConfigMap or Secret content; change the config itself to go back."
	for _, tc := range []struct {
		name       string
		req        req
		policy     *v1alpha1.ConfigPolicySpec
		namespaces client.Reader // default: the cache
		inventory  client.Reader // default: the cache
		want       expect
	}{
		// Malformed requests and requests it does not stamp.
		{name: "connect", req: req{op: admissionv1.Connect, kind: podKind, resource: podsResource, subResource: "exec"}, want: allowed("")},
		{name: "object of another kind", req: create(pod("web", podSpec(nil), nil)),
			want: errored(400, "configward: the Deployment in this request cannot be decoded: unable to decode /v1, Kind=Pod into *v1.Deployment")},
		// No API server sends these: they are refused, not stamped.
		{name: "status subresource", req: req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes, subResource: "status", name: "web", object: consumesApp(), oldObject: consumesApp()},
			want: allowed("")},

		// Stamping.
		{name: "Deployment consuming a ConfigMap, no template annotations", req: create(consumesApp()),
			want: patched(addMap(templateAnnotations, appHash))},
		{name: "Deployment with template annotations", req: create(withTemplateAnnotations(consumesApp(), map[string]string{"team": "a"})),
			want: patched(addKey(templateHashKey, appHash))},
		{name: "hash already current", req: create(stamped(consumesApp(), appHash)), want: allowed("")},
		{name: "one key of a ConfigMap", req: create(deployment("web", podSpec([]corev1.EnvVar{envConfigMapKey("APP", "app", "app.yaml")}))),
			want: patched(addMap(templateAnnotations, digest.PodTemplateHash(testKey, testNS, []digest.Entry{{Kind: "ConfigMap", Name: "app",
				Content: digest.Content(digest.KeyDigests(appData, nil), []string{"app.yaml"})}})))},
		{name: "missing ConfigMap counts as missing", req: create(deployment("web", podSpec(nil, envFromConfigMap("gone")))),
			want: patched(addMap(templateAnnotations, digest.PodTemplateHash(testKey, testNS, []digest.Entry{{Kind: "ConfigMap", Name: "gone", Missing: true}})))},
		{name: "Secrets are part of the hash", req: create(deployment("web", podSpec([]corev1.EnvVar{envSecretKey("PW", "db", "password")}, envFromConfigMap("app")))),
			want: patched(addMap(templateAnnotations, digest.PodTemplateHash(testKey, testNS, []digest.Entry{appEntry,
				{Kind: "Secret", Name: "db", Content: digest.Content(digest.SecretKeyDigests(map[string][]byte{"password": []byte("hunter2")}), []string{"password"})}})))},
		{name: "a ConfigPolicy leaving Secrets out", req: create(deployment("web", podSpec([]corev1.EnvVar{envSecretKey("PW", "db", "password")}, envFromConfigMap("app")))),
			policy: &v1alpha1.ConfigPolicySpec{Rollouts: v1alpha1.RolloutSettings{ExcludeSecrets: true}},
			want:   patched(addMap(templateAnnotations, appHash))},
		{name: "only hot config, not stamped", req: create(consumesHot()), want: allowed("")},
		{name: "only hot config, stale hash removed", req: create(stamped(consumesHot(), "sha256:stale")),
			want: patched([]jsonpatch.Operation{{Operation: "remove", Path: templateHashKey}})},
		{name: "CronJob", req: req{op: admissionv1.Create, kind: cronJobKind, resource: metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}, name: "nightly",
			object: &batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: testNS},
				Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec(nil, envFromConfigMap("app"))}}}}}},
			want: patched(addMap("/spec/jobTemplate/spec/template/metadata/annotations", appHash))},
		{name: "bare Pod", req: req{op: admissionv1.Create, kind: podKind, resource: podsResource, name: "p", object: pod("p", podSpec(nil, envFromConfigMap("app")), nil)},
			want: patched(addMap("/metadata/annotations", appHash))},

		// A bare Pod's containers keep the config they started with, yet an
		// update (a label) re-stamps it with the current config's hash.
		// Its hash says what config the Pod started with; a label change does
		// not restart it.
		{name: "update of a bare Pod whose config changed since it started", req: req{op: admissionv1.Update, kind: podKind, resource: podsResource, name: "p",
			object:    withAnnotations(pod("p", podSpec(nil, envFromConfigMap("app")), nil), map[string]string{v1alpha1.ConfigHashAnnotation: "sha256:at-start", "new": "label"}),
			oldObject: withAnnotations(pod("p", podSpec(nil, envFromConfigMap("app")), nil), map[string]string{v1alpha1.ConfigHashAnnotation: "sha256:at-start"})},
			want: allowed("a Pod keeps the config hash it was created with")},

		// Never stamped.
		{name: "ReplicaSet owned by a Deployment", req: req{op: admissionv1.Update, kind: replicaSetKind, resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, name: "web-1",
			object: &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
				ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: testNS, OwnerReferences: []metav1.OwnerReference{*controllerRef("apps/v1", "Deployment", "web")}},
				Spec:       appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: podSpec(nil, envFromConfigMap("app"))}}},
			oldObject: `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1"}}`},
			want: allowed("controlled by Deployment; its owner carries the config hash")},
		{name: "Pod owned by a ReplicaSet", req: req{op: admissionv1.Create, kind: podKind, resource: podsResource, name: "p",
			object: pod("p", podSpec(nil, envFromConfigMap("app")), controllerRef("apps/v1", "ReplicaSet", "web-1"))},
			want: allowed("controlled by ReplicaSet; its owner carries the config hash")},
		{name: "opted out", req: create(withAnnotations(consumesApp(), map[string]string{v1alpha1.RolloutAnnotation: "disabled"})),
			want: allowed("rollouts disabled by configward.dev/rollout")},
		{name: "a ConfigPolicy turning rollouts off", req: create(consumesApp()),
			policy: &v1alpha1.ConfigPolicySpec{Rollouts: v1alpha1.RolloutSettings{Disabled: true}},
			want:   allowed("rollouts disabled by ConfigPolicy")},

		// Updates.
		{name: "update writing another hash than the stored one", req: update(stamped(consumesApp(), "sha256:older"), stamped(consumesApp(), "sha256:old")),
			want: patched(addKey(templateHashKey, appHash), resetWarning)},
		{name: "update keeping the stored stale hash", req: update(withReplicas(stamped(consumesApp(), "sha256:old"), 3), stamped(consumesApp(), "sha256:old")),
			want: patched(addKey(templateHashKey, appHash))},
		{name: "update dropping the hash", req: update(consumesApp(), stamped(consumesApp(), "sha256:old")),
			want: patched(addMap(templateAnnotations, appHash))},
		{name: "create writing a stale hash", req: create(stamped(consumesApp(), "sha256:older")),
			want: patched(addKey(templateHashKey, appHash))},

		// Failures leave the object alone, with a warning (the webhook fails open).
		{name: "namespace cannot be read", req: create(consumesApp()), namespaces: failing(&corev1.Namespace{}, errors.New("boom")),
			want: allowed("").withWarnings("configward could not read namespace shop (reading namespace shop: boom); no config hash stamped")},
		{name: "inventory cannot be read", req: create(consumesApp()), inventory: failing(&corev1.ConfigMap{}, errors.New("cache not synced")),
			want: allowed("").withWarnings("configward could not compute the config hash of Deployment shop/web (cache not synced); it will not roll when its config changes until it is applied again")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hashCache(t)
			h := &ConfigHash{Kinds: workload.Builtin(), Inventory: newInventory(c), Keys: hashkey.Fixed(testKey), Namespaces: c, Policies: builtinPolicies(t)}
			if tc.policy != nil {
				h.Policies = policiesWith(t, *tc.policy)
			}
			if tc.namespaces != nil {
				h.Namespaces = tc.namespaces
			}
			if tc.inventory != nil {
				h.Inventory = newInventory(tc.inventory)
			}
			tc.want.check(t, serve(h).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

// A dry run is patched like any request but not counted.
func TestConfigHashCountsOnlyRealWrites(t *testing.T) {
	c := hashCache(t)
	h := &ConfigHash{Kinds: workload.Builtin(), Inventory: newInventory(c), Keys: hashkey.Fixed(testKey), Namespaces: c, Policies: builtinPolicies(t)}
	counter := hashesStamped.WithLabelValues("Deployment")
	for _, dryRun := range []bool{true, false} {
		before := testutil.ToFloat64(counter)
		r := req{op: admissionv1.Create, kind: deploymentKind, resource: deploymentsRes, name: "web", dryRun: dryRun,
			object: deployment("web", podSpec(nil, envFromConfigMap("app")))}
		if resp := serve(h).Handle(context.Background(), r.build(t)); len(resp.Patches) != 1 {
			t.Fatalf("dry run %v: patches %v, want one", dryRun, resp.Patches)
		}
		want := 1.0
		if dryRun {
			want = 0
		}
		if got := testutil.ToFloat64(counter) - before; got != want {
			t.Errorf("dry run %v: counted %v, want %v", dryRun, got, want)
		}
	}
}
