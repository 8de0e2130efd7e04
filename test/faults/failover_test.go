package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
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

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "failover-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shared"},
			Data: map[string]string{"level": "info"}})).To(Succeed())
		// The webhook must see the ConfigMap before the workloads are
		// stamped, or some would be re-stamped once it does.
		Eventually(func() string { return stampedHash(ctx, deployment(ns.Name, "probe"), true) }, 15*time.Second, 100*time.Millisecond).ShouldNot(BeEmpty())
		for i := range workloads {
			Expect(env.Client.Create(ctx, deployment(ns.Name, fmt.Sprintf("web-%03d", i)))).To(Succeed())
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

		By("each workload was patched by a controller exactly once")
		// The API server writes a request's audit entry after its response:
		// the last patch may be seen in its object before its entry is in
		// the log.
		patchedOnce := SatisfyAll(HaveLen(workloads), Not(ContainElement(BeNumerically(">", 1))))
		Eventually(func() map[string]int { return controllerPatches(ns.Name) }, 10*time.Second, 200*time.Millisecond).Should(patchedOnce)
		Consistently(func() map[string]int { return controllerPatches(ns.Name) }, 5*time.Second, time.Second).Should(patchedOnce)
		AddReportEntry("failover", fmt.Sprintf("%d of %d workloads rolled before the leader was killed; the standby rolled the rest", rolledByLeader, workloads))
	})
})

// deployment is a Deployment of one pod mounting ConfigMap shared.
func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}},
				},
			},
		},
	}
}

// stampedHash creates d (as a dry run when asked) and returns the hash the
// webhook stamped on it.
func stampedHash(ctx context.Context, d *appsv1.Deployment, dryRun bool) string {
	var opts []client.CreateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := env.Client.Create(ctx, d, opts...); err != nil {
		return ""
	}
	return d.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]
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
	events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return ev.User.Username == framework.ControllerUser && ev.ObjectRef.Resource == "deployments" &&
			ev.ObjectRef.Namespace == ns && ev.ObjectRef.Subresource == "" &&
			(ev.Verb == "patch" || ev.Verb == "update") && ev.ResponseStatus.Code == http.StatusOK
	})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]int{}
	for _, ev := range events {
		out[ev.ObjectRef.Name]++
	}
	return out
}
