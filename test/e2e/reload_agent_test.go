package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

// hotConfigMap is a ConfigMap marked hot.
func hotConfigMap(ns, name string, data map[string]string) string {
	return configMap(ns, name, data, map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot})
}

// agentWorkload is a workload of kind whose pods mount hot ConfigMap flags
// as a directory and ask for the reload agent with trigger.
func agentWorkload(kind, ns, name, trigger string) string {
	template := fmt.Sprintf(`metadata:
  labels: {app: %[1]s}
  annotations: {configward.dev/reload-agent: %[2]q}
spec:
  restartPolicy: %[3]s
  containers:
  - name: app
    image: registry.example/app:1
    volumeMounts: [{name: flags, mountPath: /etc/flags}]
  volumes: [{name: flags, configMap: {name: flags}}]`, name, trigger, map[bool]string{true: "OnFailure", false: "Always"}[kind == "Job" || kind == "CronJob"])
	head := fmt.Sprintf("metadata: {name: %s, namespace: %s}\n", name, ns)
	switch kind {
	case "Pod":
		return "apiVersion: v1\nkind: Pod\n" + fmt.Sprintf("metadata: {name: %s, namespace: %s, labels: {app: %s}, annotations: {configward.dev/reload-agent: %q}}\n", name, ns, name, trigger) +
			strings.TrimPrefix(template[strings.Index(template, "spec:"):], "")
	case "Job":
		return "apiVersion: batch/v1\nkind: Job\n" + head + "spec:\n  template:\n" + indent(template, 4)
	case "CronJob":
		return "apiVersion: batch/v1\nkind: CronJob\n" + head + "spec:\n  schedule: \"* * * * *\"\n  jobTemplate:\n    spec:\n      template:\n" + indent(template, 8)
	case "DaemonSet":
		return "apiVersion: apps/v1\nkind: DaemonSet\n" + head + fmt.Sprintf("spec:\n  selector: {matchLabels: {app: %s}}\n  template:\n", name) + indent(template, 4)
	case "StatefulSet":
		return "apiVersion: apps/v1\nkind: StatefulSet\n" + head + fmt.Sprintf("spec:\n  serviceName: %s\n  selector: {matchLabels: {app: %s}}\n  template:\n", name, name) + indent(template, 4)
	}
	return "apiVersion: apps/v1\nkind: Deployment\n" + head + fmt.Sprintf("spec:\n  replicas: 1\n  selector: {matchLabels: {app: %s}}\n  template:\n", name) + indent(template, 4)
}

// podsOf lists the pods labelled app=<app> in ns.
func podsOf(ns, app string) func() []corev1.Pod {
	return func() []corev1.Pod {
		var list corev1.PodList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		return list.Items
	}
}

// agentOf is the agent container of a pod, and the spec it was handed.
func agentOf(p corev1.Pod) (*corev1.Container, reload.Spec) {
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; c.Name == reload.AgentContainer {
			for _, e := range c.Env {
				if e.Name == reload.SpecEnv {
					s, err := reload.ParseSpec(e.Value)
					Expect(err).NotTo(HaveOccurred())
					return c, s
				}
			}
			return c, reload.Spec{}
		}
	}
	return nil, reload.Spec{}
}

// agentToken is a token of pod's service account, of audience, bound to
// the pod, as the kubelet projects it for the agent.
func agentToken(p corev1.Pod, audience string) string {
	var token string
	Eventually(func() (err error) { token, err = env.PodToken(context.Background(), &p, audience); return err }, 30*time.Second).Should(Succeed())
	return token
}

// sendReport posts rep to the webhook's agent endpoint with token, as an
// agent does, and returns the status and body.
func sendReport(token string, rep reload.Report) (int, string) {
	status, body, err := env.PostReport(token, rep)
	Expect(err).NotTo(HaveOccurred())
	return status, body
}

// agentReport is an agent's report of data as ConfigMap flags, under token.
func agentReport(token string, data map[string]string, result, message string) reload.Report {
	return framework.AgentReport(token, "ConfigMap/flags", data, result, message)
}

// reloadCondition is a pod's ConfigReload condition, as stored.
func reloadCondition(p corev1.Pod) func() corev1.PodCondition {
	return func() corev1.PodCondition {
		Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(&p), &p)).To(Succeed())
		for _, c := range p.Status.Conditions {
			if c.Type == v1alpha1.ReloadConditionType {
				return c
			}
		}
		return corev1.PodCondition{}
	}
}

// podConfigWebhook is the Pod path's webhook for pods that name snapshots
// or ask for the agent (admission.PodConfigMatchCondition).
const podConfigWebhook = "pod-config.configward.dev"

var _ = Describe("the reload agent", func() {
	It("is injected at pod creation into the pods of every workload kind that ask for it, and into no other pod", func() {
		ns := rolloutNamespace()
		apply(hotConfigMap(ns, "flags", map[string]string{"flags.yaml": "beta: false"}))
		awaitHotSeen(ns, "flags")
		for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"} {
			name := strings.ToLower(kind)
			trigger := "signal:SIGHUP@app"
			if kind == "Job" || kind == "CronJob" {
				trigger = "watch"
			}
			apply(agentWorkload(kind, ns, name, trigger))
			if kind == "CronJob" {
				Expect(env.Kubectl("", "create", "job", "from-cronjob", "--from=cronjob/cronjob", "-n", ns).ExitCode).To(Equal(0))
				name = "cronjob" // the Job's pods carry the template's app label
			}
			Eventually(podsOf(ns, name), rolloutTimeout).ShouldNot(BeEmpty(), func() string {
				return kind + "\n" + env.Kubectl("", "get", "events", "-n", ns).Stdout
			})
			for _, p := range podsOf(ns, name)() {
				c, spec := agentOf(p)
				Expect(c).NotTo(BeNil(), "%s pod %s has no agent", kind, p.Name)
				Expect(c.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)), "a native sidecar")
				Expect(c.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
				Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
				Expect(c.SecurityContext.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
				Expect(spec.Configs).To(ConsistOf(HaveField("Name", "flags")))
				Expect(spec.Report).To(HaveSuffix(reload.ReportPath))
				Expect(ptr.Deref(p.Spec.ShareProcessNamespace, false)).To(Equal(trigger != "watch"), "only a signal needs the shared process namespace")
				var audience string
				for _, v := range p.Spec.Volumes {
					if v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].ServiceAccountToken != nil {
						audience = v.Projected.Sources[0].ServiceAccountToken.Audience
					}
				}
				Expect(audience).To(Equal(reload.Audience))
			}
		}
		By("a pod that asks for nothing is never sent to the Pod path")
		// In a namespace of its own, so the audit log tells its pods from
		// those that asked (a creation's audit record names no labels).
		plainNs := rolloutNamespace()
		apply(hotConfigMap(plainNs, "flags", map[string]string{"flags.yaml": "beta: false"}))
		apply(replicatedDeployment(plainNs, "plain", "flags", 2))
		rolloutStatus(plainNs, "deployment/plain")
		for _, p := range podsOf(plainNs, "plain")() {
			c, _ := agentOf(p)
			Expect(c).To(BeNil())
		}
		sent := func(ns string) (created, called int) {
			events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
				return ev.Verb == "create" && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "" &&
					ev.ObjectRef.Namespace == ns && ev.ResponseStatus.Code == http.StatusCreated && !ev.DryRun()
			})
			Expect(err).NotTo(HaveOccurred())
			for _, ev := range events {
				if mutatingWebhookCalledIn(ev, podConfigWebhook) {
					called++
				}
			}
			return len(events), called
		}
		created, called := sent(plainNs)
		Expect(created).To(BeNumerically(">=", 2), "the audit log holds the plain pods' creations")
		Expect(called).To(BeZero(), "the API server sent a pod that asks for nothing to the Pod path")
		created, called = sent(ns)
		Expect(called).To(And(BeNumerically(">", 0), Equal(created)), "every pod that asked was sent")

		By("an annotation that does not parse is refused with the workload")
		res := env.Kubectl(agentWorkload("Deployment", ns, "bad", "signal:SIGKILL@app"), "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("[reload-agent]"))
		Expect(res.Stderr).To(ContainSubstring("never stops the program"))
	})

	It("records what a pod's agent reports, as the pod, shows it in status, Reports, Events and metrics, and refuses reports that are not a pod's agent's", func() {
		ns := rolloutNamespace()
		data := map[string]string{"flags.yaml": "beta: false"}
		apply(hotConfigMap(ns, "flags", data))
		awaitHotSeen(ns, "flags")
		apply(agentWorkload("Deployment", ns, "web", "http://localhost:8080/-/reload"))
		rolloutStatus(ns, "deployment/web")
		pod := podsOf(ns, "web")()[0]
		token := agentToken(pod, reload.Audience)
		web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}

		By("before any report: the pod is pending, and status says the workload is hot-only")
		Eventually(reloadStatus(ns), 30*time.Second).Should(HaveKeyWithValue("ConfigMap/flags", HaveKeyWithValue("pending", 1)))
		Expect(env.KubectlPlugin("status", "-n", ns).Stdout).To(ContainSubstring("Hot config (reloaded in place"))

		first := agentReport(token, data, reload.Applied, "reloaded")
		status, body := sendReport(token, first)
		Expect(status).To(Equal(http.StatusOK), body)
		Eventually(reloadCondition(pod), 10*time.Second).Should(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", reload.ReasonApplied)))
		Eventually(reloadStatus(ns), 30*time.Second).Should(HaveKeyWithValue("ConfigMap/flags", HaveKeyWithValue("applied", 1)))
		Eventually(reportOf(ns, web), 30*time.Second).Should(ContainElement("config-reload pass Deployment/web"))
		Expect(env.KubectlPlugin("status", "-n", ns, "deploy/web", "--wait", "--timeout", "5s").ExitCode).To(Equal(0), "every pod reports the current content")

		By("the same report again, as an agent re-sends it, writes nothing")
		status, body = sendReport(token, first)
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("unchanged"))

		By("a change the pod has not reported yet: it is on older content, and a wait runs out")
		bad := map[string]string{"flags.yaml": "beta: [unclosed"}
		apply(hotConfigMap(ns, "flags", bad))
		Eventually(reloadStatus(ns), 30*time.Second).Should(HaveKeyWithValue("ConfigMap/flags", HaveKeyWithValue("older", 1)))
		res := env.KubectlPlugin("status", "-n", ns, "deploy/web", "--wait", "--timeout", "3s")
		Expect(res.ExitCode).To(Equal(1), res.Stdout+res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("not reporting the current ConfigMap/flags yet"))
		Eventually(func() float64 {
			return counter("configward_reload_pods", map[string]string{"namespace": ns, "state": "older"})
		}, 30*time.Second).Should(BeEquivalentTo(1))

		By("the program rejects it: the pod's condition, status, the Report, an Event on the Deployment and the gauge say so")
		Eventually(func() string {
			status, body := sendReport(token, agentReport(token, bad, reload.Rejected, "line 1: did not find expected node content"))
			Expect(status).To(Equal(http.StatusOK), body)
			return reloadCondition(pod)().Reason
		}, 10*time.Second, 500*time.Millisecond).Should(Equal(reload.ReasonRejected))
		Expect(reloadCondition(pod)().Status).To(Equal(corev1.ConditionFalse))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigReloadFailed") }, 10*time.Second).Should(ContainElement(And(
			ContainSubstring("pod "+pod.Name+" rejected ConfigMap/flags"), ContainSubstring("did not find expected node content"))))
		Eventually(reloadStatus(ns), 30*time.Second).Should(HaveKeyWithValue("ConfigMap/flags", HaveKeyWithValue("rejected", 1)))
		res = env.KubectlPlugin("status", "-n", ns, "deploy/web", "--wait", "--timeout", "30s")
		Expect(res.ExitCode).To(Equal(3), "a rejection ends a wait at once: "+res.Stdout+res.Stderr)
		Expect(res.Stdout).To(ContainSubstring("the program of pod " + pod.Name + " rejected ConfigMap/flags: line 1: did not find expected node content"))
		Eventually(reportOf(ns, web), 30*time.Second).Should(ContainElement("config-reload fail Deployment/web"))
		Eventually(func() float64 {
			return counter("configward_reload_pods", map[string]string{"namespace": ns, "state": "rejected"})
		}, 30*time.Second).Should(BeEquivalentTo(1))

		By("a later valid change, applied, clears it")
		good := map[string]string{"flags.yaml": "beta: true"}
		apply(hotConfigMap(ns, "flags", good))
		Eventually(func() string {
			status, body := sendReport(token, agentReport(token, good, reload.Applied, "reloaded"))
			Expect(status).To(Equal(http.StatusOK), body)
			return reloadCondition(pod)().Reason
		}, 10*time.Second, 500*time.Millisecond).Should(Equal(reload.ReasonApplied))
		res = env.KubectlPlugin("status", "-n", ns, "deploy/web", "--wait", "--timeout", "30s")
		Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr)
		Eventually(reportOf(ns, web), 30*time.Second).Should(ContainElement("config-reload pass Deployment/web"))

		By("reports that are not this pod's agent's are refused, and the pod's record stays as it was")
		before := reloadCondition(pod)()
		status, _ = sendReport("", agentReport("x", bad, reload.Rejected, ""))
		Expect(status).To(Equal(http.StatusUnauthorized), "no token")
		other := agentToken(pod, "https://kubernetes.default.svc")
		status, _ = sendReport(other, agentReport(other, bad, reload.Rejected, ""))
		Expect(status).To(Equal(http.StatusUnauthorized), "a token of another audience")
		status, _ = sendReport(token+"x", agentReport(token, bad, reload.Rejected, ""))
		Expect(status).To(Equal(http.StatusUnauthorized), "a forged token")
		Expect(reloadCondition(pod)()).To(Equal(before))

		By("an editor of the namespace may mint service-account tokens, but not one of the agent's audience bound to the pod")
		editor := "eve-editor"
		Expect(env.Client.Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eve-edits"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: editor}}})).To(Succeed())
		mint := func(audience string) framework.KubectlResult {
			return as(editor, "", "-n", ns, "create", "token", pod.Spec.ServiceAccountName, "--audience", audience,
				"--bound-object-kind", "Pod", "--bound-object-name", pod.Name, "--bound-object-uid", string(pod.UID))
		}
		Eventually(func() int { return mint("vault").ExitCode }, 10*time.Second).Should(Equal(0), "RBAC lets the editor mint a token of another audience")
		res = mint(reload.Audience)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(And(ContainSubstring("[agent-token]"), ContainSubstring("only the kubelet mints it")))
		Expect(res.Stdout).To(BeEmpty(), "no token was printed")
		Expect(reloadCondition(pod)()).To(Equal(before))

		By("a kubelet gets the agent's token for a pod that mounts it in the agent's container, and for no pod that mounts it elsewhere")
		const node = "system:node:e2e-node"
		Expect(env.Client.Create(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-node-" + ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: node}}})).To(Succeed())
		DeferCleanup(func() {
			Expect(env.Client.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-node-" + ns}})).To(Succeed())
		})
		asNode := func(p corev1.Pod) framework.KubectlResult {
			return env.Kubectl("", "--as="+node, "--as-group=system:nodes", "-n", ns, "create", "token", p.Spec.ServiceAccountName, "--audience", reload.Audience,
				"--bound-object-kind", "Pod", "--bound-object-name", p.Name, "--bound-object-uid", string(p.UID))
		}
		res = asNode(pod)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		thief := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "thief"}, Spec: corev1.PodSpec{ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "t", MountPath: "/t"}}}},
			Volumes: []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: reload.Audience, Path: "token"}}}}}}}}}
		Expect(env.Client.Create(context.Background(), &thief)).To(Succeed())
		res = asNode(thief)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("[agent-token] Pod %s/thief mounts a token of audience %s in container app", ns, reload.Audience))
		Expect(env.Client.Delete(context.Background(), &pod)).To(Succeed())
		Eventually(func() int {
			status, _ := sendReport(token, agentReport(token, bad, reload.Applied, ""))
			return status
		}, 30*time.Second, time.Second).Should(Or(Equal(http.StatusForbidden), Equal(http.StatusUnauthorized)), "the token of a pod that is gone")
		Expect(counter("configward_reload_reports_total", nil)).To(BeNumerically(">", 0))
	})

	// The webhook caches a pod a workload controls without its spec, but
	// for a pod that carries the agent or a volume of the agent's token:
	// the token check needs to see who mounts it in such a pod too.
	It("gives a kubelet no agent token for a pod a ReplicaSet controls that mounts it outside the agent", func() {
		ns := newNamespace("agent-owned", nil)
		c := env.Client
		Expect(c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Data: map[string]string{"k": "v"}})).To(Succeed())
		labels := map[string]string{"app": "thief"}
		thief := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "thief", Labels: labels}, Spec: corev1.PodSpec{ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "t", MountPath: "/t"}},
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "probe"}}}}}},
			Volumes: []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: reload.Audience, Path: "token"}}}}}}}}}
		Expect(c.Create(context.Background(), &thief)).To(Succeed())
		deleteProbe := func() int {
			return env.Kubectl("", "-n", ns, "delete", "configmap", "probe", "--dry-run=server").ExitCode
		}
		Eventually(deleteProbe, 10*time.Second, 200*time.Millisecond).Should(Equal(1), "the webhook counts the bare pod as the ConfigMap's consumer")

		By("a ReplicaSet adopts the pod, and the webhook's cache has it as the ReplicaSet's")
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keeper"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}}}
		Expect(c.Create(context.Background(), rs)).To(Succeed())
		Eventually(func() bool {
			var p corev1.Pod
			return c.Get(context.Background(), client.ObjectKeyFromObject(&thief), &p) == nil && metav1.IsControlledBy(&p, rs)
		}, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), "the ReplicaSet controller adopts the pod")
		// A pod a workload controls is no consumer of its own: the dry-run
		// delete passing shows the webhook's cache has the adopted version.
		Eventually(deleteProbe, 10*time.Second, 200*time.Millisecond).Should(Equal(0))

		By("the kubelet asks for the agent's token for it")
		node := "system:node:e2e-node-" + ns
		Expect(c.Create(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-node-" + ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: node}}})).To(Succeed())
		DeferCleanup(func() {
			Expect(c.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-node-" + ns}})).To(Succeed())
		})
		Expect(c.Get(context.Background(), client.ObjectKeyFromObject(&thief), &thief)).To(Succeed())
		res := env.Kubectl("", "--as="+node, "--as-group=system:nodes", "-n", ns, "create", "token", "default", "--audience", reload.Audience,
			"--bound-object-kind", "Pod", "--bound-object-name", thief.Name, "--bound-object-uid", string(thief.UID))
		Expect(res.ExitCode).NotTo(Equal(0), "a token was minted (%d bytes, not shown)", len(res.Stdout))
		Expect(res.Stderr).To(ContainSubstring("[agent-token] Pod %s/thief mounts a token of audience %s in container app", ns, reload.Audience))
	})
})

// reloadStatus is what `configward status -o json` says of the hot config
// of ns's workloads: pods by state, by config.
func reloadStatus(ns string) func() map[string]map[string]int {
	return func() map[string]map[string]int {
		res := env.KubectlPlugin("status", "-n", ns, "-o", "json")
		var out struct {
			Items []struct {
				Reloads []struct {
					Config string         `json:"config"`
					Pods   map[string]int `json:"pods"`
				} `json:"reloads"`
			} `json:"items"`
		}
		if json.Unmarshal([]byte(res.Stdout), &out) != nil {
			return nil
		}
		got := map[string]map[string]int{}
		for _, it := range out.Items {
			for _, r := range it.Reloads {
				got[r.Config] = r.Pods
			}
		}
		return got
	}
}

// awaitHotSeen waits until the webhook's cache knows ConfigMap name of ns
// is hot: a dry-run Deployment mounting it with subPath is refused.
func awaitHotSeen(ns, name string) {
	probe := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: hot-probe, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: hot-probe}}
  template:
    metadata: {labels: {app: hot-probe}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts: [{name: c, mountPath: /etc/c/x, subPath: x}]
      volumes: [{name: c, configMap: {name: %[2]s}}]
`, ns, name)
	Eventually(func() string {
		return env.Kubectl(probe, "create", "--dry-run=server", "-f", "-").Stderr
	}, 15*time.Second).Should(ContainSubstring("[subpath-config]"))
}
