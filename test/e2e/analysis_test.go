package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Deliveries gated on what the application says (analysis checks against
// Prometheus or a webhook, the bake after the last wave, what a
// break-glass write asks of a delivery) are decisions of the delivery
// controller, specified in the controller tier with a real Prometheus
// (test/controllers/analysis_test.go). What stays here needs configward's
// webhooks: change control lets a break-glass write of delivered config
// through, warns about and refuses what it asks of the delivery, and the
// record it leads to is configward's alone.
var _ = Describe("analysis of deliveries", func() {
	It("answers break-glass writes of delivered config at admission: an immediate delivery needs a new reason, is warned about and recorded; nobody changes what a record saw", func() {
		ns := newNamespace("delivery", map[string]string{policyLabel: "breakglass", changeControlLabel: "on"})
		applyPolicy(policyYAML("delivery-breakglass", "breakglass", `revisions: {enabled: true}
delivery:
  waves:
  - name: canary
    selector: {matchLabels: {configward.dev/wave: canary}}
    approval: true
  - name: rest
    approval: true
  soakSeconds: 1
`))
		Eventually(policyReady("delivery-breakglass"), 10*time.Second).Should(HaveField("Status", metav1.ConditionTrue))
		asPipeline(configMap(ns, "cfg", map[string]string{"level": "info"}, nil))
		apply(waveDeployment(ns, "app-0", true, "cfg"), waveDeployment(ns, "app-1", false, "cfg"))
		rolloutStatus(ns, "deployment/app-0")
		rolloutStatus(ns, "deployment/app-1")
		Eventually(func() int {
			return as(human, "", "-n", ns, "patch", "configmap", "cfg", "--dry-run=server", "--type=merge", "-p", `{"data":{"level":"x"}}`).ExitCode
		}, 30*time.Second, 200*time.Millisecond).Should(Equal(1), "the change-control webhook never enforced")

		By("a break-glass write is let through and its delivery skips approvals")
		res := as(human, "", "-n", ns, "patch", "configmap", "cfg", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-9 hotfix"}},"data":{"level":"debug"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		d := deliveries(ns, "cfg")[0]
		Expect(d.Spec.BreakGlass).To(Equal(&v1alpha1.BreakGlassDelivery{Reason: "INC-9 hotfix"}))

		By("nobody but configward changes what a record saw")
		res = env.Kubectl("", "-n", ns, "annotate", "configdelivery", d.Name, "--overwrite", "configward.dev/break-glass-seen=other")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("configward.dev/ annotations may not be changed"))

		By("the reason was sealed to the content of the write that set it, and a dry run seals nothing")
		sealOf := func() string {
			return env.Kubectl("", "-n", ns, "get", "configmap", "cfg", "-o", `jsonpath={.metadata.annotations.configward\.dev/break-glass-seal}`).Stdout
		}
		sealed := sealOf()
		Expect(sealed).To(HavePrefix("v1:"))
		res = as(human, "", "-n", ns, "patch", "configmap", "cfg", "--dry-run=server", "-o", "jsonpath={.metadata.annotations.configward\\.dev/break-glass-seal}", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-9b dry"}},"data":{"level":"dry"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stdout).To(And(HavePrefix("v1:"), Not(Equal(sealed))), "the dry run's answer carries its own seal")
		Expect(sealOf()).To(Equal(sealed), "and nothing of it is kept")

		By("asking for an immediate delivery needs a new break-glass reason")
		res = as(human, "", "-n", ns, "annotate", "configmap", "cfg", "configward.dev/break-glass-delivery=Immediate")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("outside the pipeline"))

		By("with a new reason and the immediate request: warned, and the record carries it")
		res = as(human, "", "-n", ns, "patch", "configmap", "cfg", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-10 revert","configward.dev/break-glass-delivery":"Immediate"}},"data":{"level":"trace"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("immediate delivery asked for"))
		// The delivery before ended the same way: wait for the new one first.
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 30*time.Second).Should(Equal(2))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		Expect(deliveries(ns, "cfg")[1].Spec.BreakGlass).To(Equal(&v1alpha1.BreakGlassDelivery{Reason: "INC-10 revert", Immediate: true}))

		By("a new reason and the immediate request with no content change start nothing, and arm nothing for the pipeline's later change")
		res = as(human, "", "-n", ns, "patch", "configmap", "cfg", "--type=merge", "-p",
			`{"metadata":{"annotations":{"configward.dev/break-glass":"INC-11 pre-armed","configward.dev/break-glass-delivery":"Immediate"}}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Consistently(func() int { return len(deliveries(ns, "cfg")) }, 5*time.Second).Should(Equal(2))
		asPipeline(configMap(ns, "cfg", map[string]string{"level": "warn"}, map[string]string{
			"configward.dev/break-glass": "INC-11 pre-armed", "configward.dev/break-glass-delivery": "Immediate"}))
		Eventually(func() int { return len(deliveries(ns, "cfg")) }, 30*time.Second).Should(Equal(3))
		Eventually(latestDelivery(ns, "cfg"), 30*time.Second, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@canary"))
		Expect(deliveries(ns, "cfg")[2].Spec.BreakGlass).To(BeNil())
	})
})
