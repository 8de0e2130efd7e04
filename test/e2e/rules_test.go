package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/admission"
)

// rulesNamespace returns a namespace holding the config objects the rule
// specs refer to, once the validating webhook demonstrably enforces there.
func rulesNamespace() string {
	ns := newNamespace("rules", nil)
	secret := func(name string, annotations string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n%sstringData: {password: not-printed}\n", name, ns, annotations)
	}
	apply(
		configMap(ns, "hot-flags", map[string]string{"flags.yaml": "a: 1"}, map[string]string{"configward.dev/reload": "hot"}),
		configMap(ns, "app-config", map[string]string{"level": "info"}, nil),
		configMap(ns, "ignored", map[string]string{"x": "1"}, map[string]string{"configward.dev/reload": "ignore"}),
		secret("db", ""),
		secret("hot-secret", "  annotations: {configward.dev/reload: hot}\n"),
	)
	Eventually(func() int {
		return env.Kubectl(workloadYAML("Pod", ns, "probe", "containers:\n- name: app\n  image: app\n  envFrom: [{configMapRef: {name: hot-flags}}]\n"),
			"apply", "--dry-run=server", "-f", "-").ExitCode
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(1), "the validating webhook never enforced")
	return ns
}

// workloadYAML wraps a pod spec into a Pod or a Deployment.
func workloadYAML(kind, ns, name, spec string) string {
	if kind == "Pod" {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n%s", name, ns, indent(spec, 2))
	}
	return deployment(ns, name, "", spec)
}

var _ = Describe("workload rules", func() {
	var ns string
	BeforeEach(func() { ns = rulesNamespace() })

	It("rejects a subPath mount of hot config with the exact message kubectl prints", func() {
		res := env.Kubectl(workloadYAML("Deployment", ns, "checkout", `containers:
- name: api
  image: app
  volumeMounts: [{name: flags, mountPath: /etc/app/flags.yaml, subPath: flags.yaml}]
volumes: [{name: flags, configMap: {name: hot-flags}}]
`), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(Equal(`Error from server (Forbidden): error when creating "STDIN": admission webhook "validate.configward.dev" denied the request: ` +
			`[subpath-config] Deployment ` + ns + `/checkout container "api" mounts ConfigMap "hot-flags" with subPath "flags.yaml" at /etc/app/flags.yaml ` +
			`(spec.template.spec.containers[0].volumeMounts[0]): subPath mounts never receive updates, and this ConfigMap is marked configward.dev/reload=hot. ` +
			`Mount the volume as a directory (drop the subPath) and point the app at the file inside it.` + "\n"))
		Expect(env.Kubectl("", "get", "deployment", "checkout", "-n", ns).ExitCode).To(Equal(1), "a rejected Deployment must not be stored")
	})

	It("warns about a Secret in env with the exact text kubectl prints, and records the detail as an Event", func() {
		res := env.Kubectl(workloadYAML("Deployment", ns, "api", `containers:
- name: app
  image: app
  env:
  - name: DB_PASSWORD
    valueFrom: {secretKeyRef: {name: db, key: password}}
`), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(Equal(`Warning: [secret-in-env] Deployment ` + ns + `/api container "app" gets Secret "db" as env ` +
			`(spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef): env leaks to child processes and dumps and never updates. Mount the Secret as a file.` + "\n"))
		Expect(res.Stdout).To(Equal("deployment.apps/api created\n"))
		Eventually(func() []string { return eventsFor(ns, "api", "SecretInEnv") }, 10*time.Second).Should(ConsistOf(ContainSubstring("[secret-in-env]")))
	})

	It("lists every denial, and keeps warnings, in one answer", func() {
		res := env.Kubectl(workloadYAML("Pod", ns, "many", `initContainers:
- name: setup
  image: app
  envFrom: [{configMapRef: {name: hot-flags}}]
containers:
- name: app
  image: app
  envFrom: [{secretRef: {name: hot-secret}}]
`), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`denied the request: [hot-config-in-env] Pod ` + ns + `/many container "app" reads Secret "hot-secret" all keys as environment variables (envFrom) (spec.containers[0].envFrom[0].secretRef)`))
		Expect(res.Stderr).To(ContainSubstring("\n[hot-config-in-env] Pod " + ns + `/many init container "setup" reads ConfigMap "hot-flags"`))
		Expect(res.Stderr).To(ContainSubstring(`Warning: [secret-in-env] Pod ` + ns + `/many container "app" gets Secret "hot-secret"`))
	})

	type outcome struct{ rule, verdict string } // verdict: deny, warn, audit, none
	DescribeTable("each rule fires for every form it covers, and stays silent for near misses",
		func(kind, spec string, want outcome) {
			name := fmt.Sprintf("w%d", time.Now().UnixNano()%1e9)
			res := env.Kubectl(workloadYAML(kind, ns, name, spec), "apply", "-f", "-")
			switch want.verdict {
			case "deny":
				Expect(res.ExitCode).To(Equal(1))
				Expect(res.Stderr).To(ContainSubstring("denied the request: [" + want.rule + "]"))
			case "warn":
				Expect(res.ExitCode).To(Equal(0), res.Stderr)
				Expect(res.Stderr).To(HavePrefix("Warning: [" + want.rule + "]"))
			case "audit":
				Expect(res.ExitCode).To(Equal(0), res.Stderr)
				Expect(res.Stderr).To(BeEmpty())
				Eventually(func() []string { return eventsFor(ns, name, reason(want.rule)) }, 10*time.Second).ShouldNot(BeEmpty())
			case "none":
				Expect(res.ExitCode).To(Equal(0), res.Stderr)
				Expect(res.Stderr).To(BeEmpty())
			}
		},
		Entry("subPath of hot config in a volume", "Deployment", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /etc/f, subPath: flags.yaml}]}]
volumes: [{name: v, configMap: {name: hot-flags}}]`, outcome{"subpath-config", "deny"}),
		Entry("subPathExpr of hot config in a projected volume", "Pod", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /etc/f, subPathExpr: "$(POD)"}]}]
volumes: [{name: v, projected: {sources: [{configMap: {name: app-config}}, {secret: {name: hot-secret}}]}}]`, outcome{"subpath-config", "deny"}),
		Entry("subPath of hot config in an init container", "Deployment", `initContainers: [{name: i, image: app, volumeMounts: [{name: v, mountPath: /etc/f, subPath: flags.yaml}]}]
containers: [{name: a, image: app}]
volumes: [{name: v, configMap: {name: hot-flags}}]`, outcome{"subpath-config", "deny"}),
		Entry("near miss: hot config mounted as a directory", "Deployment", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /etc/f}]}]
volumes: [{name: v, configMap: {name: hot-flags}}]`, outcome{"", "none"}),
		Entry("near miss: subPath of rollout config that rollouts cover", "Deployment", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /etc/f, subPath: level}]}]
volumes: [{name: v, configMap: {name: app-config}}]`, outcome{"", "none"}),
		Entry("hot config through env", "Deployment", `containers: [{name: a, image: app, env: [{name: F, valueFrom: {configMapKeyRef: {name: hot-flags, key: flags.yaml}}}]}]`, outcome{"hot-config-in-env", "deny"}),
		Entry("hot config through envFrom in an init container", "Pod", `initContainers: [{name: i, image: app, envFrom: [{configMapRef: {name: hot-flags}}]}]
containers: [{name: a, image: app}]`, outcome{"hot-config-in-env", "deny"}),
		Entry("near miss: ignore-mode config through envFrom", "Deployment", `containers: [{name: a, image: app, envFrom: [{configMapRef: {name: ignored}}]}]`, outcome{"", "none"}),
		Entry("Secret through envFrom", "Deployment", `containers: [{name: a, image: app, envFrom: [{secretRef: {name: db}}]}]`, outcome{"secret-in-env", "warn"}),
		Entry("Secret key through env in an init container", "Pod", `initContainers: [{name: i, image: app, env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]}]
containers: [{name: a, image: app}]`, outcome{"secret-in-env", "warn"}),
		Entry("missing ConfigMap", "Deployment", `containers: [{name: a, image: app, envFrom: [{configMapRef: {name: nowhere}}]}]`, outcome{"missing-config-ref", "warn"}),
		Entry("missing key", "Deployment", `containers: [{name: a, image: app, env: [{name: L, valueFrom: {configMapKeyRef: {name: app-config, key: nope}}}]}]`, outcome{"missing-config-ref", "warn"}),
		Entry("missing Secret behind a volume", "Pod", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /s}]}]
volumes: [{name: v, secret: {secretName: nowhere, defaultMode: 0400}}]`, outcome{"missing-config-ref", "warn"}),
		Entry("near miss: optional reference to a missing ConfigMap", "Deployment", `containers: [{name: a, image: app, envFrom: [{configMapRef: {name: nowhere, optional: true}}]}]`, outcome{"", "none"}),
		Entry("Secret volume readable by others", "Deployment", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /s}]}]
volumes: [{name: v, secret: {secretName: db}}]`, outcome{"secret-file-mode", "audit"}),
		Entry("near miss: Secret in a 0400 volume", "Deployment", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /s}]}]
volumes: [{name: v, secret: {secretName: db, defaultMode: 0400}}]`, outcome{"", "none"}),
	)

	It("checks containers added through the ephemeralcontainers subresource", func() {
		apply(workloadYAML("Pod", ns, "target", "containers: [{name: a, image: app}]\n"))
		// The scheduler and kwok update the pod meanwhile: retry on conflicts.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var pod corev1.Pod
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "target"}, &pod)).To(Succeed())
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hot-flags"}}}}},
			})
			return env.Client.SubResource("ephemeralcontainers").Update(context.Background(), &pod)
		})
		Expect(err).To(MatchError(ContainSubstring(`[hot-config-in-env] Pod ` + ns + `/target ephemeral container "debug" reads ConfigMap "hot-flags"`)))
		Expect(err).To(MatchError(ContainSubstring("spec.ephemeralContainers[0].envFrom[0].configMapRef")))
	})

	It("does not block updates that leave the pod spec as it was, but does block changing it", func() {
		apply(configMap(ns, "turns-hot", map[string]string{"k": "v"}, nil),
			workloadYAML("Deployment", ns, "older", "containers: [{name: a, image: app, envFrom: [{configMapRef: {name: turns-hot}}]}]\n"))
		apply(configMap(ns, "turns-hot", map[string]string{"k": "v"}, map[string]string{"configward.dev/reload": "hot"}))

		res := env.Kubectl("", "label", "deployment", "older", "-n", ns, "team=payments")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(HavePrefix("Warning: [hot-config-in-env] Deployment " + ns + "/older"))
		Consistently(func() []string { return eventsFor(ns, "older", "HotConfigInEnv") }, 2*time.Second, 250*time.Millisecond).
			Should(BeEmpty(), "an update that leaves the pod spec alone records no Event: a re-stamp or scale would repeat them")

		res = env.Kubectl("", "set", "image", "deployment/older", "-n", ns, "a=app:2")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`denied the request: [hot-config-in-env] Deployment ` + ns + `/older container "a" reads ConfigMap "turns-hot"`))
	})

	It("records nothing for dry-run requests", func() {
		res := env.Kubectl(workloadYAML("Deployment", ns, "dry", `containers: [{name: a, image: app, volumeMounts: [{name: v, mountPath: /s}]}]
volumes: [{name: v, secret: {secretName: db}}]`), "apply", "--dry-run=server", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Consistently(func() []string { return eventsFor(ns, "dry", "SecretFileMode") }, 3*time.Second).Should(BeEmpty())
	})
})

var _ = Describe("callers of the webhook", func() {
	It("must present the API server's client certificate: anyone else is refused at TLS", func() {
		body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"apps","version":"v1","kind":"Deployment"},` +
			`"resource":{"group":"apps","version":"v1","resource":"deployments"},"operation":"CREATE","namespace":"default","object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}}}`)
		anonymous := env.ClientTLS()
		anonymous.Certificates = nil
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: anonymous}}
		_, err := c.Post(env.WebhookURL("/mutate-config-hash"), "application/json", bytes.NewReader(body))
		Expect(err).To(MatchError(ContainSubstring("certificate required")), "a client without the API server's certificate got an answer")

		c = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: env.ClientTLS()}}
		resp, err := c.Post(env.WebhookURL("/mutate-config-hash"), "application/json", bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
	})
})

var _ = Describe("malformed admission requests sent straight to the webhook", func() {
	post := func(path string, body []byte) (int, *admissionv1.AdmissionReview) {
		// As the API server: with its client certificate.
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: env.ClientTLS()}}
		resp, err := c.Post(env.WebhookURL(path), "application/json", bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		var out admissionv1.AdmissionReview
		if resp.StatusCode == http.StatusOK {
			Expect(json.Unmarshal(raw, &out)).To(Succeed(), string(raw))
		}
		return resp.StatusCode, &out
	}
	review := func(mutate func(*admissionv1.AdmissionRequest)) []byte {
		req := admissionv1.AdmissionRequest{
			UID:       "uid-1",
			Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Operation: admissionv1.Create, Namespace: "default", Name: "d",
		}
		req.Object.Raw = []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"},"spec":{"template":{"spec":{"containers":[{"name":"a","image":"x"}]}}}}`)
		mutate(&req)
		b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
		Expect(err).NotTo(HaveOccurred())
		return b
	}
	path := admission.ValidateWorkloadsPath

	It("answers garbage with an error instead of an allow", func() {
		code, out := post(path, []byte(`{"kind":"AdmissionReview","request":`))
		Expect(code).To(Equal(http.StatusOK))
		Expect(out.Response.Allowed).To(BeFalse())
		Expect(out.Response.Result.Code).To(Equal(int32(http.StatusBadRequest)))
	})

	It("denies an unset resource, a kind that disagrees with its resource, and a missing object", func() {
		for _, tc := range []struct {
			mutate func(*admissionv1.AdmissionRequest)
			want   string
		}{
			{func(r *admissionv1.AdmissionRequest) { r.Resource = metav1.GroupVersionResource{} }, "the resource is not set"},
			{func(r *admissionv1.AdmissionRequest) { r.Resource.Resource = "statefulsets" }, "the kind does not match the resource"},
			{func(r *admissionv1.AdmissionRequest) { r.Object.Raw = nil }, "without the objects it needs"},
			{func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"spec": []}`) }, "cannot be decoded"},
		} {
			_, out := post(path, review(tc.mutate))
			Expect(out.Response.UID).To(BeEquivalentTo("uid-1"))
			Expect(out.Response.Allowed).To(BeFalse(), tc.want)
			Expect(out.Response.Result.Message).To(ContainSubstring(tc.want))
		}
	})

	It("refuses, on every webhook alike, a review without the uid, kind, resource or operation every real one has", func() {
		paths := []string{admission.ConfigHashPath, admission.ValidateWorkloadsPath, admission.ValidateConfigMapsPath,
			admission.ValidateConfigSchemasPath, admission.ValidateConfigPoliciesPath, admission.ValidateConfigChangesPath,
			admission.RecordNamespaceChangesPath}
		for _, path := range paths {
			for body, want := range map[string]string{
				`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"uid-1"}}`:                                                                            "the kind is not set",
				`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"uid-1","kind":{"version":"v1","kind":"Secret"},"operation":"CREATE"}}`:               "the resource is not set",
				`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"version":"v1","kind":"Secret"},"resource":{"version":"v1","resource":"secrets"}}}`: "the request has no uid",
			} {
				code, out := post(path, []byte(body))
				Expect(code).To(Equal(http.StatusOK), path)
				Expect(out.Response.Allowed).To(BeFalse(), "%s allowed %s", path, body)
				Expect(out.Response.Result.Message).To(ContainSubstring(want), path)
			}
			code, out := post(path, nil)
			Expect(code).To(Equal(http.StatusOK), path)
			Expect(out.Response.Allowed).To(BeFalse(), "%s allowed an empty body", path)
		}
	})

	It("lets through, with a reason, a kind it has no rules for", func() {
		_, out := post(path, review(func(r *admissionv1.AdmissionRequest) {
			r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Service"}
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "services"}
		}))
		Expect(out.Response.Allowed).To(BeTrue())
		Expect(out.Response.Result.Message).To(ContainSubstring("no workload rules for"))
	})

	It("change control: denies malformed requests, never echoes a Secret, and lets other kinds through", func() {
		secret := func(mutate func(*admissionv1.AdmissionRequest)) []byte {
			return review(func(r *admissionv1.AdmissionRequest) {
				r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Secret"}
				r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}
				r.Operation = admissionv1.Delete
				r.Object.Raw = nil
				r.OldObject.Raw = []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"default"},"data":{"k":"c2VjcmV0"}}`)
				mutate(r)
			})
		}
		for _, tc := range []struct {
			mutate func(*admissionv1.AdmissionRequest)
			want   string
		}{
			{func(r *admissionv1.AdmissionRequest) { r.Resource.Resource = "configmaps" }, "the kind does not match the resource"},
			{func(r *admissionv1.AdmissionRequest) { r.OldObject.Raw = nil }, "without the objects it needs"},
			{func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update }, "without the objects it needs"},
			{func(r *admissionv1.AdmissionRequest) {
				r.OldObject.Raw = []byte(`{"data":{"k":"not base64 c2VjcmV0!"}}`)
			}, "Secret in this request cannot be decoded"},
		} {
			_, out := post(admission.ValidateConfigChangesPath, secret(tc.mutate))
			Expect(out.Response.UID).To(BeEquivalentTo("uid-1"))
			Expect(out.Response.Allowed).To(BeFalse(), tc.want)
			Expect(out.Response.Result.Message).To(ContainSubstring(tc.want))
			Expect(out.Response.Result.Message).NotTo(ContainSubstring("c2VjcmV0"))
		}
		_, out := post(admission.ValidateConfigChangesPath, review(func(*admissionv1.AdmissionRequest) {}))
		Expect(out.Response.Allowed).To(BeTrue())
		Expect(out.Response.Result.Message).To(ContainSubstring("no change-control rules for apps/v1, Kind=Deployment"))
	})

	It("answers a 3 MiB object, and refuses one over the size cap with its UID", func() {
		pad := strings.Repeat("x", 3<<20)
		start := time.Now()
		_, out := post(path, review(func(r *admissionv1.AdmissionRequest) {
			r.Object.Raw = []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default","annotations":{"pad":"` + pad + `"}},"spec":{"template":{"spec":{"containers":[{"name":"a","image":"x"}]}}}}`)
		}))
		Expect(out.Response.UID).To(BeEquivalentTo("uid-1"))
		Expect(out.Response.Allowed).To(BeTrue())
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "the API server calls webhooks with a 5s timeout")

		code, out := post(path, review(func(r *admissionv1.AdmissionRequest) {
			r.Object.Raw = []byte(`{"metadata":{"annotations":{"pad":"` + strings.Repeat(pad, 3) + `"}}}`)
		}))
		Expect(code).To(Equal(http.StatusOK))
		Expect(out.Response.UID).To(BeEquivalentTo("uid-1"))
		Expect(out.Response.Allowed).To(BeFalse())
		Expect(out.Response.Result.Message).To(ContainSubstring("--max-request-bytes"))
	})
})

// reason mirrors the Event reason of a rule ("secret-file-mode" -> "SecretFileMode").
func reason(rule string) string {
	var b strings.Builder
	for _, p := range strings.Split(rule, "-") {
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}
