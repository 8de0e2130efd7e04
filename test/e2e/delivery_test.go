package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// These specs deliver a change of one ConfigMap to ten Deployments in
// waves, on the whole cluster: kube-controller-manager rolls each
// Deployment, kwok runs the pods, and configward's webhook stamps and pins
// what it admits.

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

// deliveries lists the ConfigDeliveries of ConfigMap cm in ns, oldest
// first.
func deliveries(ns, cm string) []v1alpha1.ConfigDelivery {
	ds, err := env.Deliveries(context.Background(), ns, cm)
	Expect(err).NotTo(HaveOccurred())
	return ds
}

// latestDelivery is the state of the newest delivery of cm in ns, with its
// reason and current wave ("State/Reason@wave").
func latestDelivery(ns, cm string) func() string {
	return func() string { return framework.DeliveryState(deliveries(ns, cm)) }
}

// snapshotOfCfg is the snapshot of ConfigMap cfg a Deployment's template
// names.
func snapshotOfCfg(ns, name string) string {
	var d appsv1.Deployment
	Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return d.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
}

// The delivery's decisions (placement, gates, soaks, deadlines, approvals,
// rollbacks, restarts of the controller, superseding) are specified in the
// controller tier (test/controllers/delivery_test.go); here, what needs the
// whole cluster: the webhook pinning the pods and templates it admits, the
// real kubectl plugin, and the webhook guarding the records.
var _ = Describe("progressive config delivery", func() {
	It("keeps the revision a delivery has not reached on what the webhook admits: a scale-up, an image bump, a Deployment created during it", func() {
		ns := deliveryNamespace("pins", `waves:
- name: canary
  selector: {matchLabels: {configward.dev/wave: canary}}
- name: rest
  approval: true
soakSeconds: 1
`)
		old := snapshotOfCfg(ns, "app-0")
		apply(configMap(ns, "cfg", map[string]string{"level": "debug"}, nil))
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(Equal("WaitingForApproval/ApprovalRequired@rest"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-7", "level")()) }, rolloutTimeout).Should(ConsistOf("debug"))

		By("a scale-up of a Deployment the delivery did not reach gets the old bytes")
		Expect(env.Kubectl("", "scale", "deployment/app-2", "-n", ns, "--replicas=2").ExitCode).To(Equal(0))
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-2", "level")()) }, rolloutTimeout).Should(ConsistOf("info", "info"))
		Expect(snapshotOfCfg(ns, "app-2")).To(Equal(old))

		By("an image bump of a Deployment whose wave has not come keeps its pinned config")
		Expect(env.Kubectl("", "set", "image", "deployment/app-3", "-n", ns, "app=registry.example/app:2").ExitCode).To(Equal(0))
		rolloutStatus(ns, "deployment/app-3")
		Expect(valuesOf(readsOf(ns, "app-3", "level")())).To(ConsistOf("info"))
		Expect(snapshotOfCfg(ns, "app-3")).To(Equal(old))

		By("a Deployment created now is placed in the last wave: it starts on the revision the others run")
		apply(waveDeployment(ns, "late", false, "cfg"))
		rolloutStatus(ns, "deployment/late")
		Expect(snapshotOfCfg(ns, "late")).To(Equal(old))
		Expect(valuesOf(readsOf(ns, "late", "level")())).To(ConsistOf("info"))

		By("promoted with the kubectl plugin, the last wave takes each of them to the new content")
		res := env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/cfg")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Eventually(latestDelivery(ns, "cfg"), 2*rolloutTimeout, time.Second).Should(HavePrefix("Succeeded/"))
		Expect(deliveries(ns, "cfg")[0].Status.History).To(ContainElement(And(HaveField("What", "Promoted"), HaveField("By", Not(BeEmpty())))))
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-2", "level")()) }, rolloutTimeout).Should(ConsistOf("debug", "debug"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "app-3", "level")()) }, rolloutTimeout).Should(ConsistOf("debug"))
		Eventually(func() []string { return valuesOf(readsOf(ns, "late", "level")()) }, rolloutTimeout).Should(ConsistOf("debug"))

		By("a finished record takes no requests: its observedGeneration stays its generation, for the tools that wait on it")
		name := deliveries(ns, "cfg")[0].Name
		Expect(env.Kubectl("", "wait", "--for=condition=Ready", "configdelivery/"+name, "-n", ns, "--timeout=10s")).To(HaveField("ExitCode", 0))
		res = env.KubectlPlugin("delivery", "promote", "-n", ns, "configmap/cfg")
		Expect(res).To(And(HaveField("ExitCode", 1), HaveField("Stderr", ContainSubstring("is finished (Succeeded): there is nothing to promote"))))
		res = env.Kubectl("", "patch", "configdelivery", name, "-n", ns, "--type=merge", "-p", `{"spec":{"request":{"action":"Resume","id":"late-1"}}}`)
		Expect(res).To(And(Not(HaveField("ExitCode", 0)), HaveField("Stderr", ContainSubstring("is finished (Succeeded) and takes no requests"))))
		var d v1alpha1.ConfigDelivery
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
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

		By("a status written by anyone but configward (a role granted configdeliveries/status) is refused")
		res = env.Kubectl("", "patch", "configdelivery", name, "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"state":"Progressing","message":"mine"}}`)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("only configward's controller writes a record's status"))

		By("the metadata that would let the garbage collector delete it is configward's")
		res = env.Kubectl("", "patch", "configdelivery", name, "-n", ns, "--type=merge", "-p",
			`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("its owner references may not be changed"))
		res = env.Kubectl("", "patch", "configdelivery", name, "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":["example.com/hold"]}}`)
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("its finalizers may not be changed"))

		By("an open record cannot be deleted; it stays, with its history and requests")
		res = env.Kubectl("", "delete", "configdelivery", name, "-n", ns, "--wait=false")
		Expect(res.ExitCode).NotTo(Equal(0))
		Expect(res.Stderr).To(ContainSubstring("is open (Halted)"))
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		Expect(d.DeletionTimestamp).To(BeNil())
		Expect(d.Status.State).To(Equal(v1alpha1.DeliveryHalted))
		Expect(d.Spec.Request).NotTo(BeNil())
	})
})
