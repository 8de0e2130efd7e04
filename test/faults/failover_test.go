package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// A rollout of many workloads is cut short by killing the controller that
// leads; the standby takes over. Every workload must be rolled, and rolled
// once: a second patch would restart its pods a second time.
var _ = Describe("the leading controller killed during a rollout of 100 workloads", func() {
	const workloads = 100

	It("leaves every workload rolled exactly once, by the standby that takes over", func() {
		ctx := context.Background()
		// Paced, so that the kill lands in the middle of the rollout.
		flags := []string{"--leader-elect=true", "--rollout-rate=10", "--rollout-batch-window=1s"}
		first, err := env.StartControllerBinary("controller-a", flags...)
		Expect(err).NotTo(HaveOccurred())
		second, err := env.StartControllerBinary("controller-b", flags...)
		Expect(err).NotTo(HaveOccurred())
		// The standby leads once the spec ends: it must not lead another
		// spec's controllers.
		DeferCleanup(func() { first.Kill(); second.Kill() })

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "failover-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shared"},
			Data: map[string]string{"level": "info"}})).To(Succeed())
		// Both webhook replicas must see the ConfigMap before the workloads
		// are stamped, or some would be stamped as reading a missing one
		// (and re-stamped once the controller sees that).
		// A spec before this one may have restarted etcd or the API server:
		// a webhook replica's watches then take a while to come back.
		Eventually(func() []string { return unknownTo(framework.LoadDeployment(ns.Name, "probe")) }, 60*time.Second, 100*time.Millisecond).Should(BeEmpty())
		for i := range workloads {
			Expect(env.Client.Create(ctx, framework.LoadDeployment(ns.Name, fmt.Sprintf("web-%03d", i)))).To(Succeed())
		}
		before := hashes(ctx, ns.Name)
		Expect(before).To(HaveLen(workloads))
		Expect(distinct(before)).To(HaveLen(1), "every workload starts with the same hash")

		var leader *framework.Process
		Eventually(func() *framework.Process { leader = leaderOf(first, second); return leader }, 60*time.Second, 250*time.Millisecond).ShouldNot(BeNil())
		standby := first
		if leader == first {
			standby = second
		}

		By("the shared ConfigMap changes; once the rollout is under way, the leader is killed")
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "shared"}, cm)).To(Succeed())
		cm.Data["level"] = "debug"
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		old := before[fmt.Sprintf("web-%03d", 0)]
		Eventually(func() int { return workloads - count(hashes(ctx, ns.Name), old) }, 60*time.Second, 100*time.Millisecond).
			Should(BeNumerically(">=", 10))
		leader.Kill()
		rolledByLeader := workloads - count(hashes(ctx, ns.Name), old)
		Expect(rolledByLeader).To(BeNumerically("<", workloads), "the rollout finished before the kill; the spec proves nothing")

		By("the standby takes the lease and finishes the rollout")
		Eventually(func() *framework.Process { return leaderOf(standby) }, 60*time.Second, 500*time.Millisecond).Should(Equal(standby))
		Eventually(func() int { return count(hashes(ctx, ns.Name), old) }, 120*time.Second, 500*time.Millisecond).Should(BeZero())
		after := hashes(ctx, ns.Name)
		Expect(distinct(after)).To(HaveLen(1), "every workload ends with the same, new hash")

		By("each workload's template changed exactly once")
		// Its generation counts the changes to its spec: created at 1, one
		// rollout makes it 2. The audit log cannot say this alone: a patch
		// in flight when the leader is killed is applied, but the API
		// server, its client gone, answers and logs it as failed.
		Expect(generations(ctx, ns.Name)).To(HaveEach(BeEquivalentTo(2)))
		Expect(generations(ctx, ns.Name)).To(HaveLen(workloads))
		Consistently(func() map[string]int64 { return generations(ctx, ns.Name) }, 5*time.Second, time.Second).Should(HaveEach(BeEquivalentTo(2)))
		// And no controller wrote any workload twice with success.
		Expect(controllerPatches(ns.Name)).NotTo(ContainElement(BeNumerically(">", 1)))
		var failed []string
		for _, ev := range controllerWrites(ns.Name) {
			if ev.ResponseStatus.Code != http.StatusOK {
				failed = append(failed, fmt.Sprintf("%s %s: %d", ev.Verb, ev.ObjectRef.Name, ev.ResponseStatus.Code))
			}
		}
		AddReportEntry("failover", fmt.Sprintf("%d of %d workloads rolled before the leader was killed; the standby rolled the rest; writes answered as failed: %v",
			rolledByLeader, workloads, failed))
	})
})

// unknownTo lists the webhook replicas that, asked directly as the API
// server asks them, judge the creation of d with a missing-config-ref
// warning: their cache does not hold the config d reads yet.
func unknownTo(d *appsv1.Deployment) []string {
	return replicasWhere("/validate-workloads", d, func(r *admissionv1.AdmissionResponse) bool {
		return slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.HasPrefix(w, "[missing-config-ref]") })
	})
}

// withoutRevisions lists the webhook replicas that stamp the creation of d
// with no config snapshots: they have not seen yet the ConfigPolicy that
// turns revisions on in d's namespace. A controller's re-stamp answered by
// such a replica loses the delivered revision's snapshots while keeping
// the hash, and the controller, seeing the hash current, never writes it
// again.
func withoutRevisions(d *appsv1.Deployment) []string {
	return replicasWhere("/mutate-config-hash", d, func(r *admissionv1.AdmissionResponse) bool {
		// A patch path escapes the annotation's slash ("~1"): look for its name.
		return !bytes.Contains(r.Patch, []byte(strings.TrimPrefix(v1alpha1.ConfigSnapshotsAnnotation, "configward.dev/")))
	})
}

// replicasWhere lists the webhook replicas whose answer at path to the
// creation of d, asked directly as the API server asks them, fails or
// satisfies bad.
func replicasWhere(path string, d *appsv1.Deployment, bad func(*admissionv1.AdmissionResponse) bool) []string {
	obj := d.DeepCopy()
	obj.APIVersion, obj.Kind = "apps/v1", "Deployment"
	raw, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "probe", Operation: admissionv1.Create, Namespace: d.Namespace, Name: d.Name,
			Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Object:   runtime.RawExtension{Raw: raw}}})
	Expect(err).NotTo(HaveOccurred())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: env.ClientTLS()}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	var out []string
	for _, p := range webhooks {
		var answer admissionv1.AdmissionReview
		resp, err := hc.Post("https://"+p.Addr+path, "application/json", bytes.NewReader(body))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&answer)
			resp.Body.Close()
		}
		if err != nil || answer.Response == nil || bad(answer.Response) {
			out = append(out, p.Addr)
		}
	}
	return out
}

// hashes is the config hash of every Deployment in ns, by name.
func hashes(ctx context.Context, ns string) map[string]string {
	var list appsv1.DeploymentList
	Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	out := map[string]string{}
	for _, d := range list.Items {
		out[d.Name] = d.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]
	}
	return out
}

// generations reads each Deployment's metadata.generation.
func generations(ctx context.Context, ns string) map[string]int64 {
	var list appsv1.DeploymentList
	Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	out := map[string]int64{}
	for _, d := range list.Items {
		out[d.Name] = d.Generation
	}
	return out
}

func distinct(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		out[v] = true
	}
	return out
}

func count(m map[string]string, value string) int {
	n := 0
	for _, v := range m {
		if v == value {
			n++
		}
	}
	return n
}

// leaderOf returns the process among ps that says it leads
// (controller-runtime's leader_election_master_status gauge), or nil.
func leaderOf(ps ...*framework.Process) *framework.Process {
	for _, p := range ps {
		resp, err := http.Get(p.MetricsURL)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
				return p
			}
		}
	}
	return nil
}

// controllerPatches counts, per Deployment of ns, the successful writes
// configward's controller made to it, from the API server's audit log.
func controllerPatches(ns string) map[string]int {
	out := map[string]int{}
	for _, ev := range controllerWrites(ns) {
		if ev.ResponseStatus.Code == http.StatusOK {
			out[ev.ObjectRef.Name]++
		}
	}
	return out
}

// controllerWrites lists the controllers' writes to the Deployments of
// namespace ns, whatever the API server answered.
func controllerWrites(ns string) []framework.AuditEvent {
	events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Resource == "deployments" &&
			ev.ObjectRef.Namespace == ns && ev.ObjectRef.Subresource == "" && (ev.Verb == "patch" || ev.Verb == "update")
	})
	Expect(err).NotTo(HaveOccurred())
	return events
}
