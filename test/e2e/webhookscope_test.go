package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/webhookscope"
	"github.com/configward/configward/test/framework"
)

// The injector is another tool's mutating webhook that runs after
// configward's (configurations are called in name order): it mounts the
// hot ConfigMap "injected" with subPath into the first container of a
// Deployment labelled for it, a Deployment that referenced no config when
// configward's mutating webhook saw it.
const (
	injectorPath   = "/e2e-subpath-injector"
	injectorLabel  = "e2e.configward.dev/inject-subpath"
	injectorConfig = "zz-e2e-subpath-injector" // after "mutating-webhook-configuration"
)

func registerSubPathInjector(p *manager.WebhookProcess) {
	p.Server.Register(injectorPath, &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		var d appsv1.Deployment
		if err := json.Unmarshal(req.Object.Raw, &d); err != nil {
			return admission.Errored(400, err)
		}
		spec := &d.Spec.Template.Spec
		for _, v := range spec.Volumes {
			if v.Name == "injected" {
				return admission.Allowed("already injected") // a reinvocation
			}
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "injected",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "injected"}}}})
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "injected", MountPath: "/etc/injected/app.yaml", SubPath: "app.yaml"})
		out, err := json.Marshal(&d)
		if err != nil {
			return admission.Errored(500, err)
		}
		return admission.PatchResponseFromRaw(req.Object.Raw, out)
	})})
}

func installSubPathInjector() {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: injectorConfig},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "subpath-injector.e2e.configward.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "unused", Path: ptr.To(injectorPath)},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{injectorLabel: "true"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	env.PointAtLocalWebhook(cfg)
	Expect(env.Client.Create(context.Background(), cfg)).To(Succeed())
	DeferCleanup(func() { Expect(env.Client.Delete(context.Background(), cfg)).To(Succeed()) })
}

// configHashCalled says whether the audit log shows configward's mutating
// webhook called for the create of Deployment ns/name: the API server
// records every mutating webhook it calls, mutated or not.
func configHashCalled(ns, name string) func() (bool, error) {
	return func() (bool, error) {
		events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.Verb == "create" && ev.ObjectRef.Resource == "deployments" && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == name
		})
		if err != nil || len(events) == 0 {
			return false, err
		}
		return mutatingWebhookCalledIn(events[0], webhookscope.ConfigHashWebhook), nil
	}
}

// mutatingWebhookCalledIn says whether the mutating webhook named webhook
// was called for the request of ev: the API server records every mutating
// webhook it calls, mutated or not, in the request's audit annotations, so
// this is scoped to one request where a webhook's own counters are not.
func mutatingWebhookCalledIn(ev framework.AuditEvent, webhook string) bool {
	for k, v := range ev.Annotations {
		if strings.HasPrefix(k, "mutation.webhook.admission.k8s.io/") && strings.Contains(v, `"webhook":"`+webhook+`"`) {
			return true
		}
	}
	return false
}

var _ = Describe("workload webhooks scoped to writes that involve config", func() {
	It("are not called for a Deployment without config, and are for one with it", func() {
		ns := rolloutNamespace()
		apply(configMap(ns, "app-config", map[string]string{"k": "v"}, nil),
			deployment(ns, "plain", "", "containers:\n- name: app\n  image: registry.example/app:1\n"),
			deployment(ns, "configured", "", fmt.Sprintf(envFromSpec, "app-config")))
		Eventually(configHashCalled(ns, "configured"), 10*time.Second, 200*time.Millisecond).Should(BeTrue(), "the audit log shows configward called for a Deployment with config")
		Expect(configHashCalled(ns, "plain")()).To(BeFalse(), "the API server called configward for a Deployment that references no config")
	})

	It("judges a pod a person creates naming a Deployment's ReplicaSet as its controller; the ReplicaSet's own pods are never sent", func() {
		ns := rolloutNamespace()
		apply(configMap(ns, "settings", map[string]string{"app.yaml": "a: 1"}, map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}),
			deployment(ns, "web", "", `containers:
- name: app
  image: registry.example/app:1
  volumeMounts: [{name: settings, mountPath: /etc/settings}]
volumes:
- {name: settings, configMap: {name: settings}}
`))
		var rs appsv1.ReplicaSet
		Eventually(func() []appsv1.ReplicaSet {
			var list appsv1.ReplicaSetList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			if len(list.Items) == 1 {
				rs = list.Items[0]
			}
			return list.Items
		}, 30*time.Second, 200*time.Millisecond).Should(HaveLen(1), "the Deployment's ReplicaSet")
		replicaSetController := "system:serviceaccount:kube-system:replicaset-controller"
		var created []framework.AuditEvent
		Eventually(func() ([]framework.AuditEvent, error) {
			var err error
			created, err = env.AuditEvents(func(ev framework.AuditEvent) bool {
				return ev.Verb == "create" && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "" && ev.ObjectRef.Namespace == ns &&
					ev.User.Username == replicaSetController && ev.ResponseStatus.Code == 201
			})
			return created, err
		}, 30*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty(), "the ReplicaSet controller creates the Deployment's pod")
		for _, ev := range created {
			Expect(mutatingWebhookCalledIn(ev, webhookscope.ConfigHashWebhook)).To(BeFalse(), "the API server called configward for a pod its ReplicaSet's controller created")
		}

		By("a person creates a pod claiming that ReplicaSet, with a subPath mount of the hot ConfigMap")
		forged := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: forged
  namespace: %s
  labels: {app: other}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: %s, uid: %s, controller: true}
spec:
  containers:
  - name: app
    image: registry.example/app:1
    volumeMounts: [{name: settings, mountPath: /etc/app.yaml, subPath: app.yaml}]
  volumes:
  - {name: settings, configMap: {name: settings}}
`, ns, rs.Name, rs.UID)
		res := as(human, forged, "create", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0), res.Stdout)
		Expect(res.Stderr).To(ContainSubstring(`denied the request: [subpath-config]`))
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "forged"}, &corev1.Pod{})).
			To(MatchError(ContainSubstring("not found")), "the refused pod was not stored")
	})

	It("still refuses a subPath mount of hot config that a later mutating webhook adds to a Deployment without config", func() {
		ns := rolloutNamespace()
		installSubPathInjector()
		apply(configMap(ns, "injected", map[string]string{"app.yaml": "a: 1"}, map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}))
		d := deployment(ns, "injected-into", "  labels: {"+injectorLabel+": \"true\"}", "containers:\n- name: app\n  image: registry.example/app:1\n")
		// The injector's configuration reaches the API server
		// asynchronously; once it does, every apply is refused.
		Eventually(func() string { _, stderr := dryRun(d); return stderr }, 20*time.Second, 200*time.Millisecond).
			Should(ContainSubstring("[subpath-config]"))
		res := env.Kubectl(d, "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring(`denied the request: [subpath-config]`))
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "injected-into"}, &appsv1.Deployment{})).
			To(MatchError(ContainSubstring("not found")))
	})
})
