package admission

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/configschema"
)

// Change control as the webhook's flags set it: the namespace is governed,
// "ci" is the pipeline, configward runs as configward/configward.
func governed(*corev1.Namespace) changecontrol.Settings {
	return changecontrol.Settings{
		Governed:   true,
		Pipeline:   changecontrol.Identities{Users: []string{"ci"}},
		Configward: changecontrol.Identities{ServiceAccounts: []string{changecontrol.ServiceAccountUser("configward", "configward")}},
	}
}

// ungoverned: change control is not configured by flags.
func ungoverned(*corev1.Namespace) changecontrol.Settings { return changecontrol.Settings{} }

// changesFixture: ConfigMap "flags" is consumed by Deployment "web" (in the
// cache and live); "stale" by Deployment "gone", which the cache still has
// but the API server no longer; "podonly" only by a Pod a ReplicaSet
// controls; "unused" by nothing.
func changesFixture(t *testing.T, nsPhase corev1.NamespacePhase) (cache, live client.Client) {
	t.Helper()
	web := deployment("web", podSpec(nil, envFromConfigMap("flags")))
	ns := namespace(testNS, nil)
	ns.Status.Phase = nsPhase
	cache = newCache(t, ns, web,
		deployment("gone", podSpec(nil, envFromConfigMap("stale"))),
		pod("web-abc", podSpec(nil, envFromConfigMap("podonly")), controllerRef("apps/v1", "ReplicaSet", "web-1")),
		configMap("flags", map[string]string{"level": "info"}, nil),
		configMap("stale", map[string]string{"x": "1"}, nil),
		configMap("podonly", map[string]string{"x": "1"}, nil),
		configMap("unused", map[string]string{"x": "1"}, nil),
		secret("db", dbData, nil),
	)
	return cache, newLive(web.DeepCopy())
}

const (
	outOfPipelineUpdate = `[out-of-pipeline-edit] alice changes data["level"] of ConfigMap shop/flags outside the pipeline. ` +
		`Make the change in version control and let the pipeline apply it; in an emergency, repeat the edit with a new annotation configward.dev/break-glass: "<reason>" (the edit is recorded).`
	outOfPipelineDelete = `[out-of-pipeline-edit] alice deletes ConfigMap shop/flags outside the pipeline. ` +
		`Delete it through the pipeline; in an emergency, first annotate it with configward.dev/break-glass-delete: "<reason>", then delete it (the delete is recorded).`
	inUseDelete = `[config-in-use-delete] ConfigMap shop/flags is used by Deployment web: their pods fail to start or to refresh it once it is gone. ` +
		`Remove the references (or the workloads) first.`
	breakGlassNote = `break-glass by alice: changed data["level"] of ConfigMap shop/flags outside the pipeline, reason "incident 42"`
	breakGlassWarn = `[out-of-pipeline-edit] ` + breakGlassNote + `. Recorded; bring the change into version control or the next deployment undoes it.`
)

func TestValidateConfigChanges(t *testing.T) {
	old := func() *corev1.ConfigMap { return configMap("flags", map[string]string{"level": "info"}, nil) }
	edited := func() *corev1.ConfigMap { return configMap("flags", map[string]string{"level": "debug"}, nil) }
	annotated := func(cm *corev1.ConfigMap, a map[string]string) *corev1.ConfigMap { cm.Annotations = a; return cm }
	update := func(user string, obj, oldObj any) req {
		return req{op: admissionv1.Update, kind: configMapKind, resource: configMapsResource, name: "flags", user: user, object: obj, oldObject: oldObj}
	}
	del := func(user string, oldObj any) req {
		return req{op: admissionv1.Delete, kind: configMapKind, resource: configMapsResource, name: "x", user: user, oldObject: oldObj}
	}
	warned := func(w ...string) expect { return allowed("").withWarnings(w...) }
	for _, tc := range []struct {
		name          string
		req           req
		changeControl func(*corev1.Namespace) changecontrol.Settings // default: governed
		policy        *v1alpha1.ConfigPolicySpec
		nsPhase       corev1.NamespacePhase
		inventory     client.Reader // default: the cache
		namespaces    client.Reader // default: the cache
		live          client.Reader // default: web only
		want          expect
	}{
		// Malformed requests and requests without rules.
		{name: "kind with no rules", req: req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes}, want: allowed("configward has no change-control rules for apps/v1, Kind=Deployment")},
		{name: "ConfigMap of another group", req: req{op: admissionv1.Update, kind: metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "ConfigMap"}, resource: configMapsResource},
			want: allowed("configward has no change-control rules for example.com/v1, Kind=ConfigMap")},
		// Creates are judged: re-creating governed config deleted by any
		// route is a change like an edit.
		{name: "create outside the pipeline", req: req{op: admissionv1.Create, kind: configMapKind, resource: configMapsResource, user: "alice", object: edited()},
			want: denied(`[out-of-pipeline-edit] alice creates ConfigMap shop/flags outside the pipeline. Create it through the pipeline; in an emergency, ` +
				`create it with an annotation configward.dev/break-glass: "<reason>" (the creation is recorded).`)},
		{name: "create by the pipeline", req: req{op: admissionv1.Create, kind: configMapKind, resource: configMapsResource, user: "ci", object: edited()}, want: allowed("")},
		{name: "break-glass create", req: req{op: admissionv1.Create, kind: configMapKind, resource: configMapsResource, user: "alice",
			object: annotated(edited(), map[string]string{v1alpha1.BreakGlassAnnotation: "INC-9"})},
			want: expect{allowed: true, code: 200,
				warnings: []string{`[out-of-pipeline-edit] break-glass by alice: created ConfigMap shop/flags outside the pipeline, reason "INC-9". ` +
					`Recorded; bring the change into version control or the next deployment undoes it.`},
				audit: map[string]string{"break-glass": `break-glass by alice: created ConfigMap shop/flags outside the pipeline, reason "INC-9"`}}},
		{name: "owner reference added outside the pipeline", req: update("alice", func() *corev1.ConfigMap {
			cm := old()
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "ghost", UID: "no-such-uid"}}
			return cm
		}(), old()), want: denied(`[out-of-pipeline-edit] alice changes metadata.ownerReferences of ConfigMap shop/flags outside the pipeline. ` +
			`Make the change in version control and let the pipeline apply it; in an emergency, repeat the edit with a new annotation configward.dev/break-glass: "<reason>" (the edit is recorded).`)},
		{name: "connect is not judged", req: req{op: admissionv1.Connect, kind: configMapKind, resource: configMapsResource}, want: allowed("")},
		{name: "undecodable old object", req: update("alice", edited(), `{"data": 42}`),
			want: errored(400, "configward: the old ConfigMap in this request cannot be decoded: ")},
		// The decoder's message must not quote a Secret's value.
		{name: "undecodable new Secret", req: req{op: admissionv1.Update, kind: secretKind, resource: secretsResource, user: "alice", object: `{"data": {"password": "hunter2-not-base64"}}`, oldObject: secret("db", dbData, nil)},
			want: expect{code: 400, contains: []string{"configward: the Secret in this request cannot be decoded: illegal base64 data at input byte 7"}, lacks: []string{"hunter2"}}},
		{name: "Secret with a value of the wrong type", req: req{op: admissionv1.Update, kind: secretKind, resource: secretsResource, user: "alice", object: `{"stringData": {"password": ["hunter2"]}}`, oldObject: secret("db", dbData, nil)},
			want: expect{code: 400, contains: []string{"configward: the Secret in this request cannot be decoded: "}, lacks: []string{"hunter2"}}},
		// Subresources are not looked at: this is judged like the object.

		// Updates.
		{name: "content update outside the pipeline", req: update("alice", edited(), old()), want: denied(outOfPipelineUpdate)},
		{name: "content update by the pipeline", req: update("ci", edited(), old()), want: allowed("")},
		{name: "metadata-only update outside the pipeline", req: update("alice", func() *corev1.ConfigMap {
			cm := old()
			cm.Labels = map[string]string{"x": "y"}
			cm.Annotations = map[string]string{"note": "hi"}
			return cm
		}(), old()), want: allowed("")},
		{name: "content update where change control is off", req: update("alice", edited(), old()), changeControl: ungoverned, want: allowed("")},
		{name: "a ConfigPolicy naming a pipeline governs the namespace", req: update("alice", edited(), old()), changeControl: ungoverned,
			policy: &v1alpha1.ConfigPolicySpec{Pipeline: v1alpha1.PipelineIdentities{Users: []string{"deployer"}}}, want: denied(outOfPipelineUpdate)},
		{name: "the pipeline a ConfigPolicy names", req: update("deployer", edited(), old()), changeControl: ungoverned,
			policy: &v1alpha1.ConfigPolicySpec{Pipeline: v1alpha1.PipelineIdentities{Users: []string{"deployer"}}}, want: allowed("")},
		{name: "break-glass update", req: update("alice", annotated(edited(), map[string]string{v1alpha1.BreakGlassAnnotation: "incident 42"}), old()),
			want: expect{allowed: true, code: 200, warnings: []string{breakGlassWarn}, audit: map[string]string{"break-glass": breakGlassNote}}},
		{name: "break-glass update in a dry run", req: func() req {
			r := update("alice", annotated(edited(), map[string]string{v1alpha1.BreakGlassAnnotation: "incident 42"}), old())
			r.dryRun = true
			return r
		}(), want: warned(breakGlassWarn)},
		{name: "a break-glass reason is good for one edit", req: update("alice",
			annotated(edited(), map[string]string{v1alpha1.BreakGlassAnnotation: "incident 42"}),
			annotated(old(), map[string]string{v1alpha1.BreakGlassAnnotation: "incident 42"})),
			want: denied(outOfPipelineUpdate)},
		{name: "an edit cannot exempt itself", req: update("alice", annotated(edited(), map[string]string{v1alpha1.ExemptAnnotationPrefix + "out-of-pipeline-edit": "trust me"}), old()),
			policy: &v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"out-of-pipeline-edit": {AllowExemption: true}}},
			// The exemption annotation is governing metadata: adding it is
			// a change too.
			want: denied(strings.Replace(outOfPipelineUpdate, `data["level"]`, `data["level"] and metadata.annotations["configward.dev/exempt.out-of-pipeline-edit"]`, 1))},
		{name: "an exemption the stored object carries", req: update("alice",
			annotated(edited(), map[string]string{v1alpha1.ExemptAnnotationPrefix + "out-of-pipeline-edit": "tuned by hand"}),
			annotated(old(), map[string]string{v1alpha1.ExemptAnnotationPrefix + "out-of-pipeline-edit": "tuned by hand"})),
			policy: &v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"out-of-pipeline-edit": {AllowExemption: true}}},
			want: expect{allowed: true, code: 200, audit: map[string]string{"out-of-pipeline-edit": outOfPipelineUpdate +
				` (Audit: exempted by configward.dev/exempt.out-of-pipeline-edit: "tuned by hand")`}}},
		{name: "Secret content update outside the pipeline", req: req{op: admissionv1.Update, kind: secretKind, resource: secretsResource, user: "alice",
			object: secret("db", map[string]string{"password": "hunter3"}, nil), oldObject: secret("db", dbData, nil)},
			want: denied(`[out-of-pipeline-edit] alice changes data["password"] of Secret shop/db outside the pipeline. ` +
				`Make the change in version control and let the pipeline apply it; in an emergency, repeat the edit with a new annotation configward.dev/break-glass: "<reason>" (the edit is recorded).`)},
		{name: "Secret update through stringData", req: req{op: admissionv1.Update, kind: secretKind, resource: secretsResource, user: "alice",
			object: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"type":"Opaque","stringData":{"token":"t"}}`, oldObject: secret("db", nil, nil)},
			want: denied(`[out-of-pipeline-edit] alice changes data["token"] of Secret shop/db outside the pipeline. ` +
				`Make the change in version control and let the pipeline apply it; in an emergency, repeat the edit with a new annotation configward.dev/break-glass: "<reason>" (the edit is recorded).`)},
		{name: "Helm release Secret", req: req{op: admissionv1.Update, kind: secretKind, resource: secretsResource, user: "alice",
			object: func() *corev1.Secret {
				s := secret("sh.helm.release.v1.web.v2", map[string]string{"release": "b"}, nil)
				s.Type = "helm.sh/release.v1"
				return s
			}(),
			oldObject: func() *corev1.Secret {
				s := secret("sh.helm.release.v1.web.v2", map[string]string{"release": "a"}, nil)
				s.Type = "helm.sh/release.v1"
				return s
			}()},
			want: allowed("a Helm release Secret")},
		{name: "configward itself", req: update("system:serviceaccount:configward:configward", edited(), old()), want: allowed("configward itself")},
		{name: "Kubernetes' own controllers", req: update("system:kube-controller-manager", edited(), old()), want: allowed("kube-controller-manager")},

		// Deletes.
		{name: "garbage collector deletes a ConfigMap in use", req: del("system:serviceaccount:kube-system:generic-garbage-collector", old()), want: allowed("garbage collection")},
		// Kubernetes' own writers are let through before any lookup they do
		// not need, so a cache or API error never stops them.
		{name: "garbage collector delete when consumers cannot be listed", req: del("system:serviceaccount:kube-system:generic-garbage-collector", old()),
			inventory: failing(&corev1.ConfigMap{}, errors.New("boom")), want: allowed("garbage collection")},
		{name: "namespace controller delete when the namespace cannot be read", req: del("system:serviceaccount:kube-system:namespace-controller", old()),
			namespaces: failing(&corev1.Namespace{}, errors.New("boom")), want: allowed("namespace deletion")},
		{name: "a human's delete when consumers cannot be listed", req: del("alice", old()),
			inventory: failing(&corev1.ConfigMap{}, errors.New("boom")), want: errored(500, "configward: looking up the consumers of ConfigMap shop/flags: boom")},
		{name: "namespace controller deletes a ConfigMap in use", req: del("system:serviceaccount:kube-system:namespace-controller", old()), want: allowed("namespace deletion")},
		{name: "delete of a ConfigMap in use", req: del("alice", old()), changeControl: ungoverned, want: denied(inUseDelete)},
		{name: "delete of a ConfigMap in use outside the pipeline", req: del("alice", old()), want: denied(outOfPipelineDelete + "\n" + inUseDelete)},
		{name: "the pipeline deleting a ConfigMap in use is warned", req: del("ci", old()), want: warned(inUseDelete)},
		{name: "break-glass delete of a ConfigMap in use", req: del("alice", annotated(old(), map[string]string{v1alpha1.BreakGlassDeleteAnnotation: "cleanup"})),
			want: denied(inUseDelete)},
		{name: "break-glass delete of an unused ConfigMap", req: del("alice", annotated(configMap("unused", nil, nil), map[string]string{v1alpha1.BreakGlassDeleteAnnotation: "cleanup"})),
			want: expect{allowed: true, code: 200,
				warnings: []string{`[out-of-pipeline-edit] break-glass by alice: deleted ConfigMap shop/unused outside the pipeline, reason "cleanup". Recorded; bring the change into version control or the next deployment undoes it.`},
				audit:    map[string]string{"break-glass": `break-glass by alice: deleted ConfigMap shop/unused outside the pipeline, reason "cleanup"`}}},
		{name: "delete of an unused ConfigMap", req: del("alice", configMap("unused", nil, nil)), changeControl: ungoverned, want: allowed("")},
		{name: "consumer the API server no longer has", req: del("alice", configMap("stale", nil, nil)), changeControl: ungoverned, want: allowed("")},
		{name: "consumer is a Pod a ReplicaSet controls", req: del("alice", configMap("podonly", nil, nil)), changeControl: ungoverned, want: allowed("")},
		{name: "delete while the namespace terminates", req: del("alice", old()), changeControl: ungoverned, nsPhase: corev1.NamespaceTerminating, want: allowed("")},
		{name: "a ConfigPolicy turning config-in-use-delete off skips the lookup", req: del("alice", old()), changeControl: ungoverned,
			policy:    &v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"config-in-use-delete": {Action: "Off"}}},
			inventory: failing(&corev1.ConfigMap{}, errors.New("boom")), want: allowed("")},
		{name: "consumers cannot be listed", req: del("alice", old()), changeControl: ungoverned, inventory: failing(&corev1.ConfigMap{}, errors.New("boom")),
			want: errored(500, "configward: looking up the consumers of ConfigMap shop/flags: boom")},
		{name: "consumer cannot be confirmed", req: del("alice", old()), changeControl: ungoverned, live: failing(&appsv1.Deployment{}, errors.New("timeout")),
			want: errored(500, "configward: looking up the consumers of ConfigMap shop/flags: timeout")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache, live := changesFixture(t, tc.nsPhase)
			h := &ValidateConfigChanges{Inventory: newInventory(cache), Cache: cache, Live: live, Schemas: configschema.New(cache),
				ChangeControl: governed, Policies: builtinPolicies(t)}
			if tc.changeControl != nil {
				h.ChangeControl = tc.changeControl
			}
			if tc.policy != nil {
				h.Policies = policiesWith(t, *tc.policy)
			}
			if tc.inventory != nil {
				h.Inventory = newInventory(tc.inventory)
			}
			if tc.namespaces != nil {
				h.Cache = tc.namespaces
			}
			if tc.live != nil {
				h.Live = tc.live
			}
			tc.want.check(t, serve(h).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

// A break-glass edit is recorded as an Event and counted, unless it is a
// dry run.
func TestValidateConfigChangesRecordsBreakGlass(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		cache, live := changesFixture(t, "")
		rec := events.NewFakeRecorder(10)
		h := &ValidateConfigChanges{Inventory: newInventory(cache), Cache: cache, Live: live, Schemas: configschema.New(cache),
			Recorder: Recorder{Events: rec}, ChangeControl: governed, Policies: builtinPolicies(t)}
		counter := breakGlassEdits.WithLabelValues("ConfigMap", "UPDATE")
		before := testutil.ToFloat64(counter)
		edited := configMap("flags", map[string]string{"level": "debug"}, map[string]string{v1alpha1.BreakGlassAnnotation: "incident 42"})
		r := req{op: admissionv1.Update, kind: configMapKind, resource: configMapsResource, name: "flags", user: "alice", dryRun: dryRun,
			object: edited, oldObject: configMap("flags", map[string]string{"level": "info"}, nil)}
		resp := serve(h).Handle(context.Background(), r.build(t))
		if !resp.Allowed || len(resp.Warnings) != 1 || resp.Warnings[0] != breakGlassWarn {
			t.Fatalf("dry run %v: allowed=%v warnings=%q", dryRun, resp.Allowed, resp.Warnings)
		}
		var wantEvents []string
		wantCount := 1.0
		if dryRun {
			wantCount = 0
		} else {
			wantEvents = []string{"Warning BreakGlass " + breakGlassNote}
		}
		if got := recorded(rec); !equalStrings(got, wantEvents) {
			t.Errorf("dry run %v: events %q, want %q", dryRun, got, wantEvents)
		}
		if got := testutil.ToFloat64(counter) - before; got != wantCount {
			t.Errorf("dry run %v: counted %v, want %v", dryRun, got, wantCount)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
