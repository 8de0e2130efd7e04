package security

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/test/framework"
)

// canary makes a value no code or data of configward could contain by
// chance.
func canary(where string) string { return "CANARY-7f3a9c-" + where }

// canaries is every canary value the spec puts into the cluster.
var canaries []string

func newCanary(where string) string {
	c := canary(where)
	canaries = append(canaries, c)
	return c
}

var _ = Describe("no Secret value leaves configward", Ordered, func() {
	const ns = "canary"

	It("drives every webhook and the controller through Secrets and pods full of canary values", func() {
		kubectl("", "", "create", "namespace", ns)
		policy := fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: canary}\nspec:\n"+
			"  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}\n  pipeline: {serviceAccounts: [ci/deployer]}\n"+
			"  rules: {secret-file-mode: {action: Audit}}\n  revisions: {enabled: true, secrets: true}\n", ns)
		Expect(kubectl("", policy, "apply", "-f", "-").ExitCode).To(Equal(0))
		Eventually(func() string {
			return kubectl("", "", "get", "namespace", ns, "-o", `jsonpath={.metadata.labels.configward\.dev/change-control}`).Stdout
		}, 30*time.Second, 200*time.Millisecond).Should(Equal("governed"))

		By("the pipeline creates Secrets: data, stringData, a whole-object copy in an annotation, kubectl's last-applied configuration")
		res := kubectl(pipeline, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: %s
  annotations: {backup.example.com/object: '{"data":{"password":"%s"}}'}
data: {password: %s}
stringData: {token: %s}
`, ns, newCanary("annotation-copy"), base64.StdEncoding.EncodeToString([]byte(newCanary("data"))), newCanary("string-data")), "create", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		res = kubectl(pipeline, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: env-db, namespace: %s}\nstringData: {password: %s}\n",
			ns, newCanary("last-applied")), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)

		By("workloads read them through env, envFrom and a volume readable by others, and carry inline env values")
		res = kubectl("", fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: %[1]s
  annotations: {configward.dev/exempt.secret-in-env: "legacy image"}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        env:
        - {name: INLINE, value: %[2]s}
        - name: PASSWORD
          valueFrom: {secretKeyRef: {name: db, key: password}}
        envFrom: [{secretRef: {name: env-db}}]
        volumeMounts: [{name: creds, mountPath: /etc/creds}]
      volumes: [{name: creds, secret: {secretName: db}}]
---
apiVersion: v1
kind: Pod
metadata: {name: runner, namespace: %[1]s}
spec:
  containers:
  - name: app
    image: registry.example/app:1
    env: [{name: INLINE, value: %[3]s}]
    envFrom: [{secretRef: {name: env-db}}]
`, ns, newCanary("deployment-env"), newCanary("pod-env")), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("[secret-in-env]"), "the warnings this spec searches were given")

		By("the pipeline changes a value: the Deployment rolls")
		before := kubectl("", "", "get", "deployment", "api", "-n", ns, "-o", `jsonpath={.metadata.generation}`).Stdout
		res = kubectl(pipeline, "", "patch", "secret", "db", "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"stringData":{"password":%q}}`, newCanary("pipeline-update")))
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() string {
			return kubectl("", "", "get", "deployment", "api", "-n", ns, "-o", `jsonpath={.metadata.generation}`).Stdout
		}, 30*time.Second, 250*time.Millisecond).ShouldNot(Equal(before), "the rollout controller did not roll the Deployment")

		By("with revisions, the controller copies the Secrets the workload reads into snapshots: values read from the API server, never kept")
		Eventually(func() string {
			return kubectl("", "", "get", "secrets", "-n", ns, "-l", "configward.dev/snapshot=true", "-o", `jsonpath={range .items[*]}{.metadata.annotations.configward\.dev/snapshot-of}{" "}{end}`).Stdout
		}, 60*time.Second, 250*time.Millisecond).Should(And(ContainSubstring("db "), ContainSubstring("env-db ")))

		By("a human's edit is refused; a break-glass edit is let through and recorded")
		res = kubectl(human, "", "patch", "secret", "db", "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"stringData":{"password":%q}}`, newCanary("denied")))
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring("[out-of-pipeline-edit]"))
		res = kubectl(human, "", "patch", "secret", "db", "-n", ns, "--type=merge", "-p",
			fmt.Sprintf(`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-1"}},"stringData":{"password":%q}}`, newCanary("break-glass")))
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(func() string {
			return kubectl("", "", "get", "events", "-n", ns, "--field-selector", "reason=BreakGlass").Stdout
		}, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring("INC-1"))

		By("a reload agent reports on a hot Secret, and its program quotes the value it could not take")
		res = kubectl(pipeline, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: hot-creds, namespace: %s, annotations: {configward.dev/reload: hot}}\nstringData: {password: %s}\n",
			ns, newCanary("hot-secret")), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		res = kubectl("", fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: reloader, namespace: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: reloader}}
  template:
    metadata: {labels: {app: reloader}, annotations: {configward.dev/reload-agent: "http://localhost:8080/-/reload"}}
    spec:
      containers:
      - {name: app, image: registry.example/app:1, volumeMounts: [{name: creds, mountPath: /etc/creds}]}
      volumes: [{name: creds, secret: {secretName: hot-creds}}]
`, ns), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		var pod corev1.Pod
		Eventually(func() []string {
			var pods corev1.PodList
			Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": "reloader"})).To(Succeed())
			var agents []string
			for _, p := range pods.Items {
				pod = p
				for _, c := range p.Spec.InitContainers {
					agents = append(agents, c.Name)
				}
			}
			return agents
		}, 60*time.Second, 250*time.Millisecond).Should(ContainElement("configward-agent"))
		token, err := env.PodToken(context.Background(), &pod, reload.Audience)
		Expect(err).NotTo(HaveOccurred())
		hot := map[string]string{"password": canary("hot-secret")}
		// As the agent sends it: where a hot Secret is among its config,
		// the program's words stay in the pod (the agent's and the
		// webhook's own tests hold both to it).
		status, body, err := env.PostReportTo(agents, token, framework.AgentReport(token, "Secret/hot-creds", hot, reload.Rejected, reload.Withheld))
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), body)
		Eventually(func() string {
			Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
			for _, c := range pod.Status.Conditions {
				if c.Type == v1alpha1.ReloadConditionType {
					return c.Reason
				}
			}
			return ""
		}, 30*time.Second, 250*time.Millisecond).Should(Equal(reload.ReasonRejected))
		bin, err := framework.Binary()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			out, _ := exec.Command(bin, "status", "-n", ns, "--kubeconfig", env.Kubeconfig, "-o", "json").CombinedOutput()
			transcript.Write(out)
			return string(out)
		}, 60*time.Second, time.Second).Should(ContainSubstring(`"rejected": 1`))

		By("configward check reads the same kind of manifests offline")
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\nstringData: {password: %s}\n---\n%s",
			newCanary("check"), "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\nspec:\n  containers:\n  - {name: a, image: a, env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]}\n")), 0o600)).To(Succeed())
		out, _ := exec.Command(bin, "check", "-f", dir, "-o", "json").CombinedOutput()
		Expect(string(out)).To(ContainSubstring("secret-in-env"))
		transcript.Write(out)
	})

	It("leaves no canary in kubectl's output, Events, status, metrics, logs, the audit log or configward's live heap", func() {
		artifacts := map[string][]byte{"kubectl output, warnings and denials": []byte(transcript.String())}
		artifacts["Events"] = []byte(env.Kubectl("", "get", "events", "-A", "-o", "yaml").Stdout)
		artifacts["ConfigPolicy and ConfigSchema status"] = []byte(env.Kubectl("", "get", "configpolicies,configschemas", "-A", "-o", "yaml").Stdout)
		// The pods' status only: their specs carry the inline env canaries
		// this spec wrote there itself.
		artifacts["pods' status (reload conditions) and Reports"] = []byte(env.Kubectl("", "get", "pods", "-A", "-o", "jsonpath={.items[*].status}").Stdout +
			env.Kubectl("", "get", "reports.openreports.io", "-A", "-o", "yaml").Stdout)
		for name, p := range map[string]*framework.Process{"webhook": webhook, "controller": controller} {
			artifacts[name+" metrics"] = get(p.MetricsURL)
			log, err := os.ReadFile(p.Log)
			Expect(err).NotTo(HaveOccurred())
			artifacts[name+" log"] = log
		}
		audit, err := os.ReadFile(env.AuditLog)
		Expect(err).NotTo(HaveOccurred())
		artifacts["API server audit log"] = audit

		Expect(canaries).To(HaveLen(11))
		var leaks []string
		for what, data := range artifacts {
			Expect(data).NotTo(BeEmpty(), what)
			for _, form := range canaryForms() {
				if i := bytes.Index(data, form); i >= 0 {
					leaks = append(leaks, fmt.Sprintf("%s holds %q in %q", what, form, around(data, i, len(form))))
				}
			}
		}

		By("the API server's connections to the webhook idle out, and the processes' live heaps are read")
		waitQuiet(webhook)
		By("new connections take the read buffers net/http pooled when those connections closed: their short requests must not leave the old ones' tails in them")
		for _, c := range reusePooledReadBuffers(webhook.Addr, 8) {
			defer c.Close()
		}
		for _, p := range []*framework.Process{webhook, controller} {
			objects, err := readHeapDump(heapDump(p))
			Expect(err).NotTo(HaveOccurred())
			Expect(len(objects)).To(BeNumerically(">", 10000), "a heap dump of %s with so few objects is not the live heap", p.Name)
			for _, o := range objects {
				for _, form := range canaryForms() {
					i := bytes.Index(o.contents, form)
					switch {
					case i < 0:
						continue
					case receiveBuffer(o):
						fmt.Fprintf(GinkgoWriter, "%s: %q in a receive buffer of the API server connection (%d bytes, allocated by %s)\n",
							p.Name, form, len(o.contents), origin(o))
					default:
						leaks = append(leaks, fmt.Sprintf("%s's live heap holds %q in a %d-byte object allocated by\n\t%s\nnext to %q",
							p.Name, form, len(o.contents), strings.Join(o.allocatedBy, "\n\t"), around(o.contents, i, len(form))))
					}
				}
			}
		}
		Expect(leaks).To(BeEmpty(), "%s", strings.Join(leaks, "\n"))
	})
})

// reusePooledReadBuffers opens n connections to addr, each sending one
// short request and staying open: each takes a read buffer from net/http's
// pool, where the closed connections' buffers went.
func reusePooledReadBuffers(addr string, n int) []*tls.Conn {
	var conns []*tls.Conn
	for range n {
		c, err := tls.Dial("tcp", addr, env.ClientTLS())
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n"))
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		conns = append(conns, c)
	}
	return conns
}

// canaryForms are the canaries as given, as base64 (the form a Secret's
// data takes in JSON), and as unkeyed digests, the SHA-256 and the key
// digest configward keeps in memory: anyone holding one could test a
// guess of the value against it.
func canaryForms() [][]byte {
	var forms [][]byte
	for _, c := range canaries {
		sum := sha256.Sum256([]byte(c))
		forms = append(forms, []byte(c), []byte(base64.StdEncoding.EncodeToString([]byte(c))), []byte(hex.EncodeToString(sum[:])),
			[]byte(digest.SecretKeyDigests(map[string][]byte{"k": []byte(c)})["k"]))
	}
	return forms
}

// origin is the first function outside the runtime that allocated o.
func origin(o heapObject) string {
	for _, f := range o.allocatedBy {
		if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "sync.") {
			return f
		}
	}
	return "?"
}

// around is the printable text next to a leak, so a failure says which
// structure held it.
func around(data []byte, at, n int) string {
	from, to := max(at-160, 0), min(at+n+160, len(data))
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '.'
		}
		return r
	}, string(data[from:to]))
}

// waitQuiet returns once the API server has sent p no review for longer
// than its idle timeout, so that its connections to p have idled out, as on
// a quiet cluster. The cluster's controllers go on calling for a while
// after the spec's own writes (ReplicaSets, pods), longer on a loaded
// machine; a connection that is still in use keeps the bytes of the last
// records it carried in Go's TLS buffer, canaries and all, and closing it
// when idle is what bounds that (webhookserver.Options.IdleTimeout).
func waitQuiet(p *framework.Process) {
	before := reviewsAnswered(p)
	Eventually(func() int {
		time.Sleep(idleTimeout + time.Second)
		now := reviewsAnswered(p)
		answered := now - before
		before = now
		if answered > 0 {
			fmt.Fprintf(GinkgoWriter, "%s answered %v reviews in the last %v; waiting for quiet\n", p.Name, answered, idleTimeout+time.Second)
		}
		return answered
	}, 2*time.Minute).Should(BeZero(), "the API server never stopped calling %s", p.Name)
}

// reviewsAnswered is how many reviews p has answered, over its webhooks.
func reviewsAnswered(p *framework.Process) int {
	n, err := framework.MetricSum(p.MetricsURL, "configward_webhook_reviews_total")
	Expect(err).NotTo(HaveOccurred())
	return n
}

func get(url string) []byte {
	resp, err := http.Get(url)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// heapDump has the process write a dump of its live heap (--heap-dump-file,
// on SIGUSR1) and reads it.
func heapDump(p *framework.Process) []byte {
	_ = os.Remove(p.HeapDump)
	Expect(syscall.Kill(p.PID(), syscall.SIGUSR1)).To(Succeed())
	var dump []byte
	Eventually(func() int {
		dump, _ = os.ReadFile(p.HeapDump)
		return len(dump)
	}, 60*time.Second, 250*time.Millisecond).Should(BeNumerically(">", 1<<20), "no heap dump from %s", p.Name)
	return dump
}
