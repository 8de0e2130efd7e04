package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/test/framework"
)

// fleetPods is how many pods report one change.
const fleetPods = 1000

// A thousand pods report one change of hot config: the webhook writes
// each pod's status once and nothing shared per report, the controller
// rewrites the workload's Report a few times, not per pod; and a
// controller stopped while the reports are taken (a leader failing over)
// finds everything in the pods' conditions when it comes back.
var _ = Describe("the reload agent's reports from a fleet", func() {
	It("takes one change from 1,000 pods with one status write per pod and a few Report writes, and a controller restarted meanwhile recomputes it", func() {
		ns := rolloutNamespace()
		data := map[string]string{"flags.yaml": "beta: false"}
		apply(hotConfigMap(ns, "flags", data))
		awaitHotSeen(ns, "flags")
		// The pods wait for a node that never comes: kwok's nodes hold a
		// few hundred, and what is judged here is their reports.
		fleet := strings.Replace(agentWorkload("Deployment", ns, "fleet", "watch"), "replicas: 1", fmt.Sprintf("replicas: %d", fleetPods), 1)
		fleet = strings.Replace(fleet, "  restartPolicy: Always", "  restartPolicy: Always\n      nodeSelector: {configward-test/node: nowhere}", 1)
		apply(fleet)
		Eventually(func() int { return len(podsOf(ns, "fleet")()) }, 4*time.Minute, time.Second).Should(Equal(fleetPods))
		pods := podsOf(ns, "fleet")()
		tokens := make([]string, len(pods))
		inParallel(len(pods), 16, func(i int) (err error) {
			tokens[i], err = env.PodToken(context.Background(), &pods[i], reload.Audience)
			return err
		})
		reportAll := func(content map[string]string) time.Duration {
			start := time.Now()
			inParallel(len(pods), 32, func(i int) error {
				status, body, err := env.PostReport(tokens[i], agentReport(tokens[i], content, reload.Applied, "reloaded"))
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("%d %s", status, body)
				}
				if err != nil {
					return fmt.Errorf("report of pod %s: %w", pods[i].Name, err)
				}
				return nil
			})
			return time.Since(start)
		}
		web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}

		By("the first reports arrive while the controller is down, as between a leader's end and the next's start")
		restartController(suiteController, func() {
			took := reportAll(data)
			AddReportEntry("first reports", fmt.Sprintf("%d reports taken in %s", fleetPods, took.Round(time.Millisecond)))
		})
		Eventually(reloadStatus(ns), 2*time.Minute, time.Second).Should(HaveKeyWithValue("ConfigMap/flags", HaveKeyWithValue("applied", fleetPods)))
		Eventually(reportOf(ns, web), time.Minute).Should(ContainElement("config-reload pass Deployment/fleet"))

		By("one change, reported by every pod")
		since := time.Now()
		changed := map[string]string{"flags.yaml": "beta: true"}
		apply(hotConfigMap(ns, "flags", changed))
		Eventually(reloadStatus(ns), time.Minute, time.Second).Should(HaveKeyWithValue("ConfigMap/flags", HaveKeyWithValue("older", fleetPods)))
		took := reportAll(changed)
		Eventually(reloadStatus(ns), 2*time.Minute, time.Second).Should(HaveKeyWithValue("ConfigMap/flags", HaveKeyWithValue("applied", fleetPods)))
		Eventually(reportOf(ns, web), time.Minute).Should(ContainElement("config-reload pass Deployment/fleet"))

		statusWrites, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.ObjectRef.Namespace == ns && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "status" &&
				ev.Verb == "patch" && ev.User.Username != "system:kube-scheduler" && ev.StageTimestamp.After(since) &&
				ev.ResponseStatus.Code == http.StatusOK
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(statusWrites).To(HaveLen(fleetPods), "one write per pod: its own status")
		reportWrites, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
			return ev.ObjectRef.Namespace == ns && ev.ObjectRef.Resource == "reports" && ev.ObjectRef.Name == report.Name(web.UID) &&
				ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" && ev.StageTimestamp.After(since)
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(len(reportWrites)).To(BeNumerically("<=", 3), "the Report says where the pods stand as a whole: pass, warn, pass")
		AddReportEntry("one change", fmt.Sprintf("%d reports taken in %s: %d pod status writes, %d Report writes", fleetPods, took.Round(time.Millisecond),
			len(statusWrites), len(reportWrites)))
	})
})

// inParallel runs f for 0..n-1 on workers goroutines and fails the spec
// with the first error; every index runs, so none waits on a failed one.
func inParallel(n, workers int, f func(i int) error) {
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	Expect(<-errs).NotTo(HaveOccurred())
}
