package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// These specs put hot config's pods on its channels on the whole cluster:
// kube-controller-manager creates the pods, configward's Pod path points
// each at its wave's channel, and its webhook keeps everyone but configward
// from writing a channel. How a change then moves through the channels
// wave by wave (the channels and delivery controllers' decisions) is
// specified in the controller tier (test/controllers/hot_delivery_test.go);
// the real node's spec (test/node) has the reload agents and a real
// program.

// hotDeliveryNamespace returns a namespace where delivery is on with
// waves (YAML under spec.delivery), revisions covering Secrets, a hot
// ConfigMap "flags" holding level=info, and Deployments a (labelled app=a,
// the canary's selector) and b, two pods each, mounting it as a directory;
// it returns once every pod runs and both channels hold level=info.
func hotDeliveryNamespace(tag, waves string) string {
	ns := newNamespace("hot", map[string]string{policyLabel: tag})
	applyPolicy(policyYAML("hot-"+tag, tag, "revisions: {enabled: true, secrets: true}\ndelivery:\n"+indent(waves, 2)))
	Eventually(policyReady("hot-"+tag), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
	Eventually(func() string {
		var n corev1.Namespace
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)).To(Succeed())
		return n.Labels[v1alpha1.HotChannelsLabel]
	}, 10*time.Second, 100*time.Millisecond).Should(Equal("true"), "the controller sends the namespace's pods to the Pod path")
	apply(hotConfigMap(ns, "flags", map[string]string{"level": "info"}))
	awaitHotSeen(ns, "flags")
	Eventually(channelsOf(ns, "flags"), 20*time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
	apply(hotDeployment(ns, "a", 2), hotDeployment(ns, "b", 2))
	rolloutStatus(ns, "deployment/a")
	rolloutStatus(ns, "deployment/b")
	return ns
}

// halfOfA begins the waves of every spec here: a canary wave of one of
// Deployment a's two pods.
const halfOfA = `waves:
- name: canary
  selector: {matchLabels: {app: a}}
  podPercent: 50
`

// hotDeployment is a Deployment labelled app=name whose pods mount hot
// ConfigMap flags as a directory.
func hotDeployment(ns, name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s, labels: {app: %[2]s}}
spec:
  replicas: %[3]d
  minReadySeconds: 3
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts: [{name: flags, mountPath: /etc/flags}]
      volumes: [{name: flags, configMap: {name: flags}}]
`, ns, name, replicas)
}

// channelsOf maps each wave to the level its channel of cm holds.
func channelsOf(ns, cm string) func() map[string]string {
	return func() map[string]string {
		var list corev1.ConfigMapList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
		out := map[string]string{}
		for _, c := range list.Items {
			if c.Annotations[v1alpha1.ChannelOfAnnotation] == cm {
				out[c.Annotations[v1alpha1.ChannelWaveAnnotation]] = c.Data["level"]
			}
		}
		return out
	}
}

// mountsOf maps each live pod of app to the ConfigMap its flags volume
// names.
func mountsOf(ns, app string) func() map[string]string {
	return func() map[string]string {
		out := map[string]string{}
		for _, p := range livePods(ns, app) {
			for _, v := range p.Spec.Volumes {
				if v.Name == "flags" && v.ConfigMap != nil {
					out[p.Name] = v.ConfigMap.Name
				}
			}
		}
		return out
	}
}

// countValues counts the values of m.
func countValues(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

var _ = Describe("hot config delivered through channels", func() {
	It("places one pod of the canary's Deployment on the canary channel and keeps the placement as pods are replaced and workloads added", func() {
		ns := hotDeliveryNamespace("place", halfOfA+`- name: rest
`)
		Expect(countValues(mountsOf(ns, "a")())).To(Equal(map[string]int{"flags-ch-canary": 1, "flags-ch-rest": 1}), "half of a's two pods, rounded up")
		Expect(countValues(mountsOf(ns, "b")())).To(Equal(map[string]int{"flags-ch-rest": 2}))
		for _, p := range livePods(ns, "a") {
			Expect(p.Annotations).To(HaveKey(v1alpha1.ChannelWaveAnnotation))
		}
		var d appsv1.Deployment
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a"}, &d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Volumes[0].ConfigMap.Name).To(Equal("flags"), "the template stays as written")

		By("the canary pod replaced: its replacement takes the canary's place, the other pod stays where it is")
		var canary, other string
		for pod, cm := range mountsOf(ns, "a")() {
			if cm == "flags-ch-canary" {
				canary = pod
			} else {
				other = pod
			}
		}
		Expect(env.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: canary}})).To(Succeed())
		Eventually(mountsOf(ns, "a"), rolloutTimeout, 250*time.Millisecond).Should(And(HaveLen(2), Not(HaveKey(canary)), HaveKeyWithValue(other, "flags-ch-rest")))
		Expect(countValues(mountsOf(ns, "a")())).To(Equal(map[string]int{"flags-ch-canary": 1, "flags-ch-rest": 1}))

		By("a rolling update of a (a new image) keeps its share: the new revision's pods split as the old ones did")
		apply(strings.Replace(hotDeployment(ns, "a", 2), "registry.example/app:1", "registry.example/app:2", 1))
		rolloutStatus(ns, "deployment/a")
		Eventually(mountsOf(ns, "a"), rolloutTimeout, 250*time.Millisecond).Should(HaveLen(2))
		Expect(countValues(mountsOf(ns, "a")())).To(Equal(map[string]int{"flags-ch-canary": 1, "flags-ch-rest": 1}),
			"the old revision's pods, on their way out, do not count against the new one's share")

		By("a workload added later goes where its labels say, and moves no one; the hot Secret it also mounts is pointed at that Secret's channel")
		apply(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: token, namespace: %s, annotations: {configward.dev/reload: hot}}
stringData: {level: info}
`, ns))
		Eventually(func() []string {
			var list corev1.SecretList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ChannelLabel: "true"})).To(Succeed())
			var names []string
			for _, s := range list.Items {
				names = append(names, s.Name)
			}
			return names
		}, 20*time.Second, 200*time.Millisecond).Should(ConsistOf("token-ch-canary", "token-ch-rest"))
		before := mountsOf(ns, "a")()
		apply(strings.Replace(strings.Replace(hotDeployment(ns, "c", 1),
			"volumes: [{name: flags, configMap: {name: flags}}]", "volumes: [{name: flags, configMap: {name: flags}}, {name: token, secret: {secretName: token}}]", 1),
			"volumeMounts: [{name: flags, mountPath: /etc/flags}]", "volumeMounts: [{name: flags, mountPath: /etc/flags}, {name: token, mountPath: /etc/token}]", 1))
		rolloutStatus(ns, "deployment/c")
		Expect(countValues(mountsOf(ns, "c")())).To(Equal(map[string]int{"flags-ch-rest": 1}))
		for _, p := range livePods(ns, "c") {
			var secrets []string
			for _, v := range p.Spec.Volumes {
				if v.Secret != nil {
					secrets = append(secrets, v.Secret.SecretName)
				}
			}
			Expect(secrets).To(ConsistOf("token-ch-rest"))
		}
		Expect(mountsOf(ns, "a")()).To(Equal(before))

		By("a person and the pipeline are refused when they write a channel; it stays as configward wrote it")
		patch := `{"data":{"level":"broken"}}`
		for _, who := range []string{human, pipelineSA} {
			res := as(who, "", "patch", "configmap/flags-ch-rest", "-n", ns, "--type=merge", "-p", patch)
			Expect(res.ExitCode).NotTo(Equal(0), who)
			Expect(res.Stderr).To(ContainSubstring("[config-delivery] ConfigMap %s/flags-ch-rest is configward's channel of ConfigMap flags for wave rest", ns), who)
			res = as(who, "", "delete", "configmap/flags-ch-rest", "-n", ns)
			Expect(res.ExitCode).NotTo(Equal(0), who)
		}
		forged := strings.ReplaceAll(hotConfigMap(ns, "flags-ch-extra", map[string]string{"level": "broken"}), "annotations:", "labels: {configward.dev/channel: \"true\"}\n  annotations:")
		res := as(human, forged, "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0), res.Stdout)
		Expect(res.Stderr).To(ContainSubstring("[config-delivery]"))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "info", "rest": "info"}))

		By("only configward points a pod at a channel: a person's pod or a template that names one is refused, and so is an object of a channel's name")
		bare := func(name, volume, extraMeta string) string {
			return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s%s}
spec:
  containers: [{name: app, image: registry.example/app:1, volumeMounts: [{name: flags, mountPath: /etc/flags}]}]
  volumes: [{name: flags, configMap: {name: %s}}]
`, name, ns, extraMeta, volume)
		}
		res = as(human, bare("sneaky", "flags-ch-canary", ""), "create", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("[config-delivery] Pod %s/sneaky names ConfigMap flags-ch-canary", ns))
		named := strings.Replace(hotDeployment(ns, "d", 1), "configMap: {name: flags}", "configMap: {name: flags-ch-canary}", 1)
		res = as(human, named, "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("its template names ConfigMap flags-ch-canary"))
		res = asPipelineResult(configMap(ns, "other-ch-canary", map[string]string{"level": "x"}, nil))
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("has the name of a channel of hot config for wave canary"))

		By("a claimed controller reference plays no part in a person's pod's placement: it is placed as the bare pod it is")
		var rsList appsv1.ReplicaSetList
		Expect(env.Client.List(context.Background(), &rsList, client.InNamespace(ns), client.MatchingLabels{"app": "a"})).To(Succeed())
		Expect(rsList.Items).NotTo(BeEmpty())
		rs := rsList.Items[0]
		claim := fmt.Sprintf(", labels: {app: a}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: %s, uid: %s, controller: true}]", rs.Name, rs.UID)
		res = as(human, bare("claims-a", "flags", claim), "create", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		var claimed corev1.Pod
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "claims-a"}, &claimed)).To(Succeed())
		Expect(claimed.Annotations).To(HaveKeyWithValue(v1alpha1.ChannelWaveAnnotation, "rest"), "a bare pod's wave is the last")
		Expect(claimed.Spec.Volumes[0].ConfigMap.Name).To(Equal("flags-ch-rest"))
	})
})

// asPipelineResult applies manifests as the pipeline and returns what
// kubectl said.
func asPipelineResult(manifests ...string) framework.KubectlResult {
	return as(pipelineSA, strings.Join(manifests, "\n---\n"), "apply", "-f", "-")
}
