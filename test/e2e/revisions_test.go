package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// snapshotGrace is how long the suite's controller keeps a snapshot that
// nothing names.
const snapshotGrace = 2 * time.Second

// revisionsNamespace returns a namespace a ConfigPolicy gives revisions
// (tag names the policy, so specs' policies never meet).
func revisionsNamespace(tag, settings string) string {
	ns := newNamespace("revisions", map[string]string{policyLabel: tag})
	applyPolicy(policyYAML("revisions-"+tag, tag, "revisions: {"+settings+"}"))
	Eventually(policyReady("revisions-"+tag), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
	return ns
}

// readsOf says, for each pod labelled app=<app> that is not being deleted,
// which ConfigMap its "config" volume names and what that ConfigMap holds
// under key, as "name=value": the bytes the pod reads, from the API.
func readsOf(ns, app, key string) func() []string {
	return func() []string {
		var pods corev1.PodList
		Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		var out []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			for _, v := range p.Spec.Volumes {
				if v.ConfigMap == nil {
					continue
				}
				var cm corev1.ConfigMap
				value := "<missing>"
				if env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: v.ConfigMap.Name}, &cm) == nil {
					value = cm.Data[key]
				}
				out = append(out, v.ConfigMap.Name+"="+value)
			}
		}
		slices.Sort(out)
		return out
	}
}

// snapshotsOf lists the snapshots of ConfigMap cm in ns, by name, with the
// value under key.
func snapshotsOf(ns, cm, key string) func() map[string]string {
	return func() map[string]string {
		var list corev1.ConfigMapList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns),
			client.MatchingLabels{v1alpha1.SnapshotLabel: v1alpha1.SnapshotLabelValue})).To(Succeed())
		out := map[string]string{}
		for _, s := range list.Items {
			if s.Annotations[v1alpha1.SnapshotOfAnnotation] == cm {
				Expect(s.Immutable).To(HaveValue(BeTrue()), "a snapshot is immutable")
				out[s.Name] = s.Data[key]
			}
		}
		return out
	}
}

// valuesOf are the values of reads ("name=value"), without the names.
func valuesOf(reads []string) []string {
	var out []string
	for _, r := range reads {
		_, v, _ := strings.Cut(r, "=")
		out = append(out, v)
	}
	return out
}

var _ = Describe("config revisions", func() {
	It("pins every pod to its revision's bytes, old ReplicaSet included, and a rollback brings its config back", func() {
		ns := revisionsNamespace("pin", "enabled: true")
		cm := func(level string) string { return configMap(ns, "cfg", map[string]string{"level": level}, nil) }
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"cfg": nil}, replicatedDeployment(ns, "web", "cfg", 3))
		Eventually(readsOf(ns, "web", "level"), rolloutTimeout).Should(HaveLen(3))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info", "info"))
		first := readsOf(ns, "web", "level")()
		Expect(first[0]).To(HavePrefix("cfg-"), "pods name a snapshot, not the ConfigMap")
		Expect(snapshotsOf(ns, "cfg", "level")()).To(HaveLen(1))

		By("a change rolls the Deployment onto a snapshot of the new content")
		apply(cm("debug"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("debug", "debug", "debug"))
		rolloutStatus(ns, "deployment/web")
		Expect(snapshotsOf(ns, "cfg", "level")()).To(HaveLen(2), "one snapshot per content")

		By("kubectl rollout undo: the restored revision's pods read the old bytes, and nothing moves it on")
		res := env.Kubectl("", "rollout", "undo", "deployment/web", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("[config-revision] Deployment " + ns + "/web: rolled back to the revision with config hash"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info", "info"))
		rolloutStatus(ns, "deployment/web")
		Expect(readsOf(ns, "web", "level")()).To(Equal(first), "the same snapshot as before the change")
		var d appsv1.Deployment
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		rolledBack := d.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]
		Expect(d.Annotations).To(HaveKey(v1alpha1.RolledBackFromAnnotation))
		Consistently(stateOf("Deployment", ns, "web"), settle).Should(HaveField("Hash", rolledBack), "no re-stamp follows a rollback")
		Eventually(status("-n", ns), 15*time.Second).Should(HaveField("Table", ContainSubstring("rolled-back")))
		res = env.Status("-n", ns, "deployment/web")
		Expect(res.Stdout).To(ContainSubstring("Deployment/web: rolled back: it was rolled back (kubectl rollout undo) to an earlier revision"))
		Expect(res.Stdout).To(ContainSubstring("Revisions of Deployment/web (pods by the revision they run):"))
		snapshotOfFirst, _, _ := strings.Cut(first[0], "=")
		Expect(res.Stdout).To(MatchRegexp(`\n\d+\s+3\s+\S+\s+` + regexp.QuoteMeta(rolledBack) + `\s+ConfigMap/cfg=` + snapshotOfFirst + `\n`))

		By("the next config change rolls it forward again")
		apply(cm("warn"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("warn", "warn", "warn"))
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		Expect(d.Annotations).NotTo(HaveKey(v1alpha1.RolledBackFromAnnotation))
	})

	It("gives the pods a paused rollout's old ReplicaSet creates the old bytes", func() {
		ns := revisionsNamespace("paused", "enabled: true")
		cm := func(level string) string { return configMap(ns, "cfg", map[string]string{"level": level}, nil) }
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"cfg": nil}, replicatedDeployment(ns, "web", "cfg", 2))
		Eventually(runningPods(ns, "web"), rolloutTimeout).Should(Equal(2))
		Expect(env.Kubectl("", "rollout", "pause", "deployment/web", "-n", ns).ExitCode).To(Equal(0))
		apply(cm("debug"))
		// Paused: the template gets the new revision, no pod is replaced.
		Eventually(func() int { return len(replicaSetsOf(ns, "web")) }, 15*time.Second).Should(Equal(1))
		Eventually(stateOf("Deployment", ns, "web"), 15*time.Second).Should(HaveField("Hash", Not(BeEmpty())))
		Expect(env.Kubectl("", "scale", "deployment/web", "--replicas=4", "-n", ns).ExitCode).To(Equal(0))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info", "info", "info"))
	})

	It("never copies hot config, and leaves the pods of namespaces without revisions alone", func() {
		ns := revisionsNamespace("hot", "enabled: true")
		hot := configMap(ns, "flags", map[string]string{"level": "info"}, map[string]string{v1alpha1.ReloadAnnotation: "hot"})
		before := counter("configward_revision_pod_reviews_total", nil)
		apply(hot, replicatedDeployment(ns, "web", "flags", 1))
		Eventually(runningPods(ns, "web"), rolloutTimeout).Should(Equal(1))
		Expect(readsOf(ns, "web", "level")()).To(Equal([]string{"flags=info"}))
		Expect(snapshotsOf(ns, "flags", "level")()).To(BeEmpty())

		plain := rolloutNamespace()
		applyWhenSeen(plain, []string{configMap(plain, "cfg", map[string]string{"level": "info"}, nil)}, map[string][]string{"cfg": nil},
			replicatedDeployment(plain, "web", "cfg", 2))
		Eventually(runningPods(plain, "web"), rolloutTimeout).Should(Equal(2))
		Expect(readsOf(plain, "web", "level")()).To(Equal([]string{"cfg=info", "cfg=info"}))
		Expect(counter("configward_revision_pod_reviews_total", nil)).To(Equal(before), "no pod of either namespace reached the Pod path")
	})

	It("keeps snapshots while something names them, and no longer", func() {
		ns := revisionsNamespace("cleanup", "enabled: true")
		cm := func(level string) string { return configMap(ns, "shared", map[string]string{"level": level}, nil) }
		limited := func(name string) string {
			return strings.Replace(replicatedDeployment(ns, name, "shared", 1), "spec:\n  replicas:", "spec:\n  revisionHistoryLimit: 1\n  replicas:", 1)
		}
		applyWhenSeen(ns, []string{cm("v0")}, map[string][]string{"shared": nil}, limited("a"), limited("b"))
		for _, level := range []string{"v1", "v2", "v3"} {
			apply(cm(level))
			Eventually(func() []string { return valuesOf(readsOf(ns, "a", "level")()) }, rolloutTimeout).Should(ConsistOf(level))
			Eventually(func() []string { return valuesOf(readsOf(ns, "b", "level")()) }, rolloutTimeout).Should(ConsistOf(level))
		}
		By("revisionHistoryLimit 1 keeps the current and one earlier revision: two snapshots, shared by both")
		Eventually(snapshotsOf(ns, "shared", "level"), 30*time.Second).Should(SatisfyAll(HaveLen(2), ContainElements("v2", "v3")))

		By("deleting one of the two Deployments keeps what the other names")
		Expect(env.Kubectl("", "delete", "deployment", "a", "-n", ns, "--wait=true").ExitCode).To(Equal(0))
		Consistently(snapshotsOf(ns, "shared", "level"), snapshotGrace+3*time.Second).Should(HaveLen(2))
		By("deleting the last one deletes its snapshots")
		Expect(env.Kubectl("", "delete", "deployment", "b", "-n", ns, "--wait=true").ExitCode).To(Equal(0))
		Eventually(snapshotsOf(ns, "shared", "level"), 60*time.Second).Should(BeEmpty())
	})

	It("pins the pods of StatefulSets (and brings a rollback's config back), DaemonSets, a CronJob's Jobs and bare Pods, and stamps a declared Rollout", func() {
		ns := revisionsNamespace("kinds", "enabled: true")
		cm := func(level string) string { return configMap(ns, "cfg", map[string]string{"level": level}, nil) }
		podSpec := "containers:\n- name: app\n  image: registry.example/app:1\n  volumeMounts: [{name: config, mountPath: /etc/app}]\n" +
			"volumes: [{name: config, configMap: {name: cfg}}]\n"
		sts := fmt.Sprintf("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: %s}\nspec:\n  replicas: 2\n  serviceName: db\n"+
			"  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec:\n%s", ns, indent(podSpec, 6))
		ds := strings.NewReplacer("StatefulSet", "DaemonSet", "name: db", "name: agent", "app: db", "app: agent", "  serviceName: db\n", "", "  replicas: 2\n", "").Replace(sts)
		cron := fmt.Sprintf("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly, namespace: %s}\nspec:\n  schedule: \"0 3 * * *\"\n"+
			"  jobTemplate:\n    spec:\n      template:\n        metadata: {labels: {app: nightly}}\n        spec:\n%s", ns, indent(podSpec+"restartPolicy: Never\n", 10))
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"cfg": nil}, sts, ds, cron, argoRollout(ns, "canary", podSpec, ""))
		for _, app := range []string{"db", "agent"} {
			Eventually(func() []string { return valuesOf(readsOf(ns, app, "level")()) }, rolloutTimeout).Should(And(Not(BeEmpty()), HaveEach("info")), app)
			Expect(readsOf(ns, app, "level")()).To(HaveEach(HavePrefix("cfg-")), app)
		}
		By("the next Job of the CronJob")
		Expect(env.Kubectl("", "create", "job", "--from=cronjob/nightly", "manual", "-n", ns).ExitCode).To(Equal(0))
		Eventually(func() []string { return valuesOf(readsOf(ns, "nightly", "level")()) }, rolloutTimeout).Should(ConsistOf("info"))
		Expect(readsOf(ns, "nightly", "level")()).To(HaveEach(HavePrefix("cfg-")))
		By("the declared Rollout (no Argo controller here: its template names the snapshot, which exists)")
		Eventually(func() string {
			st := rolloutState(ns, "canary")()
			return st.Hash
		}, 15*time.Second).ShouldNot(BeEmpty())

		By("a change rolls the StatefulSet; kubectl rollout undo brings its pods the old bytes")
		first := readsOf(ns, "db", "level")()
		apply(cm("debug"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "db", "level")()) }, rolloutTimeout).Should(ConsistOf("debug", "debug"))
		res := env.Kubectl("", "rollout", "undo", "statefulset/db", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("[config-revision] StatefulSet " + ns + "/db: rolled back"))
		Eventually(readsOf(ns, "db", "level"), rolloutTimeout).Should(Equal(first))

		By("bare Pods: the first reads a content without a snapshot as it is; once written, the next is pinned")
		apply(configMap(ns, "solo", map[string]string{"level": "solo"}, nil))
		bare := func(name string) string {
			return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s, labels: {app: bare}}\nspec:\n%s", name, ns,
				indent(strings.ReplaceAll(podSpec, "name: cfg", "name: solo"), 2))
		}
		Eventually(func() string { return env.Kubectl(bare("probe"), "create", "--dry-run=server", "-f", "-").Stderr }, 15*time.Second).
			Should(ContainSubstring("[config-revision] Pod " + ns + "/probe reads ConfigMap/solo as they are now"))
		Expect(env.Kubectl(bare("first"), "create", "-f", "-").ExitCode).To(Equal(0))
		Eventually(snapshotsOf(ns, "solo", "level"), 15*time.Second).Should(HaveLen(1))
		Eventually(func() string {
			return env.Kubectl(bare("second"), "create", "--dry-run=server", "-f", "-").Stderr
		}, 15*time.Second).ShouldNot(ContainSubstring("as they are now"))
		Expect(env.Kubectl(bare("second"), "create", "-f", "-").ExitCode).To(Equal(0))
		Eventually(readsOf(ns, "bare", "level"), rolloutTimeout).Should(ConsistOf("solo=solo", HavePrefix("solo-")))
	})

	It("lets nobody but configward change or delete a snapshot, the pipeline included", func() {
		ns := revisionsNamespace("protect", "enabled: true")
		applyWhenSeen(ns, []string{configMap(ns, "cfg", map[string]string{"level": "info"}, nil)}, map[string][]string{"cfg": nil},
			replicatedDeployment(ns, "web", "cfg", 1))
		Eventually(snapshotsOf(ns, "cfg", "level"), rolloutTimeout).Should(HaveLen(1))
		var name string
		for n := range snapshotsOf(ns, "cfg", "level")() {
			name = n
		}
		for _, args := range [][]string{
			{"delete", "configmap", name, "-n", ns},
			{"label", "configmap", name, "-n", ns, "configward.dev/snapshot-", "--overwrite"},
			{"annotate", "configmap", name, "-n", ns, "team=a"},
		} {
			for _, who := range []string{human, pipelineSA} {
				res := as(who, "", args...)
				Expect(res.ExitCode).To(Equal(1), "%s %v", who, args)
				Expect(res.Stderr).To(ContainSubstring("[config-revision] ConfigMap " + ns + "/" + name + " is configward's snapshot of ConfigMap cfg"))
			}
		}
		Expect(snapshotsOf(ns, "cfg", "level")()).To(HaveKey(name))
	})

	It("rolls nothing onto a revision whose snapshot a ResourceQuota keeps it from writing", func() {
		ns := revisionsNamespace("quota", "enabled: true")
		cm := func(level string) string { return configMap(ns, "cfg", map[string]string{"level": level}, nil) }
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"cfg": nil}, replicatedDeployment(ns, "web", "cfg", 1))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("info"))
		before := stateOf("Deployment", ns, "web")()
		var cms corev1.ConfigMapList
		Expect(env.Client.List(context.Background(), &cms, client.InNamespace(ns))).To(Succeed())
		apply(fmt.Sprintf("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: configmaps, namespace: %s}\nspec: {hard: {count/configmaps: \"%d\"}}\n", ns, len(cms.Items)))
		// The quota is in force once it refuses a ConfigMap.
		Eventually(func() int {
			return env.Kubectl(configMap(ns, "probe", map[string]string{"a": "b"}, nil), "create", "--dry-run=server", "-f", "-").ExitCode
		}, 15*time.Second).Should(Equal(1))

		apply(cm("debug"))
		Eventually(func() []string { return eventsFor(ns, "web", "ConfigRevisionBlocked") }, 15*time.Second).Should(ContainElement(
			ContainSubstring("ConfigMap/cfg changed, but a snapshot of the new config could not be written (a ResourceQuota refused snapshot")))
		Consistently(stateOf("Deployment", ns, "web"), settle).Should(Equal(before), "not rolled onto a revision without its snapshot")
		Expect(valuesOf(readsOf(ns, "web", "level")())).To(ConsistOf("info"))

		By("with room again, the revision is written and rolled out")
		Expect(env.Kubectl("", "delete", "resourcequota", "configmaps", "-n", ns).ExitCode).To(Equal(0))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("debug"))
	})

	It("writes no second snapshot of one content across a controller restart, and refuses a pod whose snapshot is not written", func() {
		ns := revisionsNamespace("restart", "enabled: true")
		cm := func(level string) string { return configMap(ns, "cfg", map[string]string{"level": level}, nil) }
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"cfg": nil}, replicatedDeployment(ns, "web", "cfg", 1))
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("info"))
		restartController(suiteController, func() {
			var web appsv1.Deployment
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &web)).To(Succeed())
			old := web.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
			apply(cm("debug"))
			By("while the controller is down, a pod naming the snapshot of the new content waits for it")
			var snaps string
			Eventually(func() string {
				d := decode(replicatedDeployment(ns, "probe", "cfg", 1))
				Expect(env.Client.Create(context.Background(), d, client.DryRunAll)).To(Succeed())
				snaps = d.(*appsv1.Deployment).Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
				return snaps
			}, 15*time.Second).ShouldNot(Equal(old), "the webhook names the new content's snapshot once it has seen it")
			Expect(snaps).To(HavePrefix("ConfigMap/cfg=cfg-"))
			// As a ReplicaSet creates it (a bare Pod names only snapshots
			// already written).
			pod := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: waits, namespace: %s, annotations: {configward.dev/config-snapshots: %q},\n"+
				"  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-1, uid: 6b8c2c1e-0000-4000-8000-000000000001, controller: true}]}\n"+
				"spec: {containers: [{name: app, image: app:1}], volumes: [{name: config, configMap: {name: cfg}}]}\n", ns, snaps)
			res := env.Kubectl(pod, "create", "--dry-run=server", "-f", "-")
			Expect(res.ExitCode).To(Equal(1))
			Expect(res.Stderr).To(ContainSubstring("[config-revision] snapshot " + strings.TrimPrefix(snaps, "ConfigMap/cfg=") + " of ConfigMap " + ns + "/cfg is not written yet"))
		})
		Eventually(func() []string { return valuesOf(readsOf(ns, "web", "level")()) }, rolloutTimeout).Should(ConsistOf("debug"))
		Consistently(snapshotsOf(ns, "cfg", "level"), settle).Should(HaveLen(2), "one snapshot per content")
	})

	It("writes one snapshot for a ConfigMap 1,000 Deployments share, and patches each Deployment once", func() {
		const workloads = 1000
		ns := revisionsNamespace("thousand", "enabled: true")
		cm := func(level string) string { return configMap(ns, "shared", map[string]string{"level": level}, nil) }
		// No replicas: what is measured is configward's writes, not pods.
		// Created through the API eight at a time (kubectl would take one
		// at a time), once the webhook has the ConfigMap.
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"shared": nil}, replicatedDeployment(ns, "web-0000", "shared", 0))
		var created errgroup.Group
		created.SetLimit(8)
		for i := 1; i < workloads; i++ {
			created.Go(func() error {
				return env.Client.Create(context.Background(), decode(replicatedDeployment(ns, fmt.Sprintf("web-%04d", i), "shared", 0)))
			})
		}
		Expect(created.Wait()).To(Succeed())
		Eventually(snapshotsOf(ns, "shared", "level"), 60*time.Second).Should(HaveLen(1))
		apply(cm("debug"))
		Eventually(func() int {
			var list appsv1.DeploymentList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			snaps, stale := snapshotsOf(ns, "shared", "level")(), 0
			for _, d := range list.Items {
				_, snap, _ := strings.Cut(d.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation], "=")
				if snaps[snap] != "debug" {
					stale++
				}
			}
			return stale
		}, 5*time.Minute, 2*time.Second).Should(BeZero())
		Expect(snapshotsOf(ns, "shared", "level")()).To(HaveLen(2), "one snapshot of the new content, however many read it")
		generations := func() map[int64]int {
			var list appsv1.DeploymentList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			out := map[int64]int{}
			for _, d := range list.Items {
				out[d.Generation]++
			}
			return out
		}
		Consistently(generations, settle).Should(Equal(map[int64]int{2: workloads}), "each template changed once: created, then rolled")
		Eventually(controllerPatches(ns, "deployments"), 30*time.Second).Should(Equal(workloads), controllerWriteLog(ns, "deployments"))
		Expect(controllerPatches(ns, "configmaps")()).To(Equal(2), controllerWriteLog(ns, "configmaps"))
		Expect(controllerWriteLog(ns, "configmaps")()).To(HavePrefix("2 writes"), "no snapshot create was tried twice")
	})

	It("re-stamps nothing when revisions are turned on, and says so for every pod that starts unpinned while the Pod path is unreachable", func() {
		ns := rolloutNamespace()
		cm := func(level string) string { return configMap(ns, "cfg", map[string]string{"level": level}, nil) }
		applyWhenSeen(ns, []string{cm("info")}, map[string][]string{"cfg": nil}, replicatedDeployment(ns, "web", "cfg", 2))
		Eventually(runningPods(ns, "web"), rolloutTimeout).Should(Equal(2))
		before := stateOf("Deployment", ns, "web")()

		By("turning revisions on for the namespace")
		applyPolicy(policyYAML("revisions-late", "late", "revisions: {enabled: true}"))
		Expect(env.Kubectl("", "label", "namespace", ns, policyLabel+"=late").ExitCode).To(Equal(0))
		Consistently(stateOf("Deployment", ns, "web"), settle).Should(Equal(before), "turning revisions on re-stamps nothing")
		Expect(readsOf(ns, "web", "level")()).To(Equal([]string{"cfg=info", "cfg=info"}))

		By("the Pod path unreachable (it fails open) while a config change rolls the Deployment onto its first revision")
		restore := withoutWebhook("pod-config.configward.dev")
		apply(cm("debug"))
		Eventually(stateOf("Deployment", ns, "web"), 30*time.Second).Should(HaveField("Generation", before.Generation+1))
		Eventually(readsOf(ns, "web", "level"), rolloutTimeout).Should(Equal([]string{"cfg=debug", "cfg=debug"}), "the pods start, on the original's bytes")
		Eventually(func() int {
			var list eventsv1.EventList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			n := 0
			for _, e := range list.Items {
				if e.Reason == "ConfigRevisionNotPinned" && strings.Contains(e.Note, "created while configward's Pod path was not reachable") {
					n++
				}
			}
			return n
		}, 30*time.Second).Should(BeNumerically(">=", 2))
		restore()
		By("with the Pod path back, the next pods are pinned")
		Expect(env.Kubectl("", "rollout", "restart", "deployment/web", "-n", ns).ExitCode).To(Equal(0))
		Eventually(readsOf(ns, "web", "level"), rolloutTimeout).Should(HaveEach(MatchRegexp(`^cfg-[0-9a-f]{10}=debug$`)))
	})

	It("refuses a ConfigPolicy whose revisions cannot work", func() {
		res := env.Kubectl(policyYAML("revisions-invalid", "nowhere", "rollouts: {disabled: true, excludeSecrets: true}\nrevisions: {enabled: true, secrets: true}"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring("spec.revisions.enabled: Invalid value: true: revisions need rollouts"))
		Expect(res.Stderr).To(ContainSubstring("spec.revisions.secrets: Invalid value: true: Secret snapshots need Secrets in the config hash"))
	})
})
