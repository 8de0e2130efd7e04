package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

// realProgram is a program written outside this project, run unmodified
// (built from its module) under the reload agent in one of its modes,
// with the annotations docs/apps/hot-reload.md's recipes give.
type realProgram struct {
	// name is the Deployment, its app label, its container and its hot
	// ConfigMap.
	name     string
	image    string
	imageEnv string
	// recipe is its annotations and flags, as the docs give them.
	recipe framework.Recipe
	// config is the ConfigMap's data at version v ("v1", "v2"); bad is a
	// change the program rejects in its own way.
	config func(v string) map[string]string
	bad    map[string]string
	// The program runs on the ConfigMap mounted at mount, with env.
	mount string
	env   []corev1.EnvVar
	// runs is the version the program itself says it runs, read from this
	// machine at the pod's address ("" when it cannot be read).
	runs func(pod *corev1.Pod) string
	// rejects is what the canary's rejection says: the program's own words
	// where it answers with them.
	rejects string
}

// The programs' ports, as their recipes (framework.Recipes) have them.
const (
	prometheusPort   = 9090
	alertmanagerPort = 9093
	caddyPort        = 8080
)

var realPrograms = []realProgram{{
	// HTTP mode: Prometheus reloads when POSTed to, and answers once done.
	name: "prometheus", image: framework.PrometheusImage, imageEnv: framework.PrometheusImageEnv,
	recipe: framework.RecipeOf("prometheus"),
	config: func(v string) map[string]string {
		return map[string]string{
			"prometheus.yml": "global:\n  scrape_interval: 1m\n  external_labels:\n    configward_version: " + v + "\nrule_files:\n  - /etc/prometheus/rules.yml\n",
			"rules.yml":      "groups:\n  - name: configward\n    rules:\n      - alert: Version" + v + "\n        expr: vector(1) > 0\n",
		}
	},
	bad: map[string]string{
		"prometheus.yml": "global:\n  scrape_interval: 1m\n  external_labels:\n    configward_version: v3\nrule_files:\n  - /etc/prometheus/rules.yml\n",
		"rules.yml":      "groups:\n  - name: configward\n    rules:\n      - alert: Versionv3\n        expr: rate(up[5m]\n",
	},
	mount: "/etc/prometheus",
	runs: func(pod *corev1.Pod) string {
		var cfg struct {
			Data struct{ YAML string }
		}
		var rules struct {
			Data struct {
				Groups []struct{ Rules []struct{ Name string } }
			}
		}
		if !getJSON(pod, prometheusPort, "/api/v1/status/config", &cfg) || !getJSON(pod, prometheusPort, "/api/v1/rules", &rules) {
			return ""
		}
		configured := regexp.MustCompile(`configward_version: (v\d)`).FindStringSubmatch(cfg.Data.YAML)
		var alerts []string
		for _, g := range rules.Data.Groups {
			for _, r := range g.Rules {
				alerts = append(alerts, strings.TrimPrefix(r.Name, "Version"))
			}
		}
		if len(configured) < 2 || len(alerts) != 1 || alerts[0] != configured[1] {
			return fmt.Sprintf("config %v, rules %v", configured, alerts)
		}
		return configured[1]
	},
	// Prometheus answers the reload call with its own words (the rule's
	// parse error is in its log).
	rejects: "the reload call answered 500: failed to reload config: one or more errors occurred while applying the new configuration",
}, {
	// Signal mode: Alertmanager reloads on SIGHUP and says nothing back
	// but its gauges.
	name: "alertmanager", image: framework.AlertmanagerImage, imageEnv: framework.AlertmanagerImageEnv,
	recipe: framework.RecipeOf("alertmanager"),
	config: func(v string) map[string]string {
		return map[string]string{"alertmanager.yml": "route:\n  receiver: version-" + v + "\nreceivers:\n  - name: version-" + v + "\n"}
	},
	// A route to a receiver the file does not define.
	bad:   map[string]string{"alertmanager.yml": "route:\n  receiver: nowhere\nreceivers:\n  - name: version-v3\n"},
	mount: "/etc/alertmanager",
	runs: func(pod *corev1.Pod) string {
		var status struct{ Config struct{ Original string } }
		if !getJSON(pod, alertmanagerPort, "/api/v2/status", &status) {
			return ""
		}
		if m := regexp.MustCompile(`receiver: version-(v\d)`).FindStringSubmatch(status.Config.Original); len(m) == 2 {
			return m[1]
		}
		return status.Config.Original
	},
	rejects: "alertmanager_config_last_reload_successful 0: the program kept its last good configuration",
}, {
	// Watch mode: Caddy polls its Caddyfile (--watch); the agent triggers
	// nothing and reads Caddy's admin gauges.
	name: "caddy", image: framework.CaddyImage, imageEnv: framework.CaddyImageEnv,
	recipe: framework.RecipeOf("caddy"),
	config: func(v string) map[string]string {
		return map[string]string{"Caddyfile": fmt.Sprintf("{\n\tadmin localhost:2019\n\tauto_https off\n}\n\n:%d {\n\trespond %q\n}\n", caddyPort, v)}
	},
	// A certificate file that is not there: the Caddyfile adapts, and
	// Caddy fails to load it. (A syntax error is another story: see the
	// last spec.)
	bad:   map[string]string{"Caddyfile": fmt.Sprintf("{\n\tadmin localhost:2019\n\tauto_https off\n}\n\n:%d {\n\ttls /etc/caddy/tls.crt /etc/caddy/tls.key\n\trespond \"v3\"\n}\n", caddyPort)},
	mount: "/etc/caddy",
	// Caddy keeps its state under these: the data volume.
	env: []corev1.EnvVar{{Name: "HOME", Value: "/data"}, {Name: "XDG_DATA_HOME", Value: "/data"}, {Name: "XDG_CONFIG_HOME", Value: "/data"}},
	runs: func(pod *corev1.Pod) string {
		body, ok := get(pod, caddyPort, "/")
		if !ok {
			return ""
		}
		return body
	},
	rejects: "caddy_config_last_reload_successful 0: the program kept its last good configuration",
}}

// Hot config proven on programs nobody here wrote: Prometheus (HTTP),
// Alertmanager (signal) and Caddy (watch), unmodified, two pods each,
// delivered in waves (a canary of half the pods, then the rest) on the
// real node. A good change reaches the canary's program, which applies
// it as the program itself shows, and the rest after it; a change each
// program rejects in its own way halts at the canary, whose agent says
// so, the rest never see it, and the rollback brings the canary's
// program back to its last good config; nothing restarts.
var _ = Describe("hot config on real programs (Prometheus, Alertmanager, Caddy) in waves on the real node", Ordered, ContinueOnFailure, func() {
	ctx := context.Background()
	ns := map[string]string{}     // by program
	canary := map[string]string{} // the canary pod's name, by program
	started := map[string]map[string]time.Time{}

	BeforeAll(func() {
		for _, p := range realPrograms {
			Expect(node.ImportImage(os.Getenv(p.imageEnv))).To(Succeed(), "run make node, which builds the %s image", p.name)
			ns[p.name] = namespace(nil)
			deliveryPolicy("node-programs-"+ns[p.name], ns[p.name], v1alpha1.ConfigPolicySpec{
				Revisions: v1alpha1.RevisionSettings{Enabled: true},
				// Four changes in a few minutes are these specs', not a
				// writer gone wrong: none is held as flapping.
				Rollouts: v1alpha1.RolloutSettings{Flapping: &v1alpha1.FlappingSettings{Changes: 10, Window: metav1.Duration{Duration: 10 * time.Minute}}},
				Delivery: &v1alpha1.DeliverySettings{
					Waves: []v1alpha1.Wave{
						{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.name}}, PodPercent: new(int32(50))},
						{Name: "rest"},
					},
					// Past the agent's two minutes of reading a check that
					// never confirms (the last spec).
					ProgressDeadlineSeconds: 200, SoakSeconds: new(int32(2)), PropagationSeconds: new(int32(30)), OnFailure: v1alpha1.FailureRollback,
				},
			})
			Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns[p.name], Name: p.name,
				Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}}, Data: p.config("v1")})).To(Succeed())
			awaitHot(ns[p.name], p.name)
			// Pods created before the channels exist mount the original.
			for _, wave := range []string{"canary", "rest"} {
				Eventually(func() error {
					return env.Client.Get(ctx, client.ObjectKey{Namespace: ns[p.name], Name: p.name + "-ch-" + wave}, &corev1.ConfigMap{})
				}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
			}
			Expect(env.Client.Create(ctx, programDeployment(ns[p.name], p))).To(Succeed())
		}
		for _, p := range realPrograms {
			Eventually(func() []corev1.Pod { return readyPods(ns[p.name], p.name) }, 3*time.Minute, 250*time.Millisecond).
				Should(HaveLen(2), func() string { return programLogs(ns[p.name], p.name) })
			started[p.name] = map[string]time.Time{}
			for _, pod := range livePods(ns[p.name], p.name) {
				Expect(reload.HasAgent(&pod)).To(BeTrue(), pod.Name)
				if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
					return v.ConfigMap != nil && v.ConfigMap.Name == p.name+"-ch-canary"
				}) {
					canary[p.name] = pod.Name
				}
				started[p.name][pod.Name] = startedAt(&pod)
				Eventually(func() string { return p.runs(podNamed(ns[p.name], pod.Name)) }, time.Minute, 250*time.Millisecond).Should(Equal("v1"), pod.Name)
				// The agent, a native sidecar, starts before the program: it
				// reads the check until the program answers, and reports
				// what it runs.
				Eventually(reportOf(ns[p.name], pod.Name, p.name), time.Minute, 250*time.Millisecond).
					Should(And(HaveField("Content", Not(BeEmpty())), HaveField("Result", reload.Applied)), programLogs(ns[p.name], p.name))
			}
			Expect(canary[p.name]).NotTo(BeEmpty(), "one pod of %s in the canary", p.name)
		}
	})

	It("a good change: the canary's program applies it, its agent reports applied, the rest follows; no container restarts", func() {
		written := map[string]time.Time{}
		for _, p := range realPrograms {
			updateData(ns[p.name], p.name, p.config("v2"))
			written[p.name] = time.Now()
		}
		for _, p := range realPrograms {
			n := ns[p.name]
			canaryPod := podNamed(n, canary[p.name])
			Eventually(reportOf(n, canary[p.name], p.name), 2*time.Minute, 250*time.Millisecond).
				Should(And(HaveField("Result", reload.Applied), HaveField("SwappedAt", BeTemporally(">", written[p.name]))), programLogs(n, p.name))
			Expect(p.runs(canaryPod)).To(Equal("v2"), "%s: the canary's program runs the change", p.name)
			toCanary := reportOf(n, canary[p.name], p.name)().At.Sub(written[p.name])
			Eventually(latestHotDelivery(n), 2*time.Minute, 250*time.Millisecond).Should(Equal("Succeeded@rest"), programLogs(n, p.name))
			var last time.Time
			for _, pod := range livePods(n, p.name) {
				e := reportOf(n, pod.Name, p.name)()
				Expect(e.Result).To(Equal(reload.Applied), "%s pod %s", p.name, pod.Name)
				Expect(e.SwappedAt).To(BeTemporally(">", written[p.name]), "%s pod %s", p.name, pod.Name)
				Expect(p.runs(&pod)).To(Equal("v2"), "%s pod %s", p.name, pod.Name)
				last = maxTime(last, e.At)
				Expect(startedAt(&pod)).To(Equal(started[p.name][pod.Name]), "%s pod %s: no container restarted", p.name, pod.Name)
			}
			AddReportEntry("hot reload of "+p.name, fmt.Sprintf("kubelet sync 5s: the canary's agent reported applied %s after the write, the rest wave's %s after it (message %q)",
				toCanary.Round(100*time.Millisecond), last.Sub(written[p.name]).Round(100*time.Millisecond), reportOf(n, canary[p.name], p.name)().Message))
		}
	})

	It("a change the program rejects: the canary keeps its config and says so, the wave halts, the rest never see it, the rollback is applied without a restart", func() {
		written := map[string]time.Time{}
		for _, p := range realPrograms {
			written[p.name] = time.Now()
			updateData(ns[p.name], p.name, p.bad)
		}
		for _, p := range realPrograms {
			n := ns[p.name]
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: p.name}}
			// The programs' rejections and rollbacks run side by side: the
			// record and the Event keep what the canary's agent said.
			Eventually(latestHotDelivery(n), 2*time.Minute, 250*time.Millisecond).Should(Equal("Halted@canary"), programLogs(n, p.name))
			latest := latestDelivery(n)
			Expect(latest.Status.Reason).To(Equal("WaveFailed"), p.name)
			Expect(latest.Status.Message).To(And(ContainSubstring(canary[p.name]), ContainSubstring("its program rejected the content: "+p.rejects)), p.name)
			Expect(latest.Status.RolledBack).To(BeTrue(), p.name)
			Eventually(func() []string { return eventsFor(n, d.Name, "ConfigReloadFailed") }, 30*time.Second, 250*time.Millisecond).
				Should(ContainElement(And(ContainSubstring("pod "+canary[p.name]+" rejected ConfigMap/"+p.name), ContainSubstring(p.rejects))), p.name)
			halted := latest.Status.History[len(latest.Status.History)-1].Time

			By(p.name + ": rolled back, the canary's program applies its last good config again")
			Eventually(reportOf(n, canary[p.name], p.name), 2*time.Minute, 250*time.Millisecond).
				Should(And(HaveField("Result", reload.Applied), HaveField("SwappedAt", BeTemporally(">", written[p.name]))), programLogs(n, p.name))
			rolledBack := reportOf(n, canary[p.name], p.name)()
			Expect(p.runs(podNamed(n, canary[p.name]))).To(Equal("v2"), p.name)
			var rest corev1.ConfigMap
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: n, Name: p.name + "-ch-rest"}, &rest)).To(Succeed())
			Expect(rest.Data).To(Equal(p.config("v2")), "%s: the rest's channel never held the change", p.name)
			for _, pod := range livePods(n, p.name) {
				Expect(p.runs(&pod)).To(Equal("v2"), "%s pod %s runs its last good config", p.name, pod.Name)
				Expect(startedAt(&pod)).To(Equal(started[p.name][pod.Name]), "%s pod %s: no container restarted", p.name, pod.Name)
				if pod.Name != canary[p.name] {
					Expect(reportOf(n, pod.Name, p.name)().SwappedAt).To(BeTemporally("<", written[p.name]), "%s pod %s never swapped the change in", p.name, pod.Name)
				}
			}
			AddReportEntry("rejection by "+p.name, fmt.Sprintf("kubelet sync 5s: halted %s after the write; rolled back and applied again %s after it",
				halted.Sub(written[p.name]).Round(100*time.Millisecond), rolledBack.At.Sub(written[p.name]).Round(100*time.Millisecond)))
		}
	})

	It("a Caddyfile syntax error: Caddy's watcher gives up with its gauge still 1, the agent never reports it applied, and the wave halts on that", func() {
		p := realPrograms[2]
		n := ns[p.name]
		Expect(p.name).To(Equal("caddy"))
		By("a good change first: Caddy's gauge is 1 again, from a reload it did")
		updateData(n, p.name, p.config("v4"))
		Eventually(latestHotDelivery(n), 2*time.Minute, 250*time.Millisecond).Should(Equal("Succeeded@rest"), programLogs(n, p.name))
		for _, pod := range livePods(n, p.name) {
			Expect(p.runs(&pod)).To(Equal("v4"), pod.Name)
		}
		before := deliverySequence(n)
		updateData(n, p.name, map[string]string{"Caddyfile": fmt.Sprintf("{\n\tadmin localhost:2019\n}\n\n:%d {\n\trespond \"v5\"\n", caddyPort)})
		var rec v1alpha1.ConfigDelivery
		Eventually(func() string {
			rec = latestDelivery(n)
			return fmt.Sprintf("%d %s@%s", rec.Spec.Sequence, rec.Status.State, rec.Status.CurrentWave)
		}, 4*time.Minute, time.Second).Should(Equal(fmt.Sprintf("%d Halted@canary", before+1)), programLogs(n, p.name))
		Expect(rec.Status.Message).To(And(ContainSubstring(canary[p.name]), ContainSubstring("its reload check never showed the program applied the content"),
			ContainSubstring("the program has not reloaded since the swap")), "halted on the canary's unconfirmed report, not on the deadline")
		e := reportOf(n, canary[p.name], p.name)()
		Expect(e.Result).To(Equal(reload.Seen), "not applied: the gauge stayed 1 from the last good reload")
		logs, err := node.ContainerOutput(podNamed(n, canary[p.name]), p.name)
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Join(logs, "\n")).To(ContainSubstring("unable to load latest config"), "Caddy's own words, in its log")
		var rest corev1.ConfigMap
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: n, Name: p.name + "-ch-rest"}, &rest)).To(Succeed())
		Expect(rest.Data).To(Equal(p.config("v4")), "the rest's channel never held the syntax error")
		for _, pod := range livePods(n, p.name) {
			Expect(p.runs(&pod)).To(Equal("v4"), "pod %s serves its last good config", pod.Name)
		}
	})
})

// programDeployment runs p, two pods, on its hot ConfigMap.
func programDeployment(ns string, p realProgram) *appsv1.Deployment {
	c := corev1.Container{Name: p.name, Image: p.image, ImagePullPolicy: corev1.PullNever, Args: p.recipe.Args, Env: p.env}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: p.mount}, {Name: "data", MountPath: "/data"}}
	labels := map[string]string{"app": p.name}
	// Labelled itself: a wave's selector picks workloads.
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.name, Labels: labels}, Spec: appsv1.DeploymentSpec{
		Replicas: new(int32(2)),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{v1alpha1.ReloadAgentAnnotation: p.recipe.Trigger, v1alpha1.ReloadCheckAnnotation: p.recipe.Check}},
			Spec: corev1.PodSpec{
				// A user of its own, as signal mode asks (the agent signals
				// the program as its user).
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(65532)), RunAsNonRoot: new(true)},
				Containers:      []corev1.Container{c},
				Volumes: []corev1.Volume{
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: p.name}}}},
					{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
				AutomountServiceAccountToken:  new(false),
				TerminationGracePeriodSeconds: new(int64(5)),
			},
		},
	}}
}

// latestDelivery is the newest delivery record in ns.
func latestDelivery(ns string) v1alpha1.ConfigDelivery {
	var list v1alpha1.ConfigDeliveryList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	if len(list.Items) == 0 {
		return v1alpha1.ConfigDelivery{}
	}
	return slices.MaxFunc(list.Items, func(a, b v1alpha1.ConfigDelivery) int { return int(a.Spec.Sequence - b.Spec.Sequence) })
}

// deliverySequence is the newest delivery's sequence in ns.
func deliverySequence(ns string) int64 { return latestDelivery(ns).Spec.Sequence }

// updateData replaces ConfigMap name's data.
func updateData(ns, name string, data map[string]string) {
	var cm corev1.ConfigMap
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
	cm.Data = data
	Expect(env.Client.Update(context.Background(), &cm)).To(Succeed())
}

// reportOf is what the agent of pod last reported of ConfigMap config, as
// configward keeps it on the pod.
func reportOf(ns, pod, config string) func() reload.PodEntry {
	return func() reload.PodEntry {
		return reload.EntriesOf(podNamed(ns, pod))["ConfigMap/"+config]
	}
}

// startedAt is when pod's containers last started: a restart moves it.
func startedAt(pod *corev1.Pod) time.Time {
	p := podNamed(pod.Namespace, pod.Name)
	var last time.Time
	for _, s := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
		Expect(s.RestartCount).To(BeZero(), "container %s of pod %s restarted", s.Name, p.Name)
		if s.State.Running != nil {
			last = maxTime(last, s.State.Running.StartedAt.Time)
		}
	}
	return last
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// get reads path from the program of pod at its address.
func get(pod *corev1.Pod, port int, path string) (string, bool) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(port)) + path)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return strings.TrimSpace(string(body)), err == nil && resp.StatusCode == http.StatusOK
}

// getJSON reads path from the program of pod into v.
func getJSON(pod *corev1.Pod, port int, path string, v any) bool {
	body, ok := get(pod, port, path)
	return ok && json.Unmarshal([]byte(body), v) == nil
}

// programLogs is the end of what the programs and agents of app's pods
// printed, for a failure message.
func programLogs(ns, app string) string {
	var b strings.Builder
	for _, p := range livePods(ns, app) {
		for _, c := range []string{reload.AgentContainer, app} {
			lines, err := node.ContainerOutput(&p, c)
			fmt.Fprintf(&b, "\n--- %s/%s (%v):\n%s", p.Name, c, err, strings.Join(lines[max(0, len(lines)-12):], "\n"))
		}
	}
	return b.String()
}
