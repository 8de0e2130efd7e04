package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/test/framework"
)

// reloadMode is a workload whose pods run reloadapp with the reload agent,
// in one of the agent's modes.
type reloadMode struct {
	name, trigger, check string
	// watch runs reloadapp with -watch: it reloads by itself when the
	// kubelet swaps its directory.
	watch    bool
	replicas int32
}

// The modes, each with a different way for the agent to learn what the
// program made of a change.
var reloadModes = []reloadMode{
	// SIGHUP to the program's processes (the agent shares the pod's process
	// namespace and runs as the program's user); then the program's
	// /config/version, 2xx with what it applied or 422 with why not.
	{name: "signal", trigger: "signal:SIGHUP@app", check: "http://localhost:8080/config/version", replicas: 2},
	// POST /-/reload: the answer itself says applied (200) or rejected
	// (422).
	{name: "http", trigger: "http://localhost:8080/-/reload", replicas: 1},
	// The program watches its files; the agent triggers nothing and reads
	// the program's gauge. Without a check it could only say "seen"
	// (status: unconfirmed), and a rejection would go unnoticed: the
	// check is what makes watch mode say applied or rejected. The program
	// polls every 3 s, so its gauge still shows the previous reload's
	// verdict when the agent first reads it: only its last success's
	// time (since=) tells whether it acted on this content.
	{name: "watch", trigger: "watch", check: "http://localhost:8080/metrics#reloadapp_config_last_reload_successful;since=reloadapp_config_last_reload_success_timestamp_seconds", watch: true, replicas: 1},
}

// The hot ConfigMap the workloads mount, and its one key, which reloadapp
// reads (valid: level=<word>).
const settingsConfigMap, settingsKey = "settings", "settings"

// The reload agent on the real node: configward injects it into the pods
// that ask for it, it sees the kubelet swap a hot ConfigMap's new content
// into a running pod, makes a real program (reloadapp) reload, reads back
// what the program made of it and reports it, through the webhook's agent
// port, as the pod; configward shows it in status, pod conditions, Events
// and Reports.
var _ = Describe("the reload agent, with a program that reloads its config in place on the real node", Ordered, ContinueOnFailure, func() {
	ctx := context.Background()
	var ns string
	cm := &corev1.ConfigMap{}

	BeforeAll(func() {
		ns = namespace(nil)
		*cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: settingsConfigMap,
			Annotations: map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}}, Data: map[string]string{settingsKey: "level=info"}}
		Expect(env.Client.Create(ctx, cm)).To(Succeed())
		awaitHot(ns, settingsConfigMap)
		for _, m := range reloadModes {
			Expect(env.Client.Create(ctx, reloadDeployment(ns, m))).To(Succeed())
		}
		for _, m := range reloadModes {
			Eventually(func() []corev1.PodPhase {
				var phases []corev1.PodPhase
				for _, p := range livePods(ns, m.name) {
					Expect(reload.HasAgent(&p)).To(BeTrue(), "pod %s was created without the reload agent", p.Name)
					phases = append(phases, p.Status.Phase)
				}
				return phases
			}, 2*time.Minute, 250*time.Millisecond).Should(And(HaveLen(int(m.replicas)), HaveEach(corev1.PodRunning)), func() string {
				return fmt.Sprintf("%s pods not running:%s\nkubelet log:\n%s", m.name, agentLogs(ns), tailFile(node.KubeletLog()))
			})
		}
		By("every agent reports the content the pods started on")
		for _, m := range reloadModes {
			Eventually(func() string { return string(reloadResultOf(ns, m.name).Result) }, 30*time.Second, 250*time.Millisecond).
				ShouldNot(BeEmpty(), "the controller's Report on %s judges its hot config", m.name)
		}
		res := env.KubectlPlugin("status", "-n", ns, "--wait", "--timeout", "3m")
		Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr+agentLogs(ns))
	})

	// setSettings writes the ConfigMap and waits until configward's
	// controller has judged the new content: until then status compares the
	// pods with the content its Reports name, the old one (see the report
	// of this change). It returns when the write was sent.
	setSettings := func(value string) time.Time {
		before := map[string]string{}
		for _, m := range reloadModes {
			before[m.name] = reloadResultOf(ns, m.name).Properties[report.PropContent]
		}
		cm.Data[settingsKey] = value
		written := time.Now()
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		for _, m := range reloadModes {
			Eventually(func() string { return reloadResultOf(ns, m.name).Properties[report.PropContent] }, 30*time.Second, 250*time.Millisecond).
				ShouldNot(Equal(before[m.name]), "the controller's Report on %s names the new content", m.name)
		}
		return written
	}

	It("brings a hot ConfigMap's change to the running program in every mode, and status says every pod applied it; no program restarts", func() {
		setSettings("level=debug")
		res := env.KubectlPlugin("status", "-n", ns, "--wait", "--timeout", "3m")
		Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr+agentLogs(ns))
		rows := reloadsOf(ns)
		for _, m := range reloadModes {
			Expect(rows).To(HaveKeyWithValue(m.name, HaveField("Pods", HaveKeyWithValue("applied", int(m.replicas)))), "status of %s: %s", m.name, res.Stdout)
			for _, p := range livePods(ns, m.name) {
				Expect(reloadConditionOf(&p)).To(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", reload.ReasonApplied)), "%s pod %s", m.name, p.Name)
				code, body := programSays(&p)
				Expect(code).To(Equal(http.StatusOK), "%s pod %s: %s", m.name, p.Name, body)
				Expect(body).To(Equal("level=debug"), "what the program of %s pod %s runs on", m.name, p.Name)
				Expect(output(&p)()).To(ContainElement("applied level=debug"))
				neverRestarted(&p)
			}
		}
	})

	It("says so everywhere when the program rejects a change, and the program runs on what it had; a later valid change clears it", func() {
		setSettings("verbose")
		// Every pod's program rejects it; status ends a wait at once on the
		// first rejection, so the rejections are awaited first.
		for _, m := range reloadModes {
			Eventually(func() map[string]reloadRow { return reloadsOf(ns) }, 2*time.Minute, time.Second).
				Should(HaveKeyWithValue(m.name, HaveField("Pods", HaveKeyWithValue("rejected", int(m.replicas)))), agentLogs(ns))
		}
		res := env.KubectlPlugin("status", "-n", ns, "--wait", "--timeout", "1m")
		Expect(res.ExitCode).To(Equal(3), "a program rejected the current content: "+res.Stdout+res.Stderr)
		for _, m := range reloadModes {
			// What each mode passes on of the program's answer.
			said := `invalid settings "verbose": want level=<word>; keeping level=debug`
			if m.watch {
				said = "reloadapp_config_last_reload_successful 0: the program kept its last good configuration"
			}
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.name}}
			for _, p := range livePods(ns, m.name) {
				Expect(res.Stdout).To(MatchRegexp(`Deployment/%s: the program of pod %s rejected ConfigMap/%s: .*%s`, m.name, p.Name, settingsConfigMap, regexp.QuoteMeta(said)))
				Expect(reloadConditionOf(&p)).To(And(HaveField("Status", corev1.ConditionFalse), HaveField("Reason", reload.ReasonRejected)), "%s pod %s", m.name, p.Name)
				Expect(reload.EntriesOf(&p)).To(HaveKeyWithValue("ConfigMap/"+settingsConfigMap, HaveField("Message", HaveSuffix(said))))
				Eventually(func() []string { return eventsFor(ns, d.Name, "ConfigReloadFailed") }, 30*time.Second, 250*time.Millisecond).
					Should(ContainElement(And(ContainSubstring("pod "+p.Name+" rejected ConfigMap/"+settingsConfigMap), ContainSubstring(said))))
				code, body := programSays(&p)
				Expect(code).To(Equal(http.StatusUnprocessableEntity), "%s pod %s: %s", m.name, p.Name, body)
				Expect(body).To(HaveSuffix("keeping level=debug"), "the program runs on what it had")
				neverRestarted(&p)
			}
			Eventually(func() string { return string(reloadResultOf(ns, m.name).Result) }, 30*time.Second, 250*time.Millisecond).
				Should(Equal("fail"), "the Report of %s", m.name)
		}
		Eventually(func() int { return reloadPods(ns, "rejected") }, 30*time.Second, 250*time.Millisecond).
			Should(Equal(len(livePodsOfModes(ns))), "the controller's gauge counts every pod whose program rejected the content")

		By("a later valid change, applied everywhere, clears it")
		setSettings("level=warn")
		res = env.KubectlPlugin("status", "-n", ns, "--wait", "--timeout", "3m")
		Expect(res.ExitCode).To(Equal(0), res.Stdout+res.Stderr+agentLogs(ns))
		for _, m := range reloadModes {
			for _, p := range livePods(ns, m.name) {
				Expect(reloadConditionOf(&p)).To(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", reload.ReasonApplied)), "%s pod %s", m.name, p.Name)
				code, body := programSays(&p)
				Expect([]any{code, body}).To(Equal([]any{http.StatusOK, "level=warn"}), "%s pod %s", m.name, p.Name)
				neverRestarted(&p)
			}
			Eventually(func() string { return string(reloadResultOf(ns, m.name).Result) }, 30*time.Second, 250*time.Millisecond).
				Should(Equal("pass"), "the Report of %s", m.name)
		}
		Eventually(func() []int { return []int{reloadPods(ns, "rejected"), reloadPods(ns, "applied")} }, 30*time.Second, 250*time.Millisecond).
			Should(Equal([]int{0, len(livePodsOfModes(ns))}), "the gauge: no pod rejected, every pod applied")
	})

	It("refuses reports without a reload agent's token, and takes one bound to a pod as that pod's only", func() {
		pods := livePods(ns, "signal")
		Expect(pods).To(HaveLen(2))
		a, b := pods[0], pods[1]
		bBefore := reloadConditionOf(&b)
		forged := func(token, result, message string) reload.Report {
			key := reload.FingerprintKey([]byte(token))
			return reload.Report{Configs: []reload.ConfigReport{{Config: "ConfigMap/" + settingsConfigMap, AllKeys: true,
				Keys:      reload.Fingerprints(key, map[string][]byte{settingsKey: []byte(cm.Data[settingsKey])}),
				SwappedAt: time.Now().UTC(), At: time.Now().UTC(), Result: result, Message: message}}}
		}

		// Sent from this process to the node's address (where the pods'
		// agents send theirs), checked against the serving certificate.
		code, body := postReport("", forged("x", reload.Rejected, "forged"))
		Expect(code).To(Equal(http.StatusUnauthorized), "no token: %s", body)
		other := podToken(&a, "https://kubernetes.default.svc")
		code, body = postReport(other, forged(other, reload.Rejected, "forged"))
		Expect(code).To(Equal(http.StatusUnauthorized), "a token of another audience: %s", body)
		Expect(reloadConditionOf(&a).Reason).To(Equal(reload.ReasonApplied))

		By("a report made with pod A's agent token is about pod A, whatever it says: pod B's record stays as it was")
		token := podToken(&a, reload.Audience)
		code, body = postReport(token, forged(token, reload.Rejected, "forged by the test as pod "+a.Name))
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(reloadConditionOf(&a).Reason).To(Equal(reload.ReasonRejected))
		Expect(reload.EntriesOf(&a)).To(HaveKeyWithValue("ConfigMap/"+settingsConfigMap, HaveField("Message", "forged by the test as pod "+a.Name)))
		Expect(reloadConditionOf(&b)).To(Equal(bBefore))
		Eventually(func() []reload.Rejection { return reloadsOf(ns)["signal"].Rejections }, 30*time.Second, 250*time.Millisecond).
			Should(ConsistOf(HaveField("Pod", a.Name)))

		// Put pod A's record right again: its agent sends its own report
		// only when it learns something new (or after ten minutes).
		code, body = postReport(token, forged(token, reload.Applied, "level=warn"))
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(reloadConditionOf(&a).Reason).To(Equal(reload.ReasonApplied))
	})

	It("measures the agent: memory and CPU idle and through a change, and the time from a ConfigMap write to each pod's Applied condition", func() {
		var replicas int
		for _, m := range reloadModes {
			replicas += int(m.replicas)
		}
		agents := agentProcesses(livePodsOfModes(ns))
		Expect(agents).To(HaveLen(replicas), "one `configward agent` process per pod")

		// A fixed window: there is nothing to wait for, only time to
		// measure an idle agent over (it polls its directories every 2 s).
		const idleWindow = 20 * time.Second
		start := sampleAgents(agents)
		time.Sleep(idleWindow)
		idle := sampleAgents(agents)

		written := setSettings("level=error")
		applied := map[string]time.Duration{}
		swapped := map[string]time.Duration{}
		Eventually(func() []string {
			var waiting []string
			for _, m := range reloadModes {
				for _, p := range livePods(ns, m.name) {
					if _, ok := applied[p.Name]; ok {
						continue
					}
					e := reload.EntriesOf(&p)["ConfigMap/"+settingsConfigMap]
					c := reloadConditionOf(&p)
					if c.Reason == reload.ReasonApplied && e.Content != "" && !e.SwappedAt.Before(written) {
						applied[p.Name], swapped[p.Name] = time.Since(written), e.SwappedAt.Sub(written)
						continue
					}
					waiting = append(waiting, p.Name)
				}
			}
			return waiting
		}, 3*time.Minute, 100*time.Millisecond).Should(BeEmpty(), agentLogs(ns))
		changed := sampleAgents(agents)
		changeWindow := time.Since(written)

		var lines []string
		for _, pid := range agents {
			s0, s1, s2 := start[pid], idle[pid], changed[pid]
			lines = append(lines, fmt.Sprintf("agent pid %d (pod %s): %.0f ms CPU from its start to the idle window; idle %.2f m CPU over %s, RSS %s (anon %s), cgroup memory %s; "+
				"through the change %.2f m CPU over %s (%.1f ms CPU), RSS %s; peak RSS %s, cgroup memory peak %s (since start)",
				pid, s2.pod, float64(s0.cpu)/1e6, millicores(s1.cpu-s0.cpu, idleWindow), idleWindow, mib(s1.rss), mib(s1.anon), mib(s1.cgroupMemory),
				millicores(s2.cpu-s1.cpu, changeWindow), changeWindow.Round(time.Second), float64(s2.cpu-s1.cpu)/1e6, mib(s2.rss), mib(s2.hwm), mib(s2.cgroupPeak)))
		}
		var pods []string
		for name := range applied {
			pods = append(pods, name)
		}
		slices.Sort(pods)
		for _, name := range pods {
			lines = append(lines, fmt.Sprintf("pod %s: Applied %s after the ConfigMap write (the kubelet swapped it in after %s; the agent's reload, check and report, and the webhook's write, took %s)",
				name, applied[name].Round(10*time.Millisecond), swapped[name].Round(10*time.Millisecond), (applied[name]-swapped[name]).Round(10*time.Millisecond)))
		}
		AddReportEntry("reload agent", strings.Join(lines, "\n"))
		for _, m := range reloadModes {
			for _, p := range livePods(ns, m.name) {
				neverRestarted(&p)
			}
		}
	})
})

// reloadDeployment runs reloadapp on the ConfigMap settings, mounted whole,
// with the agent in mode m.
func reloadDeployment(ns string, m reloadMode) *appsv1.Deployment {
	args := []string{"-config", "/config/settings", "-listen", ":8080"}
	if m.watch {
		args = append(args, "-watch", "-watch-every", "3s")
	}
	annotations := map[string]string{v1alpha1.ReloadAgentAnnotation: m.trigger}
	if m.check != "" {
		annotations[v1alpha1.ReloadCheckAnnotation] = m.check
	}
	labels := map[string]string{"app": m.name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.name}, Spec: appsv1.DeploymentSpec{
		Replicas: new(m.replicas),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: corev1.PodSpec{
			// The user is set, as signal mode asks (the agent signals the
			// program as its user): the images' own, 65532.
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(65532)), RunAsNonRoot: new(true)},
			Containers: []corev1.Container{{
				Name: "app", Image: framework.ReloadAppImage, ImagePullPolicy: corev1.PullNever, Args: args,
				VolumeMounts: []corev1.VolumeMount{{Name: "settings", MountPath: "/config/settings"}},
			}},
			Volumes: []corev1.Volume{{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: settingsConfigMap}}}}},
			// The program needs no token; the agent gets its own.
			AutomountServiceAccountToken:  new(false),
			TerminationGracePeriodSeconds: new(int64(5)),
		}},
	}}
}

// awaitHot waits until both webhook replicas know ConfigMap name is hot
// (they inject the agent only for a pod that mounts hot config): a dry-run
// pod mounting it with subPath is refused, again and again.
func awaitHot(ns, name string) {
	awaitHotVolume(ns, corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
}

// awaitHotVolume is awaitHot for the ConfigMap or Secret of a volume.
func awaitHotVolume(ns string, src corev1.VolumeSource) {
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hot-probe"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: framework.ReloadAppImage,
			VolumeMounts: []corev1.VolumeMount{{Name: "c", MountPath: "/config/settings/x", SubPath: "x"}}}},
		Volumes: []corev1.Volume{{Name: "c", VolumeSource: src}},
	}}
	Eventually(func() string {
		err := env.Client.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
		if err == nil {
			return ""
		}
		return err.Error()
	}, 30*time.Second, 100*time.Millisecond).MustPassRepeatedly(10).Should(ContainSubstring("subPath"))
}

// livePods are the pods of app in ns that are not terminating.
func livePods(ns, app string) []corev1.Pod {
	var list corev1.PodList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// livePodsOfModes are the pods of every reload mode's workload in ns.
func livePodsOfModes(ns string) []corev1.Pod {
	var out []corev1.Pod
	for _, m := range reloadModes {
		out = append(out, livePods(ns, m.name)...)
	}
	return out
}

// reloadPods is the controller's gauge configward_reload_pods of ns and
// state: the pods of the namespace's workloads in that state, as the
// leader counts them (the other replica serves no such series), read from
// each controller pod's metrics port (the chart's metrics.port, without
// TLS).
func reloadPods(ns, state string) int {
	series := fmt.Sprintf(`configward_reload_pods{namespace=%q,state=%q}`, ns, state)
	sum := 0
	for _, p := range releasePods("controller") {
		n, err := framework.MetricSum("http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/metrics", series)
		Expect(err).NotTo(HaveOccurred(), p.Name)
		sum += n
	}
	return sum
}

// reloadConditionOf is pod's ConfigReload condition as stored now (pod is
// read again).
func reloadConditionOf(pod *corev1.Pod) corev1.PodCondition {
	Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	for _, c := range pod.Status.Conditions {
		if c.Type == v1alpha1.ReloadConditionType {
			return c
		}
	}
	return corev1.PodCondition{}
}

// programSays is what the program of pod says it runs on: its
// /config/version, read from this machine at the pod's address.
func programSays(pod *corev1.Pod) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(pod.Status.PodIP, "8080") + "/config/version")
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// neverRestarted checks that neither the program nor the agent of pod was
// restarted, and that the program started once.
func neverRestarted(pod *corev1.Pod) {
	Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	for _, s := range append(pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses...) {
		Expect(s.RestartCount).To(BeZero(), "container %s of pod %s restarted", s.Name, pod.Name)
	}
	started := slices.DeleteFunc(output(pod)(), func(l string) bool { return l != "started" })
	Expect(started).To(HaveLen(1), "the program of pod %s started once", pod.Name)
}

// reloadRow is what `configward status -o json` says of one workload's
// hot ConfigMap settings.
type reloadRow struct {
	Pods       map[string]int
	Rejections []reload.Rejection
}

// reloadsOf is status's word on each workload of ns (by name).
func reloadsOf(ns string) map[string]reloadRow {
	res := env.KubectlPlugin("status", "-n", ns, "-o", "json")
	var out struct {
		Items []struct {
			Name    string `json:"name"`
			Reloads []struct {
				Config     string             `json:"config"`
				Pods       map[string]int     `json:"pods"`
				Rejections []reload.Rejection `json:"rejections"`
			} `json:"reloads"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		return nil
	}
	rows := map[string]reloadRow{}
	for _, it := range out.Items {
		for _, r := range it.Reloads {
			if r.Config == "ConfigMap/"+settingsConfigMap {
				rows[it.Name] = reloadRow{Pods: r.Pods, Rejections: r.Rejections}
			}
		}
	}
	return rows
}

// reloadResultOf is the config-reload result of Deployment name's Report
// (empty while there is none).
func reloadResultOf(ns, name string) openreports.ReportResult {
	return reportResult(ns, name, func(res openreports.ReportResult) bool {
		return res.Rule == report.ConfigReload && res.Properties[report.PropConfig] == "ConfigMap/"+settingsConfigMap
	})
}

// reportResult is the first result of Deployment name's Report that
// matches, or none.
func reportResult(ns, name string, matches func(openreports.ReportResult) bool) openreports.ReportResult {
	d := &appsv1.Deployment{}
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
	var r openreports.Report
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: report.Name(d.UID)}, &r); err != nil {
		return openreports.ReportResult{}
	}
	for _, res := range r.Results {
		if matches(res) {
			return res
		}
	}
	return openreports.ReportResult{}
}

// eventsFor are the notes of the Events of reason regarding object name.
func eventsFor(ns, name, reason string) []string {
	notes, err := env.EventNotes(context.Background(), ns, name, reason)
	Expect(err).NotTo(HaveOccurred())
	return notes
}

// podToken is a token of pod's service account, of audience, bound to the
// pod, as the kubelet projects the agent's.
func podToken(pod *corev1.Pod, audience string) string {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: new(int64(600)),
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}
	Expect(env.Client.SubResource("token").Create(context.Background(), sa, req)).To(Succeed())
	return req.Status.Token
}

// postReport posts rep with token (none when empty) where the node's
// agents report, trusting what they trust (the serving Secret's CA, for the
// Service's name), and returns the status and body.
func postReport(token string, rep reload.Report) (int, string) {
	var secret corev1.Secret
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: release + "-webhook-tls"}, &secret)).To(Succeed())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: agentServerName}}}
	body, err := json.Marshal(rep)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodPost, "https://"+agentsAddr+reload.ReportPath, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// agentLogs is the end of what each agent of ns's pods printed, for a
// failure message.
func agentLogs(ns string) string {
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if t := st.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, "\n--- %s/%s last ended: exit %d, %s: %s", p.Name, st.Name, t.ExitCode, t.Reason, t.Message)
			}
		}
		for _, c := range []string{reload.AgentContainer, "app"} {
			lines, err := node.ContainerOutput(p, c)
			fmt.Fprintf(&b, "\n--- %s/%s (%v):\n%s", p.Name, c, err, strings.Join(lines[max(0, len(lines)-10):], "\n"))
		}
	}
	return b.String()
}

// agentProcesses are the pids of the `configward agent` processes of pods
// on this machine. Other specs' pods on the node (one that ran before may
// still be stopping) have agents too. The node's containers share one
// cgroup parent (no QoS or pod cgroups), so a process is told by its
// hostname, which is its pod's name: pods' names are the workloads' with
// a random suffix, unique across the node.
func agentProcesses(pods []corev1.Pod) []int {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	Expect(err).NotTo(HaveOccurred())
	var out []int
	for _, f := range procs {
		cmdline, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); len(args) != 2 || args[0] != "/configward" || args[1] != "agent" {
			continue
		}
		environ, err := os.ReadFile(filepath.Join(filepath.Dir(f), "environ"))
		if err != nil {
			continue
		}
		if slices.ContainsFunc(pods, func(p corev1.Pod) bool {
			return slices.Contains(strings.Split(string(environ), "\x00"), "HOSTNAME="+p.Name)
		}) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// agentSample is what one agent process uses at a moment.
type agentSample struct {
	pod string
	// cpu is the CPU time of its container's cgroup, in nanoseconds.
	cpu int64
	// rss and anon are its resident memory now (all, and anonymous), hwm
	// its peak since it started; cgroupMemory and cgroupPeak its
	// container's memory usage now and at its peak (what the limit
	// counts), in bytes.
	rss, anon, hwm, cgroupMemory, cgroupPeak int64
}

// sampleAgents reads each agent's usage from /proc and its container's
// cgroup (v1: cpuacct and memory hierarchies; v2: the unified one).
func sampleAgents(pids []int) map[int]agentSample {
	out := map[int]agentSample{}
	for _, pid := range pids {
		var s agentSample
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		Expect(err).NotTo(HaveOccurred(), "agent process %d is gone", pid)
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				s.rss = kb << 10
			case "RssAnon:":
				s.anon = kb << 10
			case "VmHWM:":
				s.hwm = kb << 10
			}
		}
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range strings.Split(string(environ), "\x00") {
			if v, ok := strings.CutPrefix(kv, "HOSTNAME="); ok {
				s.pod = v
			}
		}
		cgroups, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(strings.TrimSpace(string(cgroups)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			for _, controller := range strings.Split(parts[1], ",") {
				dir := filepath.Join("/sys/fs/cgroup", controller, parts[2])
				switch controller {
				case "cpuacct":
					s.cpu = readInt(filepath.Join(dir, "cpuacct.usage"))
				case "memory":
					s.cgroupMemory, s.cgroupPeak = readInt(filepath.Join(dir, "memory.usage_in_bytes")), readInt(filepath.Join(dir, "memory.max_usage_in_bytes"))
				}
			}
			if parts[1] == "" && s.cpu == 0 { // cgroup v2
				dir := filepath.Join("/sys/fs/cgroup", parts[2])
				stat, _ := os.ReadFile(filepath.Join(dir, "cpu.stat"))
				for _, l := range strings.Split(string(stat), "\n") {
					if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
						usec, _ := strconv.ParseInt(v, 10, 64)
						s.cpu = usec * 1000
					}
				}
				s.cgroupMemory, s.cgroupPeak = readInt(filepath.Join(dir, "memory.current")), readInt(filepath.Join(dir, "memory.peak"))
			}
		}
		out[pid] = s
	}
	return out
}

func readInt(path string) int64 {
	b, _ := os.ReadFile(path)
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// millicores is CPU time (ns) over a window, in thousandths of a core.
func millicores(cpu int64, window time.Duration) float64 {
	return float64(cpu) / float64(window.Nanoseconds()) * 1000
}

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }
