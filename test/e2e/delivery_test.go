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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// These specs deliver a change of one ConfigMap to ten Deployments in
// waves, on the whole cluster: kube-controller-manager rolls each
// Deployment, kwok runs the pods, and failingApp plays an application that
// does not start on bad config.

// deliveryNamespace returns a namespace with revisions and the delivery
// settings given (YAML under spec.delivery; more are further lines of the
// policy's spec), and one ConfigMap "cfg"
// holding level=info read by ten Deployments (one labelled for the canary
// wave), rolled out on it.
func deliveryNamespace(tag, settings string, more ...string) string {
	ns := newNamespace("delivery", map[string]string{policyLabel: tag})
	applyPolicy(policyYAML("delivery-"+tag, tag, strings.Join(append([]string{"revisions: {enabled: true}\ndelivery:\n" + indent(settings, 2)}, more...), "\n")))
	Eventually(policyReady("delivery-"+tag), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
	var deployments []string
	for i := range 10 {
		deployments = append(deployments, waveDeployment(ns, fmt.Sprintf("app-%d", i), i == 7, "cfg"))
	}
	applyWhenSeen(ns, []string{configMap(ns, "cfg", map[string]string{"level": "info"}, nil)}, map[string][]string{"cfg": nil}, deployments...)
	for i := range 10 {
		rolloutStatus(ns, fmt.Sprintf("deployment/app-%d", i))
	}
	return ns
}

// waveDeployment is a one-pod Deployment mounting the ConfigMaps cms, in
// the canary wave when canary.
func waveDeployment(ns, name string, canary bool, cms ...string) string {
	labels := ""
	if canary {
		labels = "\n  labels: {configward.dev/wave: canary}"
	}
	var volumes, mounts string
	for i, cm := range cms {
		volumes += fmt.Sprintf("\n      - {name: c%d, configMap: {name: %s}}", i, cm)
		mounts += fmt.Sprintf("\n        - {name: c%d, mountPath: /etc/%s}", i, cm)
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s%[3]s
spec:
  replicas: 1
  # A pod counts as available once ready for 3 s: failingApp turns a pod
  # on bad config unready well within that, so it never is.
  minReadySeconds: 3
  progressDeadlineSeconds: 600
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        volumeMounts:%[5]s
      volumes:%[4]s
`, ns, name, labels, volumes, mounts)
}

const threeWaves = `waves:
- name: canary
  selector: {matchLabels: {configward.dev/wave: canary}}
- name: early
  percent: 30
- name: rest
progressDeadlineSeconds: %d
soakSeconds: %d
onFailure: %s
`

// failingApp plays the application in ns: a pod whose ConfigMap (the
// snapshot its revision reads) holds level=broken turns unready once kwok
// has started it, as an app that does not come up on bad config; with
// crashes, its container also counts a restart, as one that crashes on
// it. It stops with the spec.
func failingApp(ns string, crashes bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		for ctx.Err() == nil {
			var pods corev1.PodList
			if env.Client.List(ctx, &pods, client.InNamespace(ns)) == nil {
				for i := range pods.Items {
					breakIfBadConfig(ctx, &pods.Items[i], crashes)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	DeferCleanup(func() { cancel(); wg.Wait() })
}

func breakIfBadConfig(ctx context.Context, p *corev1.Pod, crashes bool) {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return
	}
	for _, v := range p.Spec.Volumes {
		var cm corev1.ConfigMap
		if v.ConfigMap == nil || env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: v.ConfigMap.Name}, &cm) != nil || cm.Data["level"] != "broken" {
			continue
		}
		for i, c := range p.Status.Conditions {
			if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status == corev1.ConditionTrue {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
				p.Status.Conditions[i].Reason = "BadConfig"
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = false
			if crashes && p.Status.ContainerStatuses[i].RestartCount == 0 {
				p.Status.ContainerStatuses[i].RestartCount = 1
			}
		}
		_ = env.Client.Status().Update(ctx, p)
		return
	}
}

// deliveries lists the ConfigDeliveries of ConfigMap cm in ns, oldest
// first.
func deliveries(ns, cm string) []v1alpha1.ConfigDelivery {
	var list v1alpha1.ConfigDeliveryList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []v1alpha1.ConfigDelivery
	for _, d := range list.Items {
		if d.Spec.Config.Name == cm {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.ConfigDelivery) int { return int(a.Spec.Sequence - b.Spec.Sequence) })
	return out
}

// latestDelivery is the state of the newest delivery of cm in ns, with its
// reason and current wave ("State/Reason@wave").
func latestDelivery(ns, cm string) func() string {
	return func() string {
		ds := deliveries(ns, cm)
		if len(ds) == 0 {
			return "none"
		}
		s := ds[len(ds)-1].Status
		return fmt.Sprintf("%s/%s@%s", s.State, s.Reason, s.CurrentWave)
	}
}

// deploymentPatches maps each Deployment of ns the controller patched to
// the times of its successful patches, from the audit log.
func deploymentPatches(ns string) map[string][]time.Time {
	events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Namespace == ns &&
			ev.ObjectRef.Resource == "deployments" && ev.Verb == "patch" &&
			ev.ResponseStatus.Code >= 200 && ev.ResponseStatus.Code < 300
	})
	Expect(err).NotTo(HaveOccurred())
	out := map[string][]time.Time{}
	for _, ev := range events {
		out[ev.ObjectRef.Name] = append(out[ev.ObjectRef.Name], ev.StageTimestamp.Time)
	}
	return out
}

// snapshotOfCfg is the snapshot of ConfigMap cfg a Deployment's template
// names.
func snapshotOfCfg(ns, name string) string {
	var d appsv1.Deployment
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return d.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
}

var _ = Describe("progressive config delivery", func() {
	It("rolls a good change wave by wave, each wave healthy and soaked before the next, each Deployment once", func() {
		ns := deliveryNamespace("good", fmt.Sprintf(threeWaves, 120, 3, "Halt"))
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 4*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		d := deliveries(ns, "cfg")
		Expect(d).To(HaveLen(1))
		waves := d[0].Status.Waves
		Expect(waves).To(HaveLen(3))
		var placed [][]string
		for _, w := range waves {
			var names []string
			for _, t := range w.Workloads {
				names = append(names, t.Name)
			}
			placed = append(placed, names)
		}
		Expect(placed).To(Equal([][]string{{"app-7"}, {"app-0", "app-1", "app-2"}, {"app-3", "app-4", "app-5", "app-6", "app-8", "app-9"}}),
			"canary by label, then 30%% of the nine left rounded up, in name order, then the rest")

		By("audit log: each Deployment patched once, none before the wave before it was healthy and soaked")
		Eventually(controllerPatches(ns, "deployments"), 30*time.Second).Should(Equal(10), controllerWriteLog(ns, "deployments"))
		patches := deploymentPatches(ns)
		for i, w := range waves {
			Expect(w.HealthySince).NotTo(BeNil())
			Expect(w.CompletedAt.Sub(w.HealthySince.Time)).To(BeNumerically(">=", 2*time.Second), "soaked")
			for _, t := range w.Workloads {
				Expect(patches[t.Name]).To(HaveLen(1), t.Name)
				at := patches[t.Name][0]
				Expect(at).To(BeTemporally(">=", w.StartedAt.Time.Add(-time.Second)), "%s patched after its wave started", t.Name)
				if i > 0 {
					prev := waves[i-1]
					// Record times are whole seconds; the soak ends at least
					// soakSeconds after the previous wave was healthy.
					Expect(at).To(BeTemporally(">=", prev.HealthySince.Time.Add(3*time.Second)), "%s patched before wave %s soaked", t.Name, prev.Name)
				}
			}
		}
		Expect(valuesOf(readsOf(ns, "app-3", "level")())).To(ConsistOf("debug"))
		Eventually(func() []string { return eventsFor(ns, "cfg", "DeliveryWaveStarted") }, 10*time.Second).Should(HaveLen(3))
		Eventually(reportOf(ns, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-3"}}), 30*time.Second).
			Should(And(ContainElement("config-current pass Deployment/app-3"), Not(ContainElement(HavePrefix("config-delivery")))),
				"a finished delivery leaves no result behind")
	})

	It("halts a bad change at the canary's deadline; the others are never patched and their new pods read the old bytes", func() {
		ns := deliveryNamespace("bad", fmt.Sprintf(threeWaves, 15, 1, "Halt"))
		failingApp(ns, false)
		apply(configMap(ns, "cfg", map[string]string{"level": "broken"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/ProgressDeadlineExceeded@canary"))
		Consistently(controllerPatches(ns, "deployments"), 5*time.Second).Should(Equal(1), controllerWriteLog(ns, "deployments"))
		Expect(deploymentPatches(ns)).To(HaveKey("app-7"))
		Eventually(func() []string { return eventsFor(ns, "cfg", "DeliveryHalted") }, 10*time.Second).Should(HaveLen(1))
		Eventually(func() []string { return eventsFor(ns, "app-7", "ConfigDeliveryHalted") }, 10*time.Second).Should(HaveLen(1))
		Eventually(reportOf(ns, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-7"}}), 30*time.Second).
			Should(ContainElement("config-delivery fail Deployment/app-7"))
		Eventually(reportOf(ns, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-2"}}), 30*time.Second).
			Should(ContainElement("config-delivery warn Deployment/app-2"))
		Expect(status("-n", ns)().Table).To(And(
			ContainSubstring("Deployment/app-7: ConfigMap/cfg: ConfigDelivery configmap-cfg-1, wave canary (1 of 3), Halted: wave canary not healthy 15s after it started"),
			ContainSubstring("Deployment/app-2: ConfigMap/cfg: ConfigDelivery configmap-cfg-1, wave early (2 of 3), keeps its revision until this wave starts; the delivery is Halted at wave canary")))

		By("a scale-up of a Deployment the delivery did not reach gets the old bytes")
		before := snapshotOfCfg(ns, "app-2")
		Expect(env.Kubectl("", "scale", "deployment/app-2", "-n", ns, "--replicas=2").ExitCode).To(Equal(0))
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-2", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info"))
		Expect(snapshotOfCfg(ns, "app-2")).To(Equal(before))

		By("an image bump of a Deployment whose wave has not come keeps its pinned config")
		Expect(env.Kubectl("", "set", "image", "deployment/app-3", "-n", ns, "app=registry.example/app:2").ExitCode).To(Equal(0))
		rolloutStatus(ns, "deployment/app-3")
		Expect(valuesOf(readsOf(ns, "app-3", "level")())).To(ConsistOf("info"))

		By("promote moves the halted delivery on by hand, recorded with who asked")
		res := env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/cfg")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "cfg"), rolloutTimeout, time.Second).Should(HaveSuffix("@early"))
		d := deliveries(ns, "cfg")
		Expect(d[0].Status.History).To(ContainElement(And(HaveField("What", "Promoted"), HaveField("By", Not(BeEmpty())))))
		Eventually(controllerPatches(ns, "deployments"), 30*time.Second).Should(Equal(4), controllerWriteLog(ns, "deployments"))

		By("the early wave fails too; resume judges it again with a new deadline")
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/ProgressDeadlineExceeded@early"))
		res = env.KubectlPlugin("delivery", "resume", "-n", ns, "configmap/cfg")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("Progressing/WaveStarted@early"))
		Expect(deliveries(ns, "cfg")[0].Status.History).To(ContainElement(And(HaveField("What", "Resumed"), HaveField("By", Not(BeEmpty())))))
		Expect(controllerPatches(ns, "deployments")()).To(Equal(4), "resuming re-stamps nothing that has the delivered revision")
	})

	It("fails the canary on restarts of its new pods and rolls it back to its old revision with onFailure: Rollback", func() {
		ns := deliveryNamespace("rollback", fmt.Sprintf(threeWaves, 120, 1, "Rollback"))
		failingApp(ns, true)
		before := snapshotOfCfg(ns, "app-7")
		apply(configMap(ns, "cfg", map[string]string{"level": "broken"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("Halted/WaveFailed@canary"))
		Expect(deliveries(ns, "cfg")[0].Status.Message).To(ContainSubstring("of the delivered revision restarted"))
		Eventually(func() string { return snapshotOfCfg(ns, "app-7") }, rolloutTimeout).Should(Equal(before))
		rolloutStatus(ns, "deployment/app-7")
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-7", "level")()) }, rolloutTimeout).Should(ConsistOf("info"))
		Expect(deliveries(ns, "cfg")[0].Status.RolledBack).To(BeTrue())
		Expect(controllerPatches(ns, "deployments")()).To(Equal(2), controllerWriteLog(ns, "deployments"))
	})

	It("waits for approval, survives a controller restart mid-wave, and a newer change supersedes an open delivery", func() {
		ns := deliveryNamespace("approve", `waves:
- name: canary
  selector: {matchLabels: {configward.dev/wave: canary}}
- name: rest
  approval: true
progressDeadlineSeconds: 120
soakSeconds: 1
`)
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Consistently(controllerPatches(ns, "deployments"), 3*time.Second).Should(Equal(1))

		By("a newer change supersedes it: the new delivery starts again at the canary")
		apply(configMap(ns, "cfg", map[string]string{"level": "trace"}, nil))
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 30*time.Second).Should(Equal(2))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Expect(deliveries(ns, "cfg")[0].Status.State).To(Equal(v1alpha1.DeliverySuperseded))

		By("promoted, the rest rolls; the controller restarts while it does")
		res := env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/cfg")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, 200*time.Millisecond).Should(Equal("Progressing/WaveStarted@rest"))
		restartController(suiteController, func() {})
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		for i := range 10 {
			Eventually(func() []string { return valuesOf(readsOf(ns, fmt.Sprintf("app-%d", i), "level")()) }, rolloutTimeout).Should(ConsistOf("trace"))
		}
		// The canary's template changed twice (debug, then trace), every
		// other Deployment's once: the restart re-stamped nothing. Counted
		// by generation: a patch in flight when the controller stops is
		// applied, but the API server, its client gone, logs it as failed.
		generations := func() map[string]int64 {
			var list appsv1.DeploymentList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			out := map[string]int64{}
			for _, d := range list.Items {
				out[d.Name] = d.Generation
			}
			return out
		}
		want := map[string]int64{}
		for i := range 10 {
			want[fmt.Sprintf("app-%d", i)] = 2
		}
		want["app-7"] = 3
		Eventually(generations, 30*time.Second).Should(Equal(want), controllerWriteLog(ns, "deployments"))
		Consistently(generations, 3*time.Second).Should(Equal(want), controllerWriteLog(ns, "deployments"))
	})

	It("lets workloads that cannot show health pass without blocking, and holds a workload created during the delivery for the last wave", func() {
		ns := deliveryNamespace("unverified", `waves:
- name: canary
  selector: {matchLabels: {configward.dev/wave: canary}}
- name: rest
  approval: true
soakSeconds: 1
`)
		Expect(env.Kubectl("", "rollout", "pause", "deployment/app-7", "-n", ns).ExitCode).To(Equal(0))
		old := snapshotOfCfg(ns, "app-0")
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Status.Waves[0].Health).To(ConsistOf(And(HaveField("Name", "app-7"), HaveField("State", "Unverified"),
			HaveField("Message", ContainSubstring("the Deployment is paused")))))
		Expect(d.Status.History).To(ContainElement(And(HaveField("What", "WaveHealthy"), HaveField("Message", ContainSubstring("passed without showing health")))))

		By("a Deployment created now is placed in the last wave: it starts on the revision the others run")
		apply(waveDeployment(ns, "late", false, "cfg"))
		rolloutStatus(ns, "deployment/late")
		Expect(snapshotOfCfg(ns, "late")).To(Equal(old))
		Expect(valuesOf(readsOf(ns, "late", "level")())).To(ConsistOf("info"))

		By("promoted, the last wave takes it to the new content with the others")
		Expect(env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/cfg").ExitCode).To(Equal(0))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "late", "level")()) }, rolloutTimeout).Should(ConsistOf("debug"))
	})

	It("delivers each of two ConfigMaps a workload reads, and refuses delivery without revisions", func() {
		ns := newNamespace("delivery", map[string]string{policyLabel: "two"})
		res := env.Kubectl(policyYAML("delivery-norev", "two", "delivery:\n  waves: [{name: all}]\n"), "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring(`spec.delivery: Invalid value: "waves": delivery needs revisions`))
		applyPolicy(policyYAML("delivery-two", "two", "revisions: {enabled: true}\ndelivery:\n  waves: [{name: canary, selector: {matchLabels: {configward.dev/wave: canary}}}, {name: rest}]\n  soakSeconds: 1\n"))
		Eventually(policyReady("delivery-two"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		applyWhenSeen(ns, []string{configMap(ns, "a", map[string]string{"level": "1"}, nil), configMap(ns, "b", map[string]string{"level": "1"}, nil)},
			map[string][]string{"a": nil, "b": nil}, waveDeployment(ns, "both", true, "a", "b"), waveDeployment(ns, "other", false, "a", "b"))
		rolloutStatus(ns, "deployment/both")
		rolloutStatus(ns, "deployment/other")
		apply(configMap(ns, "a", map[string]string{"level": "2"}, nil), configMap(ns, "b", map[string]string{"level": "2"}, nil))
		Eventually(latestDelivery(ns, "a"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		Eventually(latestDelivery(ns, "b"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		want := expectedHash(ns, map[string][]string{"a": nil, "b": nil})
		Eventually(stateOf("deployment", ns, "both"), rolloutTimeout).Should(HaveField("Hash", want))
		Eventually(stateOf("deployment", ns, "other"), rolloutTimeout).Should(HaveField("Hash", want))
	})

	It("lets only configward's controller write records, and records who asked from the API server", func() {
		ns := deliveryNamespace("attack", fmt.Sprintf(threeWaves, 120, 600, "Halt"))
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Progressing/"))
		name := deliveries(ns, "cfg")[0].Name
		forged := fmt.Sprintf(`apiVersion: configward.dev/v1alpha1
kind: ConfigDelivery
metadata: {name: forged, namespace: %s}
spec: {config: {kind: ConfigMap, name: cfg}, sequence: 9, policy: x, settings: {waves: [{name: all}]}}
`, ns)
		res := env.Kubectl(forged, "create", "-f", "-")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("only configward's controller creates ConfigDeliveries"))
		res = env.Kubectl("", "patch", "configdelivery", name, "-n", ns, "--type=merge", "-p", `{"spec":{"settings":{"soakSeconds":0}}}`)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("only spec.request may be changed"))
		res = env.Kubectl("", "patch", "configdelivery", name, "-n", ns, "--type=merge", "-p", `{"spec":{"request":{"action":"Halt","id":"x1","requestedBy":"someone-else"}}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		var d v1alpha1.ConfigDelivery
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		Expect(d.Spec.Request.RequestedBy).NotTo(Equal("someone-else"))
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second).Should(HavePrefix("Halted/HaltedByUser"))
	})
})
