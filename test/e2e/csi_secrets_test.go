package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/secretversions"
)

// secretProviderClass is a SecretProviderClass as a platform team writes it
// for Vault; configward reads only its existence and annotations.
func secretProviderClass(ns, name, annotations string) string {
	return fmt.Sprintf(`apiVersion: secrets-store.csi.x-k8s.io/v1
kind: SecretProviderClass
metadata:
  name: %s
  namespace: %s
%s
spec:
  provider: vault
  parameters:
    roleName: app
    objects: |
      - objectName: db-password
        secretPath: secret/data/db
        secretKey: password
`, name, ns, annotations)
}

// csiDeployment runs replicas pods that read cm from a volume and mount
// each class's secrets through the Secrets Store CSI driver.
func csiDeployment(ns, name, cm string, replicas int, classes ...string) string {
	mounts, volumes := "        - {name: config, mountPath: /etc/app}\n", "      - {name: config, configMap: {name: "+cm+"}}\n"
	for _, c := range classes {
		mounts += fmt.Sprintf("        - {name: %[1]s, mountPath: /mnt/%[1]s, readOnly: true}\n", c)
		volumes += fmt.Sprintf("      - {name: %[1]s, csi: {driver: secrets-store.csi.k8s.io, readOnly: true, volumeAttributes: {secretProviderClass: %[1]s}}}\n", c)
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts:
%[4]s      volumes:
%[5]s`, ns, name, replicas, mounts, volumes)
}

// reportVersions writes the SecretProviderClassPodStatus of a pod as the
// driver's node plugin does when it mounts or rotates the volume
// (pkg/secrets-store/utils.go of the driver): named
// <pod>-<namespace>-<class>, labelled with the node, owned by the pod, with
// each object's id and version in its status.
func reportVersions(pod *corev1.Pod, class string, versions map[string]string) {
	ctx := context.Background()
	name := pod.Name + "-" + pod.Namespace + "-" + class
	var objects []any
	for id, v := range versions {
		objects = append(objects, map[string]any{"id": id, "version": v})
	}
	status := map[string]any{
		"podName": pod.Name, "secretProviderClassName": class, "mounted": true,
		"targetPath": "/var/lib/kubelet/pods/" + string(pod.UID) + "/volumes/kubernetes.io~csi/secrets/mount",
		"objects":    objects,
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(secretversions.PodStatusKind)
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, u)
	if err == nil {
		u.Object["status"] = status
		Expect(env.Client.Update(ctx, u)).To(Succeed())
		return
	}
	u.SetName(name)
	u.SetNamespace(pod.Namespace)
	u.SetLabels(map[string]string{"internal.secrets-store.csi.k8s.io/node-name": pod.Spec.NodeName})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}})
	u.Object["status"] = status
	Expect(env.Client.Create(ctx, u)).To(Succeed())
}

// livePods lists the pods labelled app=<app> not being deleted, by name.
func livePods(ns, app string) []*corev1.Pod {
	var list corev1.PodList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// deploymentMetadata reads the metadata of Deployment ns/name.
func deploymentMetadata(ns, name string) metav1.PartialObjectMetadata {
	var d metav1.PartialObjectMetadata
	d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return d
}

func secretVersionsRecord(ns, name string) func() string {
	return func() string { return deploymentMetadata(ns, name).Annotations[v1alpha1.SecretVersionsAnnotation] }
}

// writes names what anyone but the deployment controller writes of a
// Deployment: its generation (its spec) and its metadata, without the
// status and the deployment controller's own annotations, which
// kube-controller-manager keeps writing for a while after a rollout
// reports done.
func writes(ns, name string) func() string {
	return func() string {
		d := deploymentMetadata(ns, name)
		var own []string
		for k, v := range d.Annotations {
			if !strings.HasPrefix(k, "deployment.kubernetes.io/") {
				own = append(own, k+"="+v)
			}
		}
		slices.Sort(own)
		return fmt.Sprintf("generation %d, labels %v, annotations %v", d.Generation, d.Labels, own)
	}
}

var _ = Describe("secrets mounted through the Secrets Store CSI driver", func() {
	It("records the first versions without a rollout, rolls a Deployment once per rotation however its pods report it, and never for a hot class", func() {
		ns := rolloutNamespace()
		apply(secretProviderClass(ns, "db-creds", ""), secretProviderClass(ns, "tls-certs", "  annotations: {configward.dev/reload: hot}"))
		first := applyWhenSeen(ns, []string{configMap(ns, "web-config", map[string]string{"app.yaml": "level: info"}, nil)},
			map[string][]string{"web-config": nil}, csiDeployment(ns, "web", "web-config", 2, "db-creds", "tls-certs"))
		rolloutStatus(ns, "deployment/web")
		Eventually(runningPods(ns, "web"), rolloutTimeout).Should(Equal(2))
		Expect(stateOf("Deployment", ns, "web")()).To(HaveField("Hash", first), "a class never rotated takes no part in the hash")

		By("the driver mounts version 1 in both pods: a baseline, recorded on the Deployment, rolling nothing")
		pods := livePods(ns, "web")
		Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			reportVersions(p, "db-creds", map[string]string{"secret/db-password": "1"})
			reportVersions(p, "tls-certs", map[string]string{"secret/tls": "1"})
		}
		Eventually(secretVersionsRecord(ns, "web"), 15*time.Second).Should(ContainSubstring(`"db-creds"`))
		Expect(secretVersionsRecord(ns, "web")()).NotTo(ContainSubstring("secret/db-password"), "the record names no object or version")
		Consistently(replicaSetStates(ns, "web"), settle).Should(HaveLen(1))
		Expect(stateOf("Deployment", ns, "web")()).To(HaveField("Hash", first))

		By("the hot class rotates: the app re-reads its files, nothing rolls")
		for _, p := range pods {
			reportVersions(p, "tls-certs", map[string]string{"secret/tls": "2"})
		}
		Consistently(replicaSetStates(ns, "web"), settle).Should(HaveLen(1))
		Expect(stateOf("Deployment", ns, "web")()).To(HaveField("Hash", first))

		By("the driver rotates one pod to version 2 while the other still has 1: one rollout, naming the class")
		reportVersions(pods[0], "db-creds", map[string]string{"secret/db-password": "2"})
		Eventually(stateOf("Deployment", ns, "web"), 15*time.Second).ShouldNot(HaveField("Hash", first))
		second := stateOf("Deployment", ns, "web")().Hash
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigChanged") }, 15*time.Second).Should(
			ContainElement(ContainSubstring("SecretProviderClass/db-creds changed")))

		By("the other pod catches up, and a write through the webhook keeps the hash the controller stamped")
		reportVersions(pods[1], "db-creds", map[string]string{"secret/db-password": "2"})
		// The controller records the catch-up (both pods seen at one
		// version) on its next look; the replace below must find that
		// record, not race the controller's write of it.
		// Unless the rollout pods[0]'s report started has already replaced
		// both old pods: then nothing reports any more (the new pods have
		// not mounted yet) and the record, as the last look left it, stays.
		Eventually(func() bool {
			r, err := secretversions.Decode(secretVersionsRecord(ns, "web")())
			Expect(err).NotTo(HaveOccurred())
			if len(r.Classes["db-creds"].Seen) == 1 {
				return true
			}
			for _, p := range pods {
				if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &corev1.Pod{}); !apierrors.IsNotFound(err) {
					return false
				}
			}
			return true
		}, 15*time.Second).Should(BeTrue(), "the controller recorded the catch-up, or no pod that reported is left")
		res := env.Kubectl("", "annotate", "deployment/web", "-n", ns, "team=payments")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(stateOf("Deployment", ns, "web")()).To(HaveField("Hash", second), "the webhook computes the controller's hash from the record")
		record := secretVersionsRecord(ns, "web")()
		res = env.Kubectl(csiDeployment(ns, "web", "web-config", 2, "db-creds", "tls-certs"), "replace", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(secretVersionsRecord(ns, "web")()).To(Equal(record), "a replace without the record keeps it")
		Expect(stateOf("Deployment", ns, "web")()).To(HaveField("Hash", second), "and with it the hash")
		rolloutStatus(ns, "deployment/web")

		By("the new pods mount version 2: nothing more rolls")
		Eventually(func() int { return len(livePods(ns, "web")) }, rolloutTimeout).Should(Equal(2))
		for _, p := range livePods(ns, "web") {
			Expect(p.Annotations[v1alpha1.ConfigHashAnnotation]).To(Equal(second))
			reportVersions(p, "db-creds", map[string]string{"secret/db-password": "2"})
			reportVersions(p, "tls-certs", map[string]string{"secret/tls": "3"})
		}
		Consistently(replicaSetStates(ns, "web"), settle).Should(HaveLen(2))
		Expect(stateOf("Deployment", ns, "web")()).To(HaveField("Hash", second))
		Expect(eventsFor(ns, "web", "ConfigChanged")).To(HaveLen(1))

		By("configward status, from the Deployment's Report, names the rotation as the last change")
		Eventually(func() string {
			return env.KubectlPlugin("status", "-n", ns, "deploy/web", "-o", "json").Stdout
		}, 30*time.Second).Should(And(ContainSubstring(`"state": "done"`),
			ContainSubstring(`"changed": [`+"\n"+`        "SecretProviderClass/db-creds"`)))

		By("the class is turned hot: its part leaves the hash, which rolls once more, back to the hash without it")
		res = env.Kubectl("", "annotate", "secretproviderclass/db-creds", "-n", ns, "configward.dev/reload=hot")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(stateOf("Deployment", ns, "web"), 15*time.Second).Should(HaveField("Hash", first))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigChanged") }, 15*time.Second).Should(
			ConsistOf(ContainSubstring("SecretProviderClass/db-creds changed"), ContainSubstring("SecretProviderClass/db-creds changed")))
		rolloutStatus(ns, "deployment/web")
		Expect(secretVersionsRecord(ns, "web")()).To(ContainSubstring(`"db-creds"`), "a hot class keeps its part of the record")
		stored := writes(ns, "web")()
		Consistently(writes(ns, "web"), settle).Should(Equal(stored), "nothing writes the Deployment over and over")
	})

	It("shows a rotation that a Deployment opting out does not roll as drift, and rolls it once the opt-out is removed", func() {
		ns := rolloutNamespace()
		apply(secretProviderClass(ns, "db-creds", ""))
		first := applyWhenSeen(ns, []string{configMap(ns, "web-config", map[string]string{"app.yaml": "level: info"}, nil)},
			map[string][]string{"web-config": nil}, csiDeployment(ns, "web", "web-config", 1, "db-creds"))
		rolloutStatus(ns, "deployment/web")
		Eventually(runningPods(ns, "web"), rolloutTimeout).Should(Equal(1))
		pod := livePods(ns, "web")[0]
		reportVersions(pod, "db-creds", map[string]string{"secret/db-password": "1"})
		Eventually(secretVersionsRecord(ns, "web"), 15*time.Second).Should(ContainSubstring(`"db-creds"`))
		res := env.Kubectl("", "annotate", "deployment/web", "-n", ns, "configward.dev/rollout=disabled")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Consistently(status("-n", ns), 2*time.Second).Should(HaveField("ExitCode", 0), "opting out is no drift")

		By("the driver rotates the secret: the Deployment is not rolled, and status says so, naming the class")
		reportVersions(pod, "db-creds", map[string]string{"secret/db-password": "2"})
		Eventually(status("-n", ns), 15*time.Second).Should(Equal(statusRun{ExitCode: 1, Table: "" +
			"WORKLOAD        CURRENT  STALE  STATE       LAST CHANGE                   AGE\n" +
			"Deployment/web  0/1      1      not-rolled  SecretProviderClass/db-creds  <age>\n" +
			"\n" +
			"Deployment/web: SecretProviderClass/db-creds changed, but the workload opts out of rollouts (configward.dev/rollout: disabled): running pods keep the old config until the annotation is removed and the workload is rolled\n"}))
		Expect(replicaSetStates(ns, "web")()).To(HaveLen(1))
		Expect(stateOf("Deployment", ns, "web")()).To(HaveField("Hash", first))

		By("the opt-out is removed: the rotation rolls once")
		res = env.Kubectl("", "annotate", "deployment/web", "-n", ns, "configward.dev/rollout-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(stateOf("Deployment", ns, "web"), 15*time.Second).ShouldNot(HaveField("Hash", first))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigChanged") }, 15*time.Second).Should(
			ConsistOf(ContainSubstring("SecretProviderClass/db-creds changed")))
		rolloutStatus(ns, "deployment/web")
		Eventually(status("-n", ns), rolloutTimeout).Should(Equal(statusRun{ExitCode: 0, Table: "" +
			"WORKLOAD        CURRENT  STALE  STATE  LAST CHANGE                   AGE\n" +
			"Deployment/web  1/1      0      done   SecretProviderClass/db-creds  <age>\n"}))
	})

	It("warns of a CSI volume naming a missing SecretProviderClass, and of a Secret the driver syncs read through env", func() {
		ns := rolloutNamespace()
		apply(configMap(ns, "web-config", map[string]string{"app.yaml": "level: info"}, nil))
		res := env.Kubectl(csiDeployment(ns, "web", "web-config", 1, "nowhere"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring(`[missing-config-ref] Deployment %s/web references SecretProviderClass "nowhere" (spec.template.spec.volumes[1].csi), which does not exist`, ns))
		web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
		Eventually(reportOf(ns, web), 30*time.Second).Should(ContainElement("missing-config-ref warn Deployment/web"), "the Report says so too")

		By("the class is created: the Report no longer warns")
		apply(secretProviderClass(ns, "nowhere", ""))
		Eventually(reportOf(ns, web), 30*time.Second).ShouldNot(ContainElement(HavePrefix("missing-config-ref")))

		By("a class whose secretObjects the driver syncs into a Secret read through env")
		apply(`apiVersion: secrets-store.csi.x-k8s.io/v1
kind: SecretProviderClass
metadata: {name: db-synced, namespace: `+ns+`}
spec:
  provider: vault
  secretObjects:
  - secretName: db-synced
    type: Opaque
    data: [{objectName: db-password, key: password}]
`, `apiVersion: v1
kind: Secret
metadata:
  name: db-synced
  namespace: `+ns+`
  labels: {secrets-store.csi.k8s.io/managed: "true"}
type: Opaque
data: {password: c3luY2Vk}
`)
		res = env.Kubectl(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        env: [{name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: db-synced, key: password}}}]
        volumeMounts: [{name: secrets, mountPath: /mnt/secrets, readOnly: true}]
      volumes:
      - name: secrets
        csi: {driver: secrets-store.csi.k8s.io, readOnly: true, volumeAttributes: {secretProviderClass: db-synced}}
`, ns), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("[secret-in-env]"))
		Expect(res.Stderr).NotTo(ContainSubstring("[missing-config-ref]"))
	})
})
