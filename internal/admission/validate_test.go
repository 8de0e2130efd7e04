package admission

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/workload"
)

// workloadCache holds a hot ConfigMap, a rollout one, and a Secret.
func workloadCache(t *testing.T) *ValidateWorkloads {
	t.Helper()
	c := newCache(t,
		namespace(testNS, map[string]string{"team": "a"}),
		configMap("flags", map[string]string{"level": "debug"}, map[string]string{v1alpha1.ReloadAnnotation: "hot"}),
		configMap("app", map[string]string{"app.yaml": "port: 80"}, nil),
		secret("db", map[string]string{"password": "hunter2"}, nil),
	)
	return &ValidateWorkloads{Kinds: workload.Builtin(), Inventory: newInventory(c), Policies: builtinPolicies(t), Namespaces: c}
}

const (
	hotLine = `[hot-config-in-env] Deployment shop/web container "app" reads ConfigMap "flags" key "level" as an environment variable ` +
		`(spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef): environment variables are fixed when the container starts, ` +
		`but this ConfigMap is marked configward.dev/reload=hot. Mount it as a volume and read the files, or mark it configward.dev/reload=rollout.`
	secretInEnvLine = `[secret-in-env] Deployment shop/web container "app" gets Secret "db" as env (spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef): ` +
		`env leaks to child processes and dumps and never updates. Mount the Secret as a file.`
	secretFileModeLine = `[secret-file-mode] Deployment shop/web mounts Secret "db" with file mode 0644 (spec.template.spec.volumes[0].secret): ` +
		`group and others can read it. Set defaultMode to 0400 (0440 with fsGroup).`
	// hotWarning is hotLine as an admission warning: cut to 256 characters.
	hotWarning = `[hot-config-in-env] Deployment shop/web container "app" reads ConfigMap "flags" key "level" as an environment variable ` +
		`(spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef): environment variables are fixed when the container s... (see Events)`
	missingRefLine = `[missing-config-ref] Deployment shop/web references ConfigMap "gone" (spec.template.spec.containers[0].envFrom[0].configMapRef), ` +
		`which does not exist: pods will not start until it does. Create it first or mark the reference optional.`
)

func hotSpec() corev1.PodSpec {
	return podSpec([]corev1.EnvVar{envConfigMapKey("LEVEL", "flags", "level")})
}

func secretVolumeSpec() corev1.PodSpec {
	s := podSpec(nil)
	s.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}}
	s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "db", MountPath: "/etc/db"}}
	return s
}

func withReplicas(d *appsv1.Deployment, n int32) *appsv1.Deployment {
	d.Spec.Replicas = &n
	return d
}

func withAnnotations[T metav1.Object](o T, a map[string]string) T {
	o.SetAnnotations(a)
	return o
}

func TestValidateWorkloads(t *testing.T) {
	hot := deployment("web", hotSpec())
	create := func(obj any) req {
		return req{op: admissionv1.Create, kind: deploymentKind, resource: deploymentsRes, name: "web", user: "alice", object: obj}
	}
	podReq := func(p *corev1.Pod, sub string) req {
		return req{op: admissionv1.Create, kind: podKind, resource: podsResource, subResource: sub, name: p.Name, user: "alice", object: p}
	}
	hotLineOf := func(kind, name, path string) string {
		return `[hot-config-in-env] ` + kind + ` shop/` + name + ` container "app" reads ConfigMap "flags" key "level" as an environment variable ` +
			`(` + path + `containers[0].env[0].valueFrom.configMapKeyRef): environment variables are fixed when the container starts, ` +
			`but this ConfigMap is marked configward.dev/reload=hot. Mount it as a volume and read the files, or mark it configward.dev/reload=rollout.`
	}
	hotPodLine := func(name string) string { return hotLineOf("Pod", name, "spec.") }
	// A ReplicaSet that names a Deployment as its controller, written by
	// alice unless as says otherwise.
	replicaSetReq := func() req {
		return req{op: admissionv1.Create, kind: replicaSetKind, resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, name: "web-1",
			user: "alice", object: &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
				ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: testNS, OwnerReferences: []metav1.OwnerReference{*controllerRef("apps/v1", "Deployment", "web")}},
				Spec:       appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: hotSpec()}}}}
	}
	as := func(user string, r req) req { r.user = user; return r }
	for _, tc := range []struct {
		name   string
		req    req
		policy *v1alpha1.ConfigPolicySpec
		want   expect
	}{
		// Malformed requests and requests without rules.
		{"kind with no rules", req{op: admissionv1.Create, kind: serviceKind, resource: metav1.GroupVersionResource{Version: "v1", Resource: "services"}, object: `{}`},
			nil, allowed("configward has no workload rules for /v1, Kind=Service")},
		{"workload kind name in another group", req{op: admissionv1.Create, kind: metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Deployment"}, resource: deploymentsRes, object: hot},
			nil, allowed("configward has no workload rules for example.com/v1, Kind=Deployment")},
		{"kind does not match the resource's group", req{op: admissionv1.Create, kind: deploymentKind, resource: metav1.GroupVersionResource{Group: "extensions", Version: "v1beta1", Resource: "deployments"}, object: hot},
			nil, denied("configward: malformed admission request: the kind does not match the resource (kind apps/v1, Kind=Deployment, resource extensions/v1beta1, Resource=deployments)")},
		{"delete is not judged", req{op: admissionv1.Delete, kind: deploymentKind, resource: deploymentsRes, oldObject: hot}, nil, allowed("")},
		{"connect is not judged", req{op: admissionv1.Connect, kind: podKind, resource: podsResource, subResource: "exec"}, nil, allowed("")},
		{"status subresource is not judged", req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes, subResource: "status", object: hot, oldObject: hot}, nil, allowed("")},
		{"pod status subresource is not judged", req{op: admissionv1.Update, kind: podKind, resource: podsResource, subResource: "status", object: pod("p", hotSpec(), nil)}, nil, allowed("")},
		{"undecodable object", create(`{"spec": 42`),
			nil, errored(400, "configward: the Deployment in this request cannot be decoded: ")},
		{"object of another kind", create(pod("web", hotSpec(), nil)),
			nil, errored(400, "configward: the Deployment in this request cannot be decoded: ", "unable to decode /v1, Kind=Pod into *v1.Deployment")},

		// Behaviour.
		{"hot ConfigMap in env", create(hot), nil, denied(hotLine)},
		{"hot ConfigMap in env with an exemption no policy allows", create(withAnnotations(deployment("web", hotSpec()), map[string]string{v1alpha1.ExemptAnnotationPrefix + "hot-config-in-env": "legacy app"})),
			nil, denied(hotLine).withWarnings(`[hot-config-in-env] configward.dev/exempt.hot-config-in-env does not count here: the ConfigPolicies governing this namespace do not all set rules.hot-config-in-env.allowExemption, so the rule applies as usual`)},
		{"hot ConfigMap in env exempted where a policy allows it", create(withAnnotations(deployment("web", hotSpec()), map[string]string{v1alpha1.ExemptAnnotationPrefix + "hot-config-in-env": "legacy app"})),
			&v1alpha1.ConfigPolicySpec{Rules: map[string]v1alpha1.RuleSettings{"hot-config-in-env": {AllowExemption: true}}},
			expect{allowed: true, code: 200, audit: map[string]string{"hot-config-in-env": hotLine + ` (Audit: exempted by configward.dev/exempt.hot-config-in-env: "legacy app")`}}},
		{"a ConfigPolicy selecting the namespace turns the denial into a warning", create(hot),
			&v1alpha1.ConfigPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}, Rules: map[string]v1alpha1.RuleSettings{"hot-config-in-env": {Action: "Warn"}}},
			allowed("").withWarnings(hotWarning)},
		{"a ConfigPolicy not selecting the namespace changes nothing", create(hot),
			&v1alpha1.ConfigPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}, Rules: map[string]v1alpha1.RuleSettings{"hot-config-in-env": {Action: "Warn"}}},
			denied(hotLine)},
		{"Secret in env warns", create(deployment("web", podSpec([]corev1.EnvVar{envSecretKey("PW", "db", "password")}))),
			nil, allowed("").withWarnings(secretInEnvLine)},
		{"Secret file mode is audited", create(deployment("web", secretVolumeSpec())),
			nil, expect{allowed: true, code: 200, audit: map[string]string{"secret-file-mode": secretFileModeLine}}},
		{"Secret file mode in a dry run leaves no audit annotation", func() req { r := create(deployment("web", secretVolumeSpec())); r.dryRun = true; return r }(),
			nil, allowed("")},
		{"missing ConfigMap warns", create(deployment("web", podSpec(nil, envFromConfigMap("gone")))),
			nil, allowed("").withWarnings(missingRefLine)},
		{"clean Deployment", create(deployment("web", podSpec(nil, envFromConfigMap("app")))), nil, allowed("")},
		{"update leaving the pod spec unchanged warns instead of denying",
			req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes, name: "web", object: withReplicas(deployment("web", hotSpec()), 5), oldObject: withReplicas(deployment("web", hotSpec()), 2)},
			nil, allowed("").withWarnings(hotWarning)},
		{"update changing the pod spec is denied",
			req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes, name: "web", object: hot, oldObject: deployment("web", podSpec(nil))},
			nil, denied(hotLine)},
		{"update with an undecodable old object is judged as changed",
			req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes, name: "web", object: hot, oldObject: `{"spec": 42`},
			nil, denied(hotLine)},
		{"Pod controlled by a ReplicaSet, written by the ReplicaSet controller, is not judged",
			as("system:serviceaccount:kube-system:replicaset-controller", podReq(pod("web-abc", hotSpec(), controllerRef("apps/v1", "ReplicaSet", "web-1")), "")),
			nil, allowed("created by a ReplicaSet, which was judged")},
		{"Pod controlled by a ReplicaSet, written by kube-controller-manager as itself, is not judged",
			as("system:kube-controller-manager", podReq(pod("web-abc", hotSpec(), controllerRef("apps/v1", "ReplicaSet", "web-1")), "")),
			nil, allowed("created by a ReplicaSet, which was judged")},
		{"Pod claiming a ReplicaSet as its controller, written by a person, is judged",
			podReq(pod("web-abc", hotSpec(), controllerRef("apps/v1", "ReplicaSet", "web-1")), ""),
			nil, denied(hotPodLine("web-abc"))},
		{"Pod claiming a ReplicaSet as its controller, written by another controller, is judged",
			as("system:serviceaccount:kube-system:job-controller", podReq(pod("web-abc", hotSpec(), controllerRef("apps/v1", "ReplicaSet", "web-1")), "")),
			nil, denied(hotPodLine("web-abc"))},
		{"ReplicaSet controlled by a Deployment, written by the Deployment controller, is not judged",
			as("system:serviceaccount:kube-system:deployment-controller", replicaSetReq()),
			nil, allowed("created by a Deployment, which was judged")},
		{"ReplicaSet claiming a Deployment as its controller, written by a person, is judged",
			replicaSetReq(), nil, denied(hotLineOf("ReplicaSet", "web-1", "spec.template.spec."))},
		{"kubectl debug on a Pod controlled by a ReplicaSet is judged", podReq(pod("web-abc", hotSpec(), controllerRef("apps/v1", "ReplicaSet", "web-1")), "ephemeralcontainers"),
			nil, denied(hotPodLine("web-abc"))},
		{"Pod whose controller is a ConfigMap is judged", podReq(pod("web-abc", hotSpec(), controllerRef("v1", "ConfigMap", "flags")), ""),
			nil, denied(hotPodLine("web-abc"))},
		{"Pod whose controller names a workload kind in another group is judged", podReq(pod("web-abc", hotSpec(), controllerRef("example.com/v1", "ReplicaSet", "x")), ""),
			nil, denied(hotPodLine("web-abc"))},
		{"generated name is shown with a star", podReq(func() *corev1.Pod { p := pod("", hotSpec(), nil); p.GenerateName = "web-"; return p }(), ""),
			nil, denied(hotPodLine("web-*"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := workloadCache(t)
			if tc.policy != nil {
				h.Policies = policiesWith(t, *tc.policy)
			}
			tc.want.check(t, serve(h).Handle(context.Background(), tc.req.build(t)))
		})
	}
}

// Findings are recorded (metrics, Events, audit annotations) only for a
// request that is no dry run and writes the pod spec.
func TestValidateWorkloadsRecordsOnlyRealWrites(t *testing.T) {
	spec := secretVolumeSpec()
	spec.Containers[0].Env = []corev1.EnvVar{envSecretKey("PW", "db", "password")}
	d := deployment("web", spec)
	for _, tc := range []struct {
		name       string
		req        req
		wantEvents []string
		wantCount  float64
	}{
		{"create", req{op: admissionv1.Create, kind: deploymentKind, resource: deploymentsRes, name: "web", object: d},
			[]string{"Warning SecretInEnv " + secretInEnvLine + " (Warn)", "Warning SecretFileMode " + secretFileModeLine + " (Audit)"}, 1},
		{"dry run", req{op: admissionv1.Create, kind: deploymentKind, resource: deploymentsRes, name: "web", object: d, dryRun: true}, nil, 0},
		{"update that leaves the pod spec as it was", req{op: admissionv1.Update, kind: deploymentKind, resource: deploymentsRes, name: "web",
			object: withReplicas(deployment("web", spec), 3), oldObject: d}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := workloadCache(t)
			rec := events.NewFakeRecorder(10)
			h.Recorder = Recorder{Events: rec}
			warned := decisions.WithLabelValues("secret-in-env", "Warn")
			audited := decisions.WithLabelValues("secret-file-mode", "Audit")
			beforeWarned, beforeAudited := testutil.ToFloat64(warned), testutil.ToFloat64(audited)
			resp := serve(h).Handle(context.Background(), tc.req.build(t))
			if !resp.Allowed || len(resp.Warnings) != 1 {
				t.Fatalf("allowed=%v warnings=%q, want allowed with the secret-in-env warning", resp.Allowed, resp.Warnings)
			}
			got := recorded(rec)
			if len(got) != len(tc.wantEvents) {
				t.Fatalf("events %q, want %q", got, tc.wantEvents)
			}
			for _, w := range tc.wantEvents {
				found := false
				for _, g := range got {
					found = found || g == w
				}
				if !found {
					t.Errorf("event %q not recorded; got %q", w, got)
				}
			}
			if d := testutil.ToFloat64(warned) - beforeWarned; d != tc.wantCount {
				t.Errorf("secret-in-env Warn counted %v times, want %v", d, tc.wantCount)
			}
			if d := testutil.ToFloat64(audited) - beforeAudited; d != tc.wantCount {
				t.Errorf("secret-file-mode Audit counted %v times, want %v", d, tc.wantCount)
			}
			_, hasAudit := resp.AuditAnnotations["secret-file-mode"]
			if hasAudit != !tc.req.dryRun {
				t.Errorf("audit annotations %q (dry run %v)", resp.AuditAnnotations, tc.req.dryRun)
			}
		})
	}
}
