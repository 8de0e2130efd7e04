package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

// These specs follow a config change all the way to running pods: the
// deployment, replicaset, statefulset, daemonset, job and cronjob
// controllers of kube-controller-manager do the rolling, kube-scheduler
// places the pods and kwok runs them.

// rolloutTimeout bounds a whole rollout on kwok nodes (seconds of work).
const rolloutTimeout = 90 * time.Second

// replicatedDeployment is a Deployment of replicas pods mounting ConfigMap
// cm as a directory.
func replicatedDeployment(ns, name, cm string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: %[4]d
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts: [{name: config, mountPath: /etc/app}]
      volumes: [{name: config, configMap: {name: %[3]s}}]
`, ns, name, cm, replicas)
}

// applyWhenSeen applies ConfigMaps, waits until the mutating webhook's
// cache holds them (a server-side dry run of the first workload gets the
// hash they give), then applies the workloads. Applied together, a
// workload may be stamped before the webhook has seen its config and be
// re-stamped a moment later: a second ReplicaSet that specs counting
// ReplicaSets must not see.
func applyWhenSeen(ns string, configMaps []string, consumed map[string][]string, workloads ...string) string {
	apply(configMaps...)
	want := awaitConfigSeen(ns, consumed, workloads[0])
	apply(workloads...)
	return want
}

// awaitConfigSeen waits until a server-side dry-run create of probe, a
// built-in workload reading consumed, is stamped with the hash of their
// stored content: the webhook's cache has seen them. It stores nothing.
func awaitConfigSeen(ns string, consumed map[string][]string, probe string) string {
	want := expectedHash(ns, consumed)
	Eventually(func() string {
		obj := decode(probe)
		if err := env.Client.Create(context.Background(), obj, &client.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return err.Error()
		}
		w, _ := workload.Builtin().For(obj)
		h, _ := w.ConfigHash()
		return h
	}, 15*time.Second, 100*time.Millisecond).Should(Equal(want))
	return want
}

// rsState is what matters of a ReplicaSet for a rollout: its config hash
// and how many pods it wants.
type rsState struct {
	Name     string
	Hash     string
	Replicas int32
}

// replicaSetsOf lists the ReplicaSets a Deployment owns, oldest first.
func replicaSetsOf(ns, deployment string) []appsv1.ReplicaSet {
	var list appsv1.ReplicaSetList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" && ref.Name == deployment {
			out = append(out, rs)
		}
	}
	slices.SortFunc(out, func(a, b appsv1.ReplicaSet) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return out
}

func replicaSetStates(ns, deployment string) func() []rsState {
	return func() []rsState {
		var out []rsState
		for _, rs := range replicaSetsOf(ns, deployment) {
			out = append(out, rsState{Name: rs.Name, Hash: rs.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation], Replicas: *rs.Spec.Replicas})
		}
		return out
	}
}

// podHashes counts the pods labelled app=<app> by the config hash they
// started with; pods being deleted count too, until kwok has removed them.
func podHashes(ns, app string) func() map[string]int {
	return func() map[string]int {
		var list corev1.PodList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		out := map[string]int{}
		for _, p := range list.Items {
			out[p.Annotations[v1alpha1.ConfigHashAnnotation]]++
		}
		return out
	}
}

// runningPods counts the pods labelled app=<app> that kwok runs (Running
// and Ready).
func runningPods(ns, app string) func() int {
	return func() int {
		var list corev1.PodList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		n := 0
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					n++
				}
			}
		}
		return n
	}
}

// rolloutStatus is `kubectl rollout status`, which must report success.
// Call it once the workload's template is the one to wait for: it reports
// on the template the workload controller has observed.
func rolloutStatus(ns, kindName string) {
	res := env.Kubectl("", "rollout", "status", kindName, "-n", ns, fmt.Sprintf("--timeout=%s", rolloutTimeout))
	Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr)
	Expect(res.Stdout).To(Or(ContainSubstring("successfully rolled out"), ContainSubstring("rolling update complete")))
}

// controllerPatches counts the writes configward's controller made to a
// resource in a namespace, from the API server's audit log: those the API
// server answered with success (a write refused or timed out changed
// nothing; controllerWriteLog shows them). Dry runs, the controller's
// trial writes, store nothing and are not counted.
func controllerPatches(ns, resource string) func() int {
	return func() int {
		events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Namespace == ns &&
				ev.ObjectRef.Resource == resource && ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" &&
				!ev.DryRun() && ev.ResponseStatus.Code >= 200 && ev.ResponseStatus.Code < 300
		})
		Expect(err).NotTo(HaveOccurred())
		return len(events)
	}
}

// restartController stops the suite's controller, runs f while it is down,
// and starts it again with o.
func restartController(o manager.Controller, f func()) {
	Expect(stopController()).To(Succeed())
	f()
	var err error
	stopController, err = env.StartController(o)
	Expect(err).NotTo(HaveOccurred())
}

// controllerWriteLog describes the objects of a resource in a namespace
// that configward's controller wrote, or tried to write, more than once,
// with each write's verb and response code, so that a failed count says
// which writes it saw.
func controllerWriteLog(ns, resource string) func() string {
	return func() string {
		events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Namespace == ns &&
				ev.ObjectRef.Resource == resource && ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" && !ev.DryRun()
		})
		if err != nil {
			return err.Error()
		}
		byName := map[string][]string{}
		for _, ev := range events {
			byName[ev.ObjectRef.Name] = append(byName[ev.ObjectRef.Name], fmt.Sprintf("%s/%s %d", ev.Verb, ev.ObjectRef.Subresource, ev.ResponseStatus.Code))
		}
		var out []string
		for name, writes := range byName {
			if len(writes) > 1 {
				out = append(out, fmt.Sprintf("%s: %s", name, strings.Join(writes, ", ")))
			}
		}
		slices.Sort(out)
		return fmt.Sprintf("%d writes to %d objects; written more than once: %v", len(events), len(byName), out)
	}
}

// eventTimes lists when the rollout controller recorded reason on the
// objects of a namespace, oldest first.
func eventTimes(ns, reason string) []time.Time {
	var list eventsv1.EventList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []time.Time
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e.EventTime.Time)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

var _ = Describe("rollouts on a whole cluster", func() {
	It("replaces every pod of a Deployment once when its ConfigMap changes, through one new ReplicaSet", func() {
		ns := rolloutNamespace()
		first := applyWhenSeen(ns, []string{configMap(ns, "web-config", map[string]string{"app.yaml": "level: info"}, nil)},
			map[string][]string{"web-config": nil}, replicatedDeployment(ns, "web", "web-config", 3))
		rolloutStatus(ns, "deployment/web")
		Eventually(podHashes(ns, "web"), rolloutTimeout).Should(Equal(map[string]int{first: 3}))
		Expect(replicaSetStates(ns, "web")()).To(ConsistOf(HaveField("Hash", first)))
		oldRS := replicaSetsOf(ns, "web")[0]

		apply(configMap(ns, "web-config", map[string]string{"app.yaml": "level: debug"}, nil))
		second := expectedHash(ns, map[string][]string{"web-config": nil})
		Expect(second).NotTo(Equal(first))
		Eventually(stateOf("Deployment", ns, "web"), 15*time.Second).Should(HaveField("Hash", second))
		rolloutStatus(ns, "deployment/web")

		By("every pod runs the new config, and no old pod is left")
		Eventually(podHashes(ns, "web"), rolloutTimeout).Should(Equal(map[string]int{second: 3}))
		Eventually(runningPods(ns, "web"), rolloutTimeout).Should(Equal(3))
		By("exactly one new ReplicaSet, and the old one's template untouched")
		Eventually(replicaSetStates(ns, "web"), rolloutTimeout).Should(Equal([]rsState{
			{Name: oldRS.Name, Hash: first, Replicas: 0},
			{Name: replicaSetsOf(ns, "web")[1].Name, Hash: second, Replicas: 3},
		}))
		Consistently(replicaSetStates(ns, "web"), settle).Should(HaveLen(2))
		Expect(controllerPatches(ns, "deployments")()).To(Equal(1))
		Expect(controllerPatches(ns, "replicasets")()).To(Equal(0))
		var now appsv1.ReplicaSet
		Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(&oldRS), &now)).To(Succeed())
		Expect(now.Spec.Template).To(Equal(oldRS.Spec.Template), "the old ReplicaSet's template must never be patched")
	})

	It("makes one new ReplicaSet per real change: two quick edits batch into one, three ConfigMaps changed together give one", func() {
		ns := rolloutNamespace()
		spec := `containers:
- name: app
  image: registry.example/app:1
  envFrom: [{configMapRef: {name: one}}, {configMapRef: {name: two}}]
  volumeMounts: [{name: three, mountPath: /etc/three}]
volumes: [{name: three, configMap: {name: three}}]
`
		cms := func(v1, v2, v3 string) []string {
			return []string{
				configMap(ns, "one", map[string]string{"k": v1}, nil),
				configMap(ns, "two", map[string]string{"k": v2}, nil),
				configMap(ns, "three", map[string]string{"k": v3}, nil),
			}
		}
		all := map[string][]string{"one": nil, "two": nil, "three": nil}
		applyWhenSeen(ns, cms("a", "a", "a"), all, strings.Replace(deployment(ns, "multi", "", spec), "spec:\n  selector", "spec:\n  replicas: 2\n  selector", 1))
		rolloutStatus(ns, "deployment/multi")
		Expect(replicaSetStates(ns, "multi")()).To(HaveLen(1))

		By("two edits in quick succession, inside one batch window")
		// Through the API, milliseconds apart: two kubectl processes one
		// after the other can be more than the 1 s window apart on a
		// loaded machine, which is two changes, rightly rolled twice.
		for _, name := range []string{"one", "two"} {
			var cm corev1.ConfigMap
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
			cm.Data["k"] = "b"
			Expect(env.Client.Update(context.Background(), &cm)).To(Succeed())
		}
		second := expectedHash(ns, all)
		Eventually(stateOf("Deployment", ns, "multi"), 15*time.Second).Should(HaveField("Hash", second))
		rolloutStatus(ns, "deployment/multi")
		Eventually(podHashes(ns, "multi"), rolloutTimeout).Should(Equal(map[string]int{second: 2}))
		Consistently(replicaSetStates(ns, "multi"), settle).Should(HaveLen(2))

		By("three ConfigMaps changed together, as one apply does")
		// At once, through the API: one kubectl apply writes its objects
		// one after the other, each through the webhooks, and on a loaded
		// machine the three writes can span more than the 1 s window (CI
		// saw the third land after the first two were rolled), which is
		// two changes, rightly rolled twice.
		var wg sync.WaitGroup
		for _, name := range []string{"one", "two", "three"} {
			wg.Go(func() {
				defer GinkgoRecover()
				var cm corev1.ConfigMap
				Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
				cm.Data["k"] = "c"
				Expect(env.Client.Update(context.Background(), &cm)).To(Succeed())
			})
		}
		wg.Wait()
		third := expectedHash(ns, all)
		Eventually(stateOf("Deployment", ns, "multi"), 15*time.Second).Should(HaveField("Hash", third))
		rolloutStatus(ns, "deployment/multi")
		Eventually(podHashes(ns, "multi"), rolloutTimeout).Should(Equal(map[string]int{third: 2}))
		Consistently(replicaSetStates(ns, "multi"), settle).Should(HaveLen(3))

		By("applying the same content with kubectl changes nothing")
		apply(cms("c", "c", "c")...)
		Consistently(replicaSetStates(ns, "multi"), settle).Should(HaveLen(3))
	})

	It("replaces the pods of RollingUpdate StatefulSets and DaemonSets, and says so when OnDelete will not", func() {
		ns := rolloutNamespace()
		set := func(kind, name, strategy string) string {
			extra := ""
			if kind == "StatefulSet" {
				extra = "  serviceName: " + name + "\n  replicas: 2\n"
			}
			return fmt.Sprintf(`apiVersion: apps/v1
kind: %[1]s
metadata: {name: %[2]s, namespace: %[3]s}
spec:
%[4]s  updateStrategy: {type: %[5]s}
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts: [{name: config, mountPath: /etc/app}]
      volumes: [{name: config, configMap: {name: shared}}]
`, kind, name, ns, extra, strategy)
		}
		first := applyWhenSeen(ns, []string{configMap(ns, "shared", map[string]string{"k": "1"}, nil)}, map[string][]string{"shared": nil},
			set("StatefulSet", "db", "RollingUpdate"), set("DaemonSet", "agent", "RollingUpdate"),
			set("StatefulSet", "db-manual", "OnDelete"), set("DaemonSet", "agent-manual", "OnDelete"))
		want := map[string]int{"db": 2, "agent": kwokNodes, "db-manual": 2, "agent-manual": kwokNodes}
		for app, n := range want {
			Eventually(podHashes(ns, app), rolloutTimeout).Should(Equal(map[string]int{first: n}), app)
			Eventually(runningPods(ns, app), rolloutTimeout).Should(Equal(n), app)
		}

		apply(configMap(ns, "shared", map[string]string{"k": "2"}, nil))
		second := expectedHash(ns, map[string][]string{"shared": nil})
		Eventually(stateOf("StatefulSet", ns, "db"), 15*time.Second).Should(HaveField("Hash", second))
		Eventually(stateOf("DaemonSet", ns, "agent"), 15*time.Second).Should(HaveField("Hash", second))
		rolloutStatus(ns, "statefulset/db")
		rolloutStatus(ns, "daemonset/agent")
		Eventually(podHashes(ns, "db"), rolloutTimeout).Should(Equal(map[string]int{second: 2}))
		Eventually(podHashes(ns, "agent"), rolloutTimeout).Should(Equal(map[string]int{second: kwokNodes}))
		Eventually(func() []string { return eventsFor(ns, "db", "ConfigChanged") }, 10*time.Second).Should(ConsistOf(ContainSubstring("which rolls the pods")))

		By("OnDelete: the template gets the new hash, no pod is replaced, and the Event says why")
		for _, kn := range [][2]string{{"StatefulSet", "db-manual"}, {"DaemonSet", "agent-manual"}} {
			Eventually(stateOf(kn[0], ns, kn[1]), 15*time.Second).Should(HaveField("Hash", second), kn[0])
			Eventually(func() []string { return eventsFor(ns, kn[1], "ConfigChangedNotRolled") }, 10*time.Second).Should(ConsistOf(
				"ConfigMap/shared changed: updated configward.dev/config-hash to " + second +
					", but its updateStrategy is OnDelete: running pods keep the old config until each pod is deleted"))
			Expect(eventsFor(ns, kn[1], "ConfigChanged")).To(BeEmpty())
		}
		Consistently(podHashes(ns, "db-manual"), settle).Should(Equal(map[string]int{first: 2}))
		Expect(podHashes(ns, "agent-manual")()).To(Equal(map[string]int{first: kwokNodes}))
		Expect(counter("configward_rollouts_skipped_total", map[string]string{"kind": "StatefulSet", "reason": "on-delete"})).To(BeNumerically(">=", 1))
	})

	It("gives a CronJob's next Job the new config and leaves its existing Jobs alone, without Events on them", func() {
		ns := rolloutNamespace()
		secret := func(v string) string {
			return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: %s}\nstringData: {password: %q}\n", ns, v)
		}
		apply(secret("one"))
		apply(fmt.Sprintf(`apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: %s}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {app: nightly}}
        spec:
          restartPolicy: OnFailure
          containers:
          - name: app
            image: registry.example/app:1
            volumeMounts: [{name: creds, mountPath: /etc/creds}]
          volumes: [{name: creds, secret: {secretName: creds}}]
`, ns))
		Eventually(stateOf("CronJob", ns, "nightly"), 15*time.Second).Should(HaveField("Hash", HavePrefix("hmac-sha256:")))
		first := stateOf("CronJob", ns, "nightly")().Hash
		Expect(env.Kubectl("", "create", "job", "before", "--from=cronjob/nightly", "-n", ns).ExitCode).To(Equal(0))
		Eventually(func() int32 {
			var j batchv1.Job
			_ = env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "before"}, &j)
			return j.Status.Succeeded
		}, rolloutTimeout).Should(Equal(int32(1)), "kwok completes the Job's pod")
		before := stateOf("Job", ns, "before")()

		apply(secret("two"))
		Eventually(stateOf("CronJob", ns, "nightly"), 15*time.Second).Should(HaveField("Hash", Not(Equal(first))))
		second := stateOf("CronJob", ns, "nightly")().Hash
		Eventually(func() []string { return eventsFor(ns, "nightly", "ConfigChanged") }, 10*time.Second).Should(ConsistOf(ContainSubstring("which the next Job it starts uses")))

		Expect(env.Kubectl("", "create", "job", "after", "--from=cronjob/nightly", "-n", ns).ExitCode).To(Equal(0))
		Expect(stateOf("Job", ns, "after")()).To(HaveField("Hash", second))
		Consistently(stateOf("Job", ns, "before"), settle).Should(Equal(before))
		Expect(eventsFor(ns, "before", "ConfigChangedNotRolled")).To(BeEmpty(), "a Job its CronJob owns is not told about config changes")
		Eventually(podHashes(ns, "nightly"), rolloutTimeout).Should(Equal(map[string]int{first: 1, second: 1}))
	})

	It("leaves a paused Deployment's pods alone and says so, then rolls it once when resumed", func() {
		ns := rolloutNamespace()
		first := applyWhenSeen(ns, []string{configMap(ns, "cfg", map[string]string{"k": "1"}, nil)}, map[string][]string{"cfg": nil},
			strings.Replace(replicatedDeployment(ns, "paused", "cfg", 2), "  replicas: 2\n", "  replicas: 2\n  strategy: {type: Recreate}\n", 1))
		rolloutStatus(ns, "deployment/paused")
		Expect(env.Kubectl("", "rollout", "pause", "deployment/paused", "-n", ns).ExitCode).To(Equal(0))

		apply(configMap(ns, "cfg", map[string]string{"k": "2"}, nil))
		second := expectedHash(ns, map[string][]string{"cfg": nil})
		Eventually(func() []string { return eventsFor(ns, "paused", "ConfigChangedNotRolled") }, 15*time.Second).Should(ConsistOf(
			"ConfigMap/cfg changed: updated configward.dev/config-hash to " + second +
				", but the Deployment is paused: running pods keep the old config until it is resumed (kubectl rollout resume)"))
		Consistently(replicaSetStates(ns, "paused"), settle).Should(HaveLen(1))
		Expect(podHashes(ns, "paused")()).To(Equal(map[string]int{first: 2}))

		Expect(env.Kubectl("", "rollout", "resume", "deployment/paused", "-n", ns).ExitCode).To(Equal(0))
		rolloutStatus(ns, "deployment/paused")
		Eventually(podHashes(ns, "paused"), rolloutTimeout).Should(Equal(map[string]int{second: 2}))
		Consistently(replicaSetStates(ns, "paused"), settle).Should(HaveLen(2))
	})

	It("keeps the current config through kubectl rollout undo and rollout restart", func() {
		ns := rolloutNamespace()
		applyWhenSeen(ns, []string{configMap(ns, "cfg", map[string]string{"k": "1"}, nil)}, map[string][]string{"cfg": nil}, replicatedDeployment(ns, "svc", "cfg", 2))
		rolloutStatus(ns, "deployment/svc")
		apply(configMap(ns, "cfg", map[string]string{"k": "2"}, nil))
		current := expectedHash(ns, map[string][]string{"cfg": nil})
		Eventually(stateOf("Deployment", ns, "svc"), 15*time.Second).Should(HaveField("Hash", current))
		rolloutStatus(ns, "deployment/svc")
		Expect(replicaSetStates(ns, "svc")()).To(HaveLen(2))

		By("undo copies the first revision's template, config hash included; configward puts the current hash back and says why")
		res := env.Kubectl("", "rollout", "undo", "deployment/svc", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(strings.Split(res.Stderr, "\n")).To(ContainElement(fmt.Sprintf("Warning: [config-hash] Deployment %s/svc: the config hash was reset to the current config's. "+
			"A rollback does not bring back old ConfigMap or Secret content; change the config itself to go back.", ns)), res.Stderr)
		Consistently(stateOf("Deployment", ns, "svc"), settle).Should(HaveField("Hash", current))
		Expect(replicaSetStates(ns, "svc")()).To(HaveLen(2))
		Expect(podHashes(ns, "svc")()).To(Equal(map[string]int{current: 2}))

		By("restart replaces the pods with the same, current config")
		Expect(env.Kubectl("", "rollout", "restart", "deployment/svc", "-n", ns).ExitCode).To(Equal(0))
		rolloutStatus(ns, "deployment/svc")
		Eventually(replicaSetStates(ns, "svc"), rolloutTimeout).Should(HaveLen(3))
		Eventually(podHashes(ns, "svc"), rolloutTimeout).Should(Equal(map[string]int{current: 2}))
		Expect(replicaSetsOf(ns, "svc")[2].Spec.Template.Annotations).To(HaveKeyWithValue(v1alpha1.ConfigHashAnnotation, current))
	})

	It("patches nothing when the controller restarts, and rolls each workload once for a change made while it was down", func() {
		ns := rolloutNamespace()
		const n = 50
		var workloads []string
		for i := range n {
			workloads = append(workloads, replicatedDeployment(ns, fmt.Sprintf("w%02d", i), "shared", 1))
		}
		first := applyWhenSeen(ns, []string{configMap(ns, "shared", map[string]string{"k": "1"}, nil)}, map[string][]string{"shared": nil}, workloads...)
		all := func() map[templateState]int {
			out := map[templateState]int{}
			for i := range n {
				out[stateOf("Deployment", ns, fmt.Sprintf("w%02d", i))()]++
			}
			return out
		}
		Expect(all()).To(Equal(map[templateState]int{{Generation: 1, Hash: first}: n}))

		By("a restart with nothing changed")
		restartController(suiteController, func() {})
		Consistently(all, settle).Should(Equal(map[templateState]int{{Generation: 1, Hash: first}: n}))
		Expect(controllerPatches(ns, "deployments")()).To(Equal(0))

		By("a change made while the controller is down")
		restartController(suiteController, func() {
			apply(configMap(ns, "shared", map[string]string{"k": "2"}, nil))
			Consistently(all, 2*time.Second).Should(Equal(map[templateState]int{{Generation: 1, Hash: first}: n}))
		})
		second := expectedHash(ns, map[string][]string{"shared": nil})
		rolled := map[templateState]int{{Generation: 2, Hash: second}: n}
		Eventually(all, 30*time.Second).Should(Equal(rolled))
		Consistently(all, settle).Should(Equal(rolled))
		Expect(controllerPatches(ns, "deployments")()).To(Equal(n))
		Expect(controllerPatches(ns, "replicasets")()).To(Equal(0))
	})

	It("paces rollouts at --rollout-rate, rolling each workload exactly once", func() {
		ns := rolloutNamespace()
		const n, perSecond = 12, 3.0
		var workloads []string
		for i := range n {
			workloads = append(workloads, replicatedDeployment(ns, fmt.Sprintf("f%02d", i), "fleet", 0))
		}
		applyWhenSeen(ns, []string{configMap(ns, "fleet", map[string]string{"k": "1"}, nil)}, map[string][]string{"fleet": nil}, workloads...)
		paced := suiteController
		paced.RolloutRate = perSecond
		restartController(paced, func() {})
		DeferCleanup(func() { restartController(suiteController, func() {}) })

		apply(configMap(ns, "fleet", map[string]string{"k": "2"}, nil))
		want := expectedHash(ns, map[string][]string{"fleet": nil})
		for i := range n {
			Eventually(stateOf("Deployment", ns, fmt.Sprintf("f%02d", i)), 30*time.Second).Should(Equal(templateState{Generation: 2, Hash: want}))
		}
		// Events are written in the background after each patch: the last
		// may land a moment after its template is seen stamped.
		var times []time.Time
		Eventually(func() []time.Time { times = eventTimes(ns, "ConfigChanged"); return times }, 10*time.Second, 100*time.Millisecond).Should(HaveLen(n))
		Expect(controllerPatches(ns, "deployments")()).To(Equal(n))
		// A burst of perSecond, then one every 1/perSecond seconds: the
		// last of n starts no sooner than (n-burst)/rate after the first.
		// Event times are recorded to the microsecond; allow 10%.
		spread := times[n-1].Sub(times[0])
		Expect(spread).To(BeNumerically(">=", time.Duration(float64(n-int(perSecond))/perSecond*0.9*float64(time.Second))), "rollouts were not paced: %v", times)
	})
})
