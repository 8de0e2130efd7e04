package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// The change set on the whole cluster: the deployment and replicaset
// controllers roll what configward re-stamps, the webhook pins the pods
// they create, and the pods are sampled all through the delivery.
var _ = Describe("change sets", func() {
	It("delivers two ConfigMaps changed in one apply as one: no pod ever reads one's new value with the other's old, and one promote moves both", func() {
		ns := newNamespace("changeset", map[string]string{policyLabel: "changeset"})
		applyPolicy(policyYAML("delivery-changeset", "changeset", `revisions: {enabled: true}
delivery:
  waves:
  - name: canary
    selector: {matchLabels: {configward.dev/wave: canary}}
  - name: rest
    approval: true
  soakSeconds: 1`))
		Eventually(policyReady("delivery-changeset"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		apps := []string{"app-0", "app-1", "app-2"}
		var deployments []string
		for i, app := range apps {
			deployments = append(deployments, waveDeployment(ns, app, i == 0, "a", "b"))
		}
		applyWhenSeen(ns, []string{configMap(ns, "a", map[string]string{"level": "1"}, nil), configMap(ns, "b", map[string]string{"level": "1"}, nil)},
			map[string][]string{"a": nil, "b": nil}, deployments...)
		for _, app := range apps {
			rolloutStatus(ns, "deployment/"+app)
		}

		By("sampling every pod's two values all through the delivery")
		var mu sync.Mutex
		var mixes []string
		samples := 0
		stop := make(chan struct{})
		sampled := make(chan struct{})
		var stopOnce sync.Once
		halt := func() { stopOnce.Do(func() { close(stop) }); <-sampled }
		DeferCleanup(halt)
		go func() {
			defer GinkgoRecover()
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				// Two reads a look: the pods and the ConfigMaps of the
				// namespace; each pod's two volumes resolved from them.
				var pods corev1.PodList
				var cms corev1.ConfigMapList
				Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
				Expect(env.Client.List(context.Background(), &cms, client.InNamespace(ns))).To(Succeed())
				level := map[string]string{}
				for _, cm := range cms.Items {
					level[cm.Name] = cm.Data["level"]
				}
				for _, p := range pods.Items {
					var values []string
					for _, v := range p.Spec.Volumes {
						if v.ConfigMap != nil {
							values = append(values, level[v.ConfigMap.Name])
						}
					}
					mu.Lock()
					samples++
					if len(values) == 2 && values[0] != values[1] {
						mixes = append(mixes, fmt.Sprintf("pod %s reads a=%s, b=%s", p.Name, values[0], values[1]))
					}
					mu.Unlock()
				}
			}
		}()
		apply(configMap(ns, "a", map[string]string{"level": "2"}, nil), configMap(ns, "b", map[string]string{"level": "2"}, nil))
		Eventually(latestDelivery(ns, "a"), 2*rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		recs := deliveries(ns, "a")
		Expect(recs).To(HaveLen(1))
		Expect(deliveries(ns, "b")).To(ConsistOf(HaveField("Name", recs[0].Name)), "one record delivers both")
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-0", "level")()) }, rolloutTimeout).Should(Equal([]string{"2", "2"}))
		Expect(valuesOf(readsOf(ns, "app-1", "level")())).To(Equal([]string{"1", "1"}))

		res := env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/b")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "a"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		for _, app := range apps {
			Eventually(func() []string { return valuesOf(readsOf(ns, app, "level")()) }, rolloutTimeout).Should(Equal([]string{"2", "2"}), app)
		}
		halt()
		mu.Lock()
		defer mu.Unlock()
		Expect(samples).To(BeNumerically(">", 30), "sampled all through the delivery")
		Expect(mixes).To(BeEmpty())
	})

	It("delivers two hot ConfigMaps changed in one apply as one: one record, each wave's two channels written in one look, and one promote moves both", func() {
		ns := hotDeliveryNamespace("pair", halfOfA+"- name: rest\n  approval: true\nsoakSeconds: 0\npropagationSeconds: 1\n")
		apply(hotConfigMap(ns, "limits", map[string]string{"level": "info"}))
		awaitHotSeen(ns, "limits")
		Eventually(channelsOf(ns, "limits"), 20*time.Second, 200*time.Millisecond).Should(Equal(map[string]string{"canary": "info", "rest": "info"}))
		// Deployment a again, mounting both: made anew, so that no rolling
		// update's surge decides where its pods go.
		Expect(env.Kubectl("", "delete", "deployment", "a", "-n", ns, "--wait")).To(HaveField("ExitCode", 0))
		Eventually(func() []*corev1.Pod { return livePods(ns, "a") }, rolloutTimeout).Should(BeEmpty())
		deployment := func(agent string) string {
			return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: %s, labels: {app: a}}
spec:
  replicas: 2
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}%s}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts: [{name: flags, mountPath: /etc/flags}, {name: limits, mountPath: /etc/limits}]
      volumes: [{name: flags, configMap: {name: flags}}, {name: limits, configMap: {name: limits}}]
`, ns, agent)
		}
		By("a workload that mounts two channelled hot configs without the agent is warned that its pods could read a mix")
		res := env.Kubectl(deployment(""), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(And(ContainSubstring("[config-set] Deployment "+ns+"/a mounts hot ConfigMap/flags, ConfigMap/limits"),
			ContainSubstring("without the reload agent")))
		res = env.Kubectl(deployment(`, annotations: {configward.dev/reload-agent: watch}`), "apply", "--dry-run=server", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("reload-agent: watch, whose program reloads by itself"))
		res = env.Kubectl(deployment(`, annotations: {configward.dev/reload-agent: "http://localhost:8080/-/reload"}`), "apply", "--dry-run=server", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).NotTo(ContainSubstring("[config-set]"), "an agent that triggers the reload holds it until the set is whole")
		rolloutStatus(ns, "deployment/a")
		// Each pod of a mounts its own wave's channel of both.
		Eventually(func() map[string]int {
			out := map[string]int{}
			for _, p := range livePods(ns, "a") {
				var named []string
				for _, v := range p.Spec.Volumes {
					if v.ConfigMap != nil {
						named = append(named, v.ConfigMap.Name)
					}
				}
				out[strings.Join(named, "+")]++
			}
			return out
		}, rolloutTimeout).Should(Equal(map[string]int{"flags-ch-canary+limits-ch-canary": 1, "flags-ch-rest+limits-ch-rest": 1}))

		res = env.Kubectl(hotConfigMap(ns, "flags", map[string]string{"level": "debug"})+"---\n"+hotConfigMap(ns, "limits", map[string]string{"level": "debug"}), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), 2*rolloutTimeout, 500*time.Millisecond).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		recs := deliveries(ns, "flags")
		Expect(recs).To(HaveLen(1))
		Expect(deliveries(ns, "limits")).To(ConsistOf(HaveField("Name", recs[0].Name)), "one record delivers both")
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))
		Expect(channelsOf(ns, "limits")()).To(Equal(map[string]string{"canary": "debug", "rest": "info"}))

		promoted := time.Now()
		res = env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/limits")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "flags"), 2*rolloutTimeout, 500*time.Millisecond).Should(HavePrefix("Succeeded/"))
		Expect(channelsOf(ns, "flags")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))
		Expect(channelsOf(ns, "limits")()).To(Equal(map[string]string{"canary": "debug", "rest": "debug"}))

		By("each wave's two channels were written together, the rest's only after the promote")
		writes, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.Verb == "update" && ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Namespace == ns &&
				strings.Contains(ev.ObjectRef.Name, "-ch-") && ev.ResponseStatus.Code == 200
		})
		Expect(err).NotTo(HaveOccurred())
		at := map[string][]time.Time{}
		for _, ev := range writes {
			at[ev.ObjectRef.Name] = append(at[ev.ObjectRef.Name], ev.StageTimestamp.Time)
		}
		for _, wave := range []string{"canary", "rest"} {
			f, l := at["flags-ch-"+wave], at["limits-ch-"+wave]
			Expect(f).To(HaveLen(1), "flags' channel of %s written once", wave)
			Expect(l).To(HaveLen(1), "limits' channel of %s written once", wave)
			// One look writes both, one after the other: seconds apart at
			// most however loaded the machine, where the approval between
			// the waves is many.
			Expect(f[0].Sub(l[0]).Abs()).To(BeNumerically("<", 5*time.Second), "%s's channels written in one look", wave)
		}
		Expect(at["flags-ch-rest"][0]).To(BeTemporally(">", promoted), "the rest waited for the promote")
	})

	It("warns the author of a ConfigPolicy that would keep no Secret's content where a ConfigSet lists a Secret, and lets the policy in", func() {
		ns := newNamespace("configset-secrets", map[string]string{policyLabel: "configset-secrets"})
		keep := "revisions: {enabled: true, secrets: true}\ndelivery:\n  waves: [{name: all}]"
		applyPolicy(policyYAML("delivery-configset-secrets", "configset-secrets", keep))
		Eventually(policyReady("delivery-configset-secrets"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		apply(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: keys, namespace: %s}\nstringData: {k: v}\n", ns))
		set := fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigSet\nmetadata: {name: payments, namespace: %s}\nspec:\n  version: v1\n  members:\n  - {kind: Secret, name: keys}\n", ns)
		// The webhook replicas take the policy from their watch.
		Eventually(func() int { return env.Kubectl(set, "apply", "-f", "-").ExitCode }, 10*time.Second, 250*time.Millisecond).Should(Equal(0))

		// A tenant's set must not veto the platform's policy: the author
		// is told which sets stall, and the policy goes in.
		res := env.Kubectl(policyYAML("delivery-configset-secrets", "configset-secrets", "revisions: {enabled: true}\ndelivery:\n  waves: [{name: all}]"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(And(ContainSubstring("Warning: [config-set] ConfigPolicy delivery-configset-secrets: spec.revisions.secrets"),
			ContainSubstring("ConfigSet %s/payments lists Secret/keys", ns)))
		var cp v1alpha1.ConfigPolicy
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: "delivery-configset-secrets"}, &cp)).To(Succeed())
		Expect(cp.Spec.Revisions.Secrets).To(BeFalse())

		By("a write that strands nothing new says nothing")
		res = env.Kubectl(policyYAML("delivery-configset-secrets", "configset-secrets", "revisions: {enabled: true}\ndelivery:\n  progressDeadlineSeconds: 300\n  waves: [{name: all}]"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).NotTo(ContainSubstring("[config-set]"))
	})

	It("refuses a ConfigSet that lists a config another set has, or members that could not move together", func() {
		ns := newNamespace("configset-refused", map[string]string{policyLabel: "configset-refused"})
		applyPolicy(policyYAML("delivery-configset-refused", "configset-refused", "revisions: {enabled: true}\ndelivery:\n  waves: [{name: all}]"))
		Eventually(policyReady("delivery-configset-refused"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		apply(configMap(ns, "a", map[string]string{"level": "1"}, nil), configMap(ns, "b", map[string]string{"level": "1"}, nil),
			configMap(ns, "h", map[string]string{"level": "1"}, map[string]string{"configward.dev/reload": "hot"}),
			fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: %s}\nstringData: {k: v}\n", ns))
		set := func(name string, members ...string) string {
			y := fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigSet\nmetadata: {name: %s, namespace: %s}\nspec:\n  version: v1\n  members:\n", name, ns)
			for _, m := range members {
				kind, n, _ := strings.Cut(m, "/")
				y += fmt.Sprintf("  - {kind: %s, name: %s}\n", kind, n)
			}
			return y
		}
		Expect(env.Kubectl(set("first", "ConfigMap/a"), "apply", "-f", "-")).To(HaveField("ExitCode", 0))
		for _, tc := range []struct{ yaml, want string }{
			{set("second", "ConfigMap/b", "ConfigMap/a"), "ConfigMap/a is a member of ConfigSet first: a config belongs to one set"},
			{set("mixed", "ConfigMap/b", "ConfigMap/h"), "members share their reload mode: ConfigMap/h reload in place (hot) and ConfigMap/b roll their workloads"},
			{set("secret", "Secret/s"), "Secret/s: delivery keeps a Secret's content only with revisions.secrets"},
		} {
			res := env.Kubectl(tc.yaml, "apply", "-f", "-")
			Expect(res.ExitCode).NotTo(Equal(0), tc.yaml)
			Expect(res.Stderr).To(ContainSubstring(tc.want))
		}
		By("a write that gives one member another reload mode than the set's others is refused, and the member stays as it was")
		Expect(env.Kubectl(set("duo", "ConfigMap/b", "ConfigMap/c"), "apply", "-f", "-")).To(HaveField("ExitCode", 0))
		apply(configMap(ns, "c", map[string]string{"level": "1"}, map[string]string{"configward.dev/config-set-version": "v1"}))
		Expect(env.Kubectl("", "annotate", "configmap", "b", "-n", ns, "configward.dev/config-set-version=v1")).To(HaveField("ExitCode", 0))
		res := env.Kubectl("", "annotate", "configmap", "c", "-n", ns, "configward.dev/reload=hot")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("[config-set] ConfigMap %s/c: ConfigSet duo's members share their reload mode, and this write makes it reload in place (hot) while ConfigMap/b roll their workloads", ns))
		Expect(env.Kubectl("", "get", "configmap", "c", "-n", ns, "-o", "jsonpath={.metadata.annotations}")).To(HaveField("Stdout", Not(ContainSubstring("configward.dev/reload"))))
		By("a set of one member may take either mode")
		Expect(env.Kubectl("", "annotate", "configmap", "a", "-n", ns, "configward.dev/config-set-version=v1", "configward.dev/reload=hot")).To(HaveField("ExitCode", 0), "first lists a alone")

		By("the version's format and the member count are the CRD's")
		res = env.Kubectl(strings.Replace(set("version", "ConfigMap/b"), "version: v1", "version: 'v 1'", 1), "apply", "-f", "-")
		Expect(res).To(And(Not(HaveField("ExitCode", 0)), HaveField("Stderr", ContainSubstring("spec.version"))))
		var many []string
		for i := range 17 {
			many = append(many, fmt.Sprintf("ConfigMap/m%d", i))
		}
		res = env.Kubectl(set("many", many...), "apply", "-f", "-")
		Expect(res).To(And(Not(HaveField("ExitCode", 0)), HaveField("Stderr", ContainSubstring("spec.members"))))
	})
})
