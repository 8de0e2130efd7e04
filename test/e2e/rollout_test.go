package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/workload"
)

const (
	rolloutBatchWindow = time.Second
	// unmanagedLabel on a namespace keeps configward's webhooks away from it,
	// which stands in for "created before configward was installed".
	unmanagedLabel = "e2e.configward.dev/unmanaged"
)

// Settle is how long "nothing happens" is watched for: longer than the
// batch window plus the controller's reaction time.
const settle = rolloutBatchWindow + 3*time.Second

func newNamespace(prefix string, labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// rolloutNamespace returns a namespace in which the config-hash webhook is
// demonstrably active.
func rolloutNamespace() string {
	ns := newNamespace("rollout", nil)
	Eventually(func() string {
		pod := podYAML(ns, "probe", "probe-config")
		obj := decode(pod)
		_ = env.Client.Create(context.Background(), obj, &client.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return obj.GetAnnotations()[v1alpha1.ConfigHashAnnotation]
	}, 30*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty(), "the config-hash webhook never answered")
	return ns
}

func decode(y string) client.Object {
	objs, err := decodeYAML(y)
	Expect(err).NotTo(HaveOccurred())
	Expect(objs).To(HaveLen(1))
	return objs[0]
}

func podYAML(ns, name, cm string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  containers:
  - name: app
    image: registry.example/app:1
    envFrom: [{configMapRef: {name: %s}}]
`, name, ns, cm)
}

func configMap(ns, name string, data map[string]string, annotations map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n", name, ns)
	if len(annotations) > 0 {
		b.WriteString("  annotations:\n")
		for k, v := range annotations {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	b.WriteString("data:\n")
	for k, v := range data {
		fmt.Fprintf(&b, "  %s: %q\n", k, v)
	}
	return b.String()
}

// podSpec is a pod spec consuming the given volumes/env, indented for a
// Deployment-like template.
func deployment(ns, name string, annotations string, spec string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
%s
spec:
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec:
%s`, name, ns, annotations, name, name, indent(spec, 6))
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

const envFromSpec = `containers:
- name: app
  image: registry.example/app:1
  envFrom: [{configMapRef: {name: %s}}]
`

func apply(manifests ...string) KubectlOK {
	res := env.Kubectl(strings.Join(manifests, "\n---\n"), "apply", "-f", "-")
	Expect(res.ExitCode).To(Equal(0), res.Stderr)
	return KubectlOK(res.Stdout)
}

// KubectlOK is kubectl's stdout of a successful command.
type KubectlOK string

func applyDir(files map[string]string) {
	dir := GinkgoT().TempDir()
	for name, content := range files {
		Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}
	res := env.Kubectl("", "apply", "-f", dir)
	Expect(res.ExitCode).To(Equal(0), res.Stderr)
}

type templateState struct {
	Generation int64
	Hash       string
}

func stateOf(kind, ns, name string) func() templateState {
	return func() templateState {
		reg := workload.Builtin()
		k, _ := reg.Resolve(kind, reg.Kinds())
		t, _ := reg.Type(k.GroupKind())
		w := t.Wrap(t.New())
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, w.Obj); err != nil {
			return templateState{Generation: -1}
		}
		h, _ := w.ConfigHash()
		return templateState{Generation: w.Obj.GetGeneration(), Hash: h}
	}
}

// expectedHash computes, from what is stored, the hash a template consuming
// the given ConfigMaps (name -> keys, nil for all) should carry.
func expectedHash(ns string, consumed map[string][]string) string {
	var entries []digest.Entry
	for name, keys := range consumed {
		var cm corev1.ConfigMap
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
		if err != nil {
			entries = append(entries, digest.Entry{Kind: "ConfigMap", Name: name, Missing: true})
			continue
		}
		entries = append(entries, digest.Entry{Kind: "ConfigMap", Name: name, Content: digest.Content(digest.KeyDigests(cm.Data, cm.BinaryData), keys)})
	}
	key, err := env.HashKey(context.Background())
	Expect(err).NotTo(HaveOccurred())
	return digest.PodTemplateHash(key, ns, entries)
}

func eventsFor(ns, name, reason string) []string {
	notes, err := env.EventNotes(context.Background(), ns, name, reason)
	Expect(err).NotTo(HaveOccurred())
	return notes
}

var _ = Describe("config-hash rollouts", func() {
	It("stamps the right hash when a Deployment and its ConfigMap are applied together, in either order", func() {
		ns := rolloutNamespace()
		for i, names := range [][2]string{{"a-deploy.yaml", "b-config.yaml"}, {"b-deploy.yaml", "a-config.yaml"}} {
			d, cm := fmt.Sprintf("web-%d", i), fmt.Sprintf("web-%d-config", i)
			applyDir(map[string]string{
				names[0]: deployment(ns, d, "", fmt.Sprintf(envFromSpec, cm)),
				names[1]: configMap(ns, cm, map[string]string{"LOG_LEVEL": "info"}, nil),
			})
			want := expectedHash(ns, map[string][]string{cm: nil})
			Eventually(stateOf("Deployment", ns, d), 15*time.Second).Should(HaveField("Hash", want), "order %v", names)
		}
	})

	It("rolls once per real change of consumed content, and never for anything else", func() {
		ns := rolloutNamespace()
		spec := `containers:
- name: app
  image: registry.example/app:1
  env:
  - name: FLAG
    valueFrom: {configMapKeyRef: {name: flags, key: consumed}}
  volumeMounts: [{name: hot, mountPath: /etc/hot}]
volumes: [{name: hot, configMap: {name: hot-config}}]
`
		manifests := func(consumed, other string, labels bool, hot string) []string {
			cm := configMap(ns, "flags", map[string]string{"consumed": consumed, "other": other}, nil)
			if labels {
				cm = strings.Replace(cm, "metadata:\n", "metadata:\n  labels: {team: payments}\n", 1)
			}
			return []string{
				deployment(ns, "api", "", spec), cm,
				configMap(ns, "hot-config", map[string]string{"x": hot}, map[string]string{"configward.dev/reload": "hot"}),
			}
		}
		apply(manifests("1", "a", false, "h1")...)
		Eventually(stateOf("Deployment", ns, "api"), 10*time.Second).Should(HaveField("Hash", expectedHash(ns, map[string][]string{"flags": {"consumed"}})))
		start := stateOf("Deployment", ns, "api")()

		By("re-applying unchanged manifests")
		apply(manifests("1", "a", false, "h1")...)
		By("changing a key the Deployment does not consume")
		apply(manifests("1", "b", false, "h1")...)
		By("changing metadata only")
		apply(manifests("1", "b", true, "h1")...)
		By("changing a hot-reloaded ConfigMap")
		apply(manifests("1", "b", true, "h2")...)
		Consistently(stateOf("Deployment", ns, "api"), settle).Should(Equal(start))

		By("changing the consumed key")
		apply(manifests("2", "b", true, "h2")...)
		want := expectedHash(ns, map[string][]string{"flags": {"consumed"}})
		Expect(want).NotTo(Equal(start.Hash))
		rolled := templateState{Generation: start.Generation + 1, Hash: want}
		Eventually(stateOf("Deployment", ns, "api"), 10*time.Second).Should(Equal(rolled))
		Consistently(stateOf("Deployment", ns, "api"), settle).Should(Equal(rolled))
		Eventually(func() []string { return eventsFor(ns, "api", "ConfigChanged") }, 10*time.Second).Should(ContainElement(ContainSubstring("ConfigMap/flags changed")))
	})

	It("rolls once when three ConfigMaps of one Deployment change in one apply", func() {
		ns := rolloutNamespace()
		spec := `containers:
- name: app
  image: registry.example/app:1
  envFrom: [{configMapRef: {name: one}}, {configMapRef: {name: two}}]
  volumeMounts: [{name: three, mountPath: /etc/three}]
volumes: [{name: three, configMap: {name: three}}]
`
		cms := func(v string) []string {
			return []string{
				configMap(ns, "one", map[string]string{"k": v}, nil),
				configMap(ns, "two", map[string]string{"k": v}, nil),
				configMap(ns, "three", map[string]string{"k": v}, nil),
			}
		}
		all := map[string][]string{"one": nil, "two": nil, "three": nil}
		// Applied with its config, the Deployment could be stamped before the
		// webhook's cache holds the config, and re-stamped once (a roll
		// this spec does not count).
		applyWhenSeen(ns, cms("v1"), all, deployment(ns, "multi", "", spec))
		Eventually(stateOf("Deployment", ns, "multi"), 10*time.Second).Should(Equal(templateState{Generation: 1, Hash: expectedHash(ns, all)}))

		apply(cms("v2")...)
		want := templateState{Generation: 2, Hash: expectedHash(ns, all)}
		Eventually(stateOf("Deployment", ns, "multi"), 10*time.Second).Should(Equal(want))
		Consistently(stateOf("Deployment", ns, "multi"), settle).Should(Equal(want))
		Expect(eventsFor(ns, "multi", "ConfigChanged")).To(ConsistOf(
			ContainSubstring("ConfigMap/one, ConfigMap/three, ConfigMap/two changed")))
	})

	It("rolls StatefulSets, DaemonSets and CronJobs on Secret changes, and tells Jobs it cannot", func() {
		ns := rolloutNamespace()
		podSpec := `containers:
- name: app
  image: registry.example/app:1
  volumeMounts: [{name: creds, mountPath: /etc/creds}]
volumes: [{name: creds, secret: {secretName: creds}}]
restartPolicy: OnFailure
`
		secret := func(v string) string {
			return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: %s}\nstringData: {password: %q}\n", ns, v)
		}
		sts := fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: %s}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
%s`, ns, indent(strings.Replace(podSpec, "restartPolicy: OnFailure\n", "", 1), 6))
		ds := strings.NewReplacer("StatefulSet", "DaemonSet", "name: db", "name: agent", "app: db", "app: agent", "  serviceName: db\n", "").Replace(sts)
		cron := fmt.Sprintf(`apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: %s}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
%s`, ns, indent(podSpec, 10))
		job := fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: %s}
spec:
  template:
    spec:
%s`, ns, indent(podSpec, 6))
		apply(secret("s3cret-1"), sts, ds, cron, job)

		kinds := map[string]string{"StatefulSet": "db", "DaemonSet": "agent", "CronJob": "nightly", "Job": "once"}
		before := map[string]templateState{}
		for kind, name := range kinds {
			Eventually(stateOf(kind, ns, name), 10*time.Second).Should(HaveField("Hash", HavePrefix("hmac-sha256:")), kind)
			before[kind] = stateOf(kind, ns, name)()
		}

		apply(secret("s3cret-2"))
		for _, kind := range []string{"StatefulSet", "DaemonSet", "CronJob"} {
			Eventually(stateOf(kind, ns, kinds[kind]), 10*time.Second).Should(SatisfyAll(
				HaveField("Generation", before[kind].Generation+1),
				HaveField("Hash", Not(Equal(before[kind].Hash)))), kind)
		}
		Eventually(func() []string { return eventsFor(ns, "once", "ConfigChangedNotRolled") }, 10*time.Second).
			Should(ConsistOf(ContainSubstring("Secret/creds changed, but a Job's pod template cannot change")))
		Expect(stateOf("Job", ns, "once")()).To(Equal(before["Job"]))
		res := env.Kubectl("", "label", "job/once", "-n", ns, "team=payments")
		Expect(res.ExitCode).To(Equal(0), "a later write of the Job keeps the hash it was created with (its template is immutable): %s", res.Stderr)
		Expect(stateOf("Job", ns, "once")()).To(Equal(before["Job"]))

		var cj batchv1.CronJob
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "nightly"}, &cj)).To(Succeed())
		Expect(cj.Spec.JobTemplate.Spec.Template.Annotations).To(HaveKey(v1alpha1.ConfigHashAnnotation))
		var jobs batchv1.JobList
		Expect(env.Client.List(context.Background(), &jobs, client.InNamespace(ns))).To(Succeed())
		Expect(jobs.Items).To(HaveLen(1), "re-stamping a CronJob must not run anything")
	})

	It("leaves opted-out workloads alone", func() {
		ns := rolloutNamespace()
		optOut := "  annotations: {configward.dev/rollout: disabled}"
		apply(configMap(ns, "cfg", map[string]string{"k": "1"}, nil), deployment(ns, "legacy", optOut, fmt.Sprintf(envFromSpec, "cfg")))
		Consistently(stateOf("Deployment", ns, "legacy"), 2*time.Second).Should(Equal(templateState{Generation: 1}))
		apply(configMap(ns, "cfg", map[string]string{"k": "2"}, nil))
		Consistently(stateOf("Deployment", ns, "legacy"), settle).Should(Equal(templateState{Generation: 1}))
	})

	It("restarts nothing on install: a workload that predates configward is stamped only when its config changes", func() {
		ns := newNamespace("preexisting", map[string]string{unmanagedLabel: "true"})
		// The config exists a second before the workload, as config a
		// workload predates configward with does: created in the same
		// second, the order is unknown (creation times are to the second),
		// and configward counts the creation as the change it may be
		// (rollouts.consumer.startedWithout) whenever the ConfigMap's event
		// reaches it after the Deployment's, as under load.
		apply(configMap(ns, "cfg", map[string]string{"k": "1"}, nil))
		var cfg corev1.ConfigMap
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cfg"}, &cfg)).To(Succeed())
		time.Sleep(time.Until(cfg.CreationTimestamp.Truncate(time.Second).Add(time.Second)))
		apply(deployment(ns, "old", "", fmt.Sprintf(envFromSpec, "cfg")))
		Expect(stateOf("Deployment", ns, "old")()).To(Equal(templateState{Generation: 1}))

		By("configward now governs the namespace")
		var n corev1.Namespace
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &n)).To(Succeed())
		delete(n.Labels, unmanagedLabel)
		Expect(env.Client.Update(context.Background(), &n)).To(Succeed())
		Consistently(stateOf("Deployment", ns, "old"), settle).Should(Equal(templateState{Generation: 1}))

		By("its config changes")
		apply(configMap(ns, "cfg", map[string]string{"k": "2"}, nil))
		Eventually(stateOf("Deployment", ns, "old"), 10*time.Second).Should(Equal(
			templateState{Generation: 2, Hash: expectedHash(ns, map[string][]string{"cfg": nil})}))
	})
})
