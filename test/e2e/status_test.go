package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/report"
)

// These specs follow config drift as configward status, the gauges and
// the Reports show it, on the whole cluster: kube-controller-manager's
// deployment controller replaces the pods, kwok runs them.

// ages stands for the AGE column, the one part of the table that depends
// on when the spec runs.
var ages = regexp.MustCompile(`(?m)  (\d+s|\d+m\d*s?|-)$`)

// statusTable runs `configward status` with args and returns its output,
// AGE normalized to "<age>" (or kept "-"), and its exit code.
type statusRun struct {
	Table    string
	ExitCode int
}

func status(args ...string) func() statusRun {
	return func() statusRun {
		res := env.Status(args...)
		Expect(res.ExitCode).To(BeElementOf(0, 1), res.Stdout+res.Stderr)
		return statusRun{Table: ages.ReplaceAllStringFunc(res.Stdout, func(m string) string {
			if strings.HasSuffix(m, "-") {
				return m
			}
			return "  <age>"
		}), ExitCode: res.ExitCode}
	}
}

// configCurrent returns the config-current result of a workload's Report:
// its result and state property, or "none" while there is no Report.
func configCurrent(ns, kind, name string) func() string {
	return func() string {
		var w appsv1.Deployment
		Expect(kind).To(Equal("Deployment"))
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &w)).To(Succeed())
		var r openreports.Report
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: report.Name(w.UID)}, &r); err != nil {
			return "none"
		}
		res := report.StoredConfigCurrent(&r)
		if res == nil {
			return "no result"
		}
		return string(res.Result) + " " + res.Properties[report.PropState]
	}
}

func staleGauges(ns string) []float64 {
	return []float64{
		counter("configward_stale_workloads", map[string]string{"namespace": ns}),
		counter("configward_stale_pods", map[string]string{"namespace": ns}),
	}
}

// slowDeployment rolls one pod at a time and holds each new pod for
// minReadySeconds, so a rollout of 4 takes long enough to watch.
func slowDeployment(ns, name, cm string) string {
	return strings.Replace(replicatedDeployment(ns, name, cm, 4), "  replicas: 4\n",
		"  replicas: 4\n  minReadySeconds: 8\n  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n", 1)
}

var _ = Describe("config drift on a whole cluster", func() {
	It("shows the pods of a Deployment moving from stale to current config in status, the gauges and the Report", func() {
		ns := rolloutNamespace()
		applyWhenSeen(ns, []string{configMap(ns, "web-config", map[string]string{"app.yaml": "level: info"}, nil)},
			map[string][]string{"web-config": nil}, slowDeployment(ns, "web", "web-config"))
		rolloutStatus(ns, "deployment/web")

		By("before any change: every pod current, exit 0")
		Eventually(status("-n", ns), rolloutTimeout).Should(Equal(statusRun{ExitCode: 0, Table: "" +
			"WORKLOAD        CURRENT  STALE  STATE  LAST CHANGE  AGE\n" +
			"Deployment/web  4/4      0      done   -            -\n"}))
		Eventually(configCurrent(ns, "Deployment", "web"), 15*time.Second).Should(Equal("pass done"))
		Eventually(func() []float64 { return staleGauges(ns) }, 15*time.Second).Should(Equal([]float64{0, 0}))

		By("after the ConfigMap changes, while pods are replaced one at a time")
		apply(configMap(ns, "web-config", map[string]string{"app.yaml": "level: debug"}, nil))
		Eventually(status("-n", ns), rolloutTimeout).Should(Equal(statusRun{ExitCode: 1, Table: "" +
			"WORKLOAD        CURRENT  STALE  STATE        LAST CHANGE           AGE\n" +
			"Deployment/web  1/5      4      progressing  ConfigMap/web-config  <age>\n"}))
		Eventually(configCurrent(ns, "Deployment", "web"), 15*time.Second).Should(Equal("fail progressing"))
		Eventually(func() float64 { return staleGauges(ns)[0] }, 15*time.Second).Should(Equal(1.0))
		Expect(staleGauges(ns)[1]).To(BeNumerically(">", 0))
		Eventually(status("-n", ns), rolloutTimeout).Should(Equal(statusRun{ExitCode: 1, Table: "" +
			"WORKLOAD        CURRENT  STALE  STATE        LAST CHANGE           AGE\n" +
			"Deployment/web  2/5      3      progressing  ConfigMap/web-config  <age>\n"}))

		By("once every pod is replaced: current, exit 0, gauges 0, the Report passes")
		Eventually(status("-n", ns), rolloutTimeout).Should(Equal(statusRun{ExitCode: 0, Table: "" +
			"WORKLOAD        CURRENT  STALE  STATE  LAST CHANGE           AGE\n" +
			"Deployment/web  4/4      0      done   ConfigMap/web-config  <age>\n"}))
		Eventually(configCurrent(ns, "Deployment", "web"), 15*time.Second).Should(Equal("pass done"))
		Eventually(func() []float64 { return staleGauges(ns) }, 15*time.Second).Should(Equal([]float64{0, 0}))

		By("the Report was written when its facts changed, not per pod replaced nor on a timer")
		// A Report has no status: every write that changes it is a new
		// generation (one for the create).
		writes := reportGeneration(ns, "web")
		// created (done), then pending and/or progressing, then done again
		Expect(writes).To(BeNumerically(">=", 2))
		Expect(writes).To(BeNumerically("<=", 4))
		AddReportEntry("Report writes for a config change rolling 4 pods", writes)
		Consistently(func() int64 { return reportGeneration(ns, "web") }, 5*time.Second).Should(Equal(writes))

		By("the same through kubectl, as a plugin, for one workload, and as JSON")
		res := env.KubectlPlugin("status", "-n", ns, "deploy/web", "-o", "json")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(ContainSubstring(`"state": "done"`))
		Expect(res.Stdout).To(ContainSubstring(`"current": 4`))
		Expect(res.Stdout).To(ContainSubstring(`"changed": [` + "\n" + `        "ConfigMap/web-config"`))
		res = env.KubectlPlugin("status", "-n", ns, "deploy/nothere")
		Expect(res.ExitCode).To(Equal(2))
		Expect(res.Stderr).To(ContainSubstring(`Deployment "nothere" not found in namespace "` + ns + `"`))
		res = env.KubectlPlugin("status", "frobnicator/web")
		Expect(res.ExitCode).To(Equal(2))
		Expect(res.Stderr).To(ContainSubstring(`"frobnicator" is not a workload kind configward stamps (see kubectl configward status --help)`))
	})

	It("says a paused Recreate Deployment will not roll until it is resumed", func() {
		ns := rolloutNamespace()
		applyWhenSeen(ns, []string{configMap(ns, "cfg", map[string]string{"k": "1"}, nil)}, map[string][]string{"cfg": nil},
			strings.Replace(replicatedDeployment(ns, "paused", "cfg", 2), "  replicas: 2\n", "  replicas: 2\n  strategy: {type: Recreate}\n", 1))
		rolloutStatus(ns, "deployment/paused")
		Expect(env.Kubectl("", "rollout", "pause", "deployment/paused", "-n", ns).ExitCode).To(Equal(0))

		apply(configMap(ns, "cfg", map[string]string{"k": "2"}, nil))
		notRolled := statusRun{ExitCode: 1, Table: "" +
			"WORKLOAD           CURRENT  STALE  STATE       LAST CHANGE    AGE\n" +
			"Deployment/paused  0/2      2      not-rolled  ConfigMap/cfg  <age>\n" +
			"\n" +
			"Deployment/paused: ConfigMap/cfg changed, but the Deployment is paused: running pods keep the old config until it is resumed (kubectl rollout resume)\n"}
		Eventually(status("-n", ns), 15*time.Second).Should(Equal(notRolled))
		Consistently(status("-n", ns), 3*time.Second).Should(Equal(notRolled))
		Eventually(configCurrent(ns, "Deployment", "paused"), 15*time.Second).Should(Equal("fail not-rolled"))
		Eventually(func() []float64 { return staleGauges(ns) }, 15*time.Second).Should(Equal([]float64{1, 2}))
		res := env.Status("-A")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stdout).To(MatchRegexp(fmt.Sprintf(`(?m)^%s\s+Deployment/paused\s+0/2\s+2\s+not-rolled\s`, ns)))
		Expect(res.Stdout).To(ContainSubstring(ns + "/Deployment/paused: ConfigMap/cfg changed, but the Deployment is paused"))

		Expect(env.Kubectl("", "rollout", "resume", "deployment/paused", "-n", ns).ExitCode).To(Equal(0))
		rolloutStatus(ns, "deployment/paused")
		Eventually(status("-n", ns), rolloutTimeout).Should(Equal(statusRun{ExitCode: 0, Table: "" +
			"WORKLOAD           CURRENT  STALE  STATE  LAST CHANGE    AGE\n" +
			"Deployment/paused  2/2      0      done   ConfigMap/cfg  <age>\n"}))
		Eventually(configCurrent(ns, "Deployment", "paused"), 15*time.Second).Should(Equal("pass done"))
		Eventually(func() []float64 { return staleGauges(ns) }, 15*time.Second).Should(Equal([]float64{0, 0}))
		res = env.Status("-n", ns, "-o", "yaml")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(ContainSubstring("kind: ConfigStatus\n"))
		Expect(res.Stdout).To(MatchRegexp(`(?m)^  name: paused$`))
		Expect(res.Stdout).To(MatchRegexp(`(?m)^  state: done$`))
		res = env.Status("-n", ns, "-o", "xml")
		Expect(res.ExitCode).To(Equal(2))
		Expect(res.Stderr).To(ContainSubstring(`-o must be one of table, wide, json, yaml, not "xml"`))
	})
})

// reportOf lists the results of the Report configward keeps on an object,
// as "rule result subject", or nil while it has none.
func reportOf(ns string, obj client.Object) func() []string {
	return func() []string {
		Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		var r openreports.Report
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: report.Name(obj.GetUID())}, &r); err != nil {
			return nil
		}
		Expect(r.Source).To(Equal("configward"))
		Expect(r.Scope.UID).To(Equal(obj.GetUID()))
		var out []string
		for _, res := range r.Results {
			Expect(res.Subjects).To(HaveLen(1))
			out = append(out, fmt.Sprintf("%s %s %s/%s", res.Rule, res.Result, res.Subjects[0].Kind, res.Subjects[0].Name))
		}
		return out
	}
}

var _ = Describe("configward status for a user with fewer rights", func() {
	It("works without the right to read Reports and says what it cannot see; stops at a kind it may not list", func() {
		ns := rolloutNamespace()
		applyWhenSeen(ns, []string{configMap(ns, "cfg", map[string]string{"k": "1"}, nil)}, map[string][]string{"cfg": nil},
			replicatedDeployment(ns, "web", "cfg", 2))
		rolloutStatus(ns, "deployment/web")
		Eventually(status("-n", ns), rolloutTimeout).Should(HaveField("ExitCode", 0))

		// What `configward status` lists, and not Reports (nor Secrets).
		readable := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, Verbs: []string{"list"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"list"}},
		}
		grant := func(user string, rules []rbacv1.PolicyRule) string {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
			Expect(env.Client.Create(context.Background(), role)).To(Succeed())
			Expect(env.Client.Create(context.Background(), &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			})).To(Succeed())
			kubeconfig, err := env.UserKubeconfig(user)
			Expect(err).NotTo(HaveOccurred())
			return kubeconfig
		}

		res := env.Status("--kubeconfig", grant("status-viewer", readable), "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(MatchRegexp(`(?m)^Deployment/web\s+2/2\s+0\s+done\s`))
		Expect(res.Stderr).To(ContainSubstring("note: you may not list reports.openreports.io: each workload is compared with its pod template's hash"))
		Expect(res.Stderr).To(ContainSubstring("note: you may not list configdeliveries.configward.dev: which wave of a config delivery each workload is in does not show"))

		res = env.Status("--kubeconfig", grant("status-partial", readable[:2]), "-n", ns)
		Expect(res.ExitCode).To(Equal(2))
		Expect(res.Stderr).To(ContainSubstring(`listing jobs`))
		Expect(res.Stderr).To(ContainSubstring(`forbidden`))
	})
})

var _ = Describe("OpenReports", func() {
	It("carry rule findings on existing workloads and ConfigSchema violations of stored ConfigMaps, until they are fixed", func() {
		ns := rulesNamespace()
		leaky := func(env string) string {
			return workloadYAML("Deployment", ns, "api", `containers:
- name: app
  image: app
  volumeMounts: [{name: config, mountPath: /etc/app}]
`+env+`volumes: [{name: config, configMap: {name: app-config}}]
`)
		}
		apply(leaky("  env:\n  - name: DB_PASSWORD\n    valueFrom: {secretKeyRef: {name: db, key: password}}\n"))
		api := &appsv1.Deployment{}
		api.Namespace, api.Name = ns, "api"
		Eventually(reportOf(ns, api), 15*time.Second).Should(Equal([]string{
			"config-current pass Deployment/api",
			"secret-in-env warn Deployment/api",
		}))
		res := env.Kubectl("", "get", "reports", "-n", ns, "-o", "jsonpath={.items[*].results[*].message}")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(ContainSubstring(`Deployment ` + ns + `/api container "app" gets Secret "db" as env (spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef)`))
		Expect(res.Stdout).NotTo(ContainSubstring("not-printed"), "a Secret's value")

		By("a Report edited or deleted by someone else is put back")
		Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(api), api)).To(Succeed())
		name := report.Name(api.UID)
		res = env.Kubectl("", "patch", "report", name, "-n", ns, "--type=json", "-p", `[{"op": "replace", "path": "/results/1/result", "value": "pass"}]`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(reportOf(ns, api), 15*time.Second).Should(Equal([]string{
			"config-current pass Deployment/api",
			"secret-in-env warn Deployment/api",
		}))
		Expect(env.Kubectl("", "delete", "report", name, "-n", ns).ExitCode).To(Equal(0))
		Eventually(reportOf(ns, api), 15*time.Second).Should(Equal([]string{
			"config-current pass Deployment/api",
			"secret-in-env warn Deployment/api",
		}))

		By("a ConfigMap stored before the schema that it breaks")
		apply(literalConfigMap(ns, "settings", map[string]string{"app.yaml": "port: one"}, ""))
		apply(schemaYAML(ns, "ports", []string{"settings"}, "app.yaml", "yaml", `{"type": "object", "properties": {"port": {"type": "integer"}}}`, ""))
		settings := &corev1.ConfigMap{}
		settings.Namespace, settings.Name = ns, "settings"
		Eventually(reportOf(ns, settings), 15*time.Second).Should(Equal([]string{"config-schema fail ConfigMap/settings"}))

		By("fixing both removes the results")
		apply(leaky(""))
		Eventually(reportOf(ns, api), 15*time.Second).Should(Equal([]string{"config-current pass Deployment/api"}))
		apply(literalConfigMap(ns, "settings", map[string]string{"app.yaml": "port: 1"}, ""))
		Eventually(reportOf(ns, settings), 15*time.Second).Should(BeNil())
	})
})

var _ = Describe("OpenReports at scale", func() {
	It("never writes an object over the API server's size limit, with 2,000 workloads in one namespace", func() {
		const workloads = 2000
		ns := rulesNamespace()
		// Long names and a finding each: the worst a namespace-wide Report
		// would have to hold.
		name := func(i int) string { return fmt.Sprintf("%s-%04d", strings.Repeat("w", 57), i) } // 63, the longest a Deployment may have (its label)
		objs := make(chan client.Object, workloads)
		// Paused, without replicas: a Report is about the template, and two
		// thousand ReplicaSets and pods would keep kube-controller-manager
		// and kwok busy long after this spec (the spec after it took a
		// minute instead of five seconds).
		noPods := func(y string) string {
			return strings.Replace(y, "\nspec:\n  selector:", "\nspec:\n  replicas: 0\n  paused: true\n  selector:", 1)
		}
		for i := range workloads {
			objs <- decode(noPods(workloadYAML("Deployment", ns, name(i), `containers:
- name: app
  image: app
  env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]
  volumeMounts: [{name: config, mountPath: /etc/app}]
volumes: [{name: config, configMap: {name: app-config}}]
`)))
		}
		close(objs)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				defer GinkgoRecover()
				for o := range objs {
					Expect(env.Client.Create(context.Background(), o)).To(Succeed())
				}
			})
		}
		wg.Wait()

		reports := func() int {
			var list openreports.ReportList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			return len(list.Items)
		}
		Eventually(reports, 3*time.Minute, time.Second).Should(Equal(workloads))
		var list openreports.ReportList
		Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		largest := 0
		for i := range list.Items {
			Expect(list.Items[i].Results).To(HaveLen(2)) // config-current and secret-in-env
			js, err := json.Marshal(&list.Items[i])
			Expect(err).NotTo(HaveOccurred())
			largest = max(largest, len(js))
		}
		Expect(largest).To(BeNumerically("<", 1536*1024), "the API server's default limit for one object (etcd's 1.5 MiB)")
		AddReportEntry("largest Report (bytes)", largest)
		count, seconds := reconcileTime("drift")
		AddReportEntry("drift reconciles and their total time", fmt.Sprintf("%d, %.1f s", count, seconds))

		By("once the Reports are written, judging the namespace again writes nothing")
		generations := func() map[string]int64 {
			var list openreports.ReportList
			Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			out := map[string]int64{}
			for _, r := range list.Items {
				out[r.Name] = r.Generation
			}
			return out
		}
		// The first judgement may still be writing: wait until no Report
		// changes for two seconds.
		var settled map[string]int64
		Eventually(func() bool {
			settled = generations()
			time.Sleep(2 * time.Second)
			return reflect.DeepEqual(settled, generations())
		}, 2*time.Minute).Should(BeTrue())
		before, beforeSeconds := reconcileTime("drift")
		res := env.Kubectl("", "label", "deployment", name(0), "-n", ns, "touched=yes")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() uint64 { n, _ := reconcileTime("drift"); return n }, 30*time.Second).Should(BeNumerically(">", before))
		Consistently(generations, 3*time.Second).Should(Equal(settled))
		// Other namespaces' judgements may count too: an estimate.
		after, afterSeconds := reconcileTime("drift")
		AddReportEntry("steady-state drift reconcile of the namespace", fmt.Sprintf("%.0f ms", 1000*(afterSeconds-beforeSeconds)/float64(after-before)))
		res = env.Kubectl("", "get", "reps", "-n", ns, "--no-headers")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(strings.Count(res.Stdout, "\n")).To(Equal(workloads))
	})
})

// reconcileTime reads controller-runtime's histogram of a controller's
// reconciles: how many, and their total time.
func reconcileTime(controller string) (uint64, float64) {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// reportGeneration is the generation of a Deployment's Report: how many
// times its content was written.
func reportGeneration(ns, name string) int64 {
	var w appsv1.Deployment
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &w)).To(Succeed())
	var r openreports.Report
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: report.Name(w.UID)}, &r)).To(Succeed())
	return r.Generation
}
