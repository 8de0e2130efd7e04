// Package node runs pods on a real node: a kubelet with containerd and runc
// beside the API server, kube-controller-manager and kube-scheduler, and
// configward installed with helm as on a cluster, its webhook and
// controller running from its image on that node, next to cert-manager.
// Where every other suite's pods run on kwok, which makes them Running
// without running anything, this one proves configward's premises about
// the kubelet (what a running container sees of a ConfigMap it mounts or
// reads through env, and what the pods of a rolled workload see) and the
// chart's pods (certificates, Service, leader lease, disruption budget,
// priority, memory limit).
package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/test/framework"
	"github.com/configward/configward/test/framework/certmanager"
)

var (
	env  *framework.Env
	node *framework.Node
	// agentsAddr is where the node's pods reach the webhook's agent port
	// (see BeforeSuite).
	agentsAddr string
)

// release is the Helm release, in the namespace the README installs into.
const release, releaseNamespace = "configward", "configward"

// agentPort is the chart's reloadAgent.port, and agentServerName the name
// the serving certificate gives the webhook Service.
const (
	agentPort       = 9444
	agentServerName = release + "-webhook." + releaseNamespace + ".svc"
)

// unmanagedNamespace is a namespace the chart's webhooks never see
// (webhooks.excludedNamespaces), where a spec shows what the kubelet does
// without configward.
const unmanagedNamespace = "kubelet-only"

func TestNode(t *testing.T) {
	defer framework.RemoveBuilds()
	framework.RequireControlPlane(t)
	framework.RequireHelm(t)
	framework.RequireNode(t)
	framework.RequireImage(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward with pods on a real node")
}

// The suite's failures, again at the end of `make test`'s output.
var _ = ReportAfterSuite("failure digest", framework.WriteFailureDigest)

var _ = BeforeSuite(func() {
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("client-go"))
	crds, err := certmanager.CRDs()
	Expect(err).NotTo(HaveOccurred())
	// A cluster configward was never installed in: the chart brings its
	// CRDs and its own webhook configurations.
	env, err = framework.Start(framework.Options{WithoutWebhook: true, WithoutConfigwardCRDs: true, InClusterClients: true, ExtraCRDPaths: []string{crds}})
	Expect(err).NotTo(HaveOccurred())
	Expect(cmscheme.AddToScheme(env.Client.Scheme())).To(Succeed())
	Expect(env.StartControllerManager()).To(Succeed())
	Expect(env.StartScheduler()).To(Succeed())
	node, err = env.StartNode("real-node-0")
	Expect(err).NotTo(HaveOccurred())
	// The real node beside kwok's, as in the other suites' world; kwok's are
	// tainted, so that every pod here (the chart's too, which tolerate no
	// taint) lands where a kubelet runs it.
	Expect(env.StartKwok(2)).To(Succeed())
	var nodes corev1.NodeList
	Expect(env.Client.List(context.Background(), &nodes)).To(Succeed())
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Annotations[framework.KwokNodeAnnotation] == "" {
			continue
		}
		// A patch: kwok renews the node's status meanwhile, and an update
		// would conflict with it.
		before := n.DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "configward-test/kwok", Value: "fake", Effect: corev1.TaintEffectNoSchedule})
		Expect(env.Client.Patch(context.Background(), n, client.MergeFrom(before))).To(Succeed())
	}
	Expect(node.ImportImage(framework.ImageTar())).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager"}})).To(Succeed())
	// cert-manager acts as its chart's service account, which configward's
	// chart lets write the Secrets cert-manager manages.
	certManagerKubeconfig, err := env.UserKubeconfig("system:serviceaccount:cert-manager:cert-manager", "system:masters")
	Expect(err).NotTo(HaveOccurred())
	Expect(certmanager.Start(ctx, env.Config, certManagerKubeconfig, "cert-manager")).To(Succeed())
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unmanagedNamespace}})).To(Succeed())

	// Reload agents report to the webhook Service's agent port. The pods
	// here have no Service network and no DNS, so the agents are told the
	// node's address, where the test forwards to the webhook pods, and
	// check the serving certificate against the Service's DNS name.
	agentsAddr, err = node.ServeService(env, releaseNamespace, release+"-webhook", agentPort)
	Expect(err).NotTo(HaveOccurred())

	By("helm install, as the README says, with two controller replicas and config revisions on, of Secrets too (a set's Secret member is channelled)")
	started := time.Now()
	res := env.Helm("install", release, filepath.Join(framework.RepoRoot(), "charts", "configward"),
		"-n", releaseNamespace, "--create-namespace", "--wait", "--timeout", "3m",
		"--set", "controller.replicas=2", "--set", "revisions.enabled=true", "--set", "revisions.secrets=true",
		"--set", "webhooks.excludedNamespaces={"+unmanagedNamespace+"}",
		"--set", "reloadAgent.reportURL=https://"+agentsAddr, "--set", "reloadAgent.serverName="+agentServerName,
		// A stale certificate is acted on after 45 s, not 5 min (time to
		// see it reported first).
		"--set", "servingCerts.staleGrace=45s")
	Expect(res.ExitCode).To(Equal(0), func() string {
		return fmt.Sprintf("%s\n%s\n%s\nkubelet log:\n%s", res.Stdout, res.Stderr, releaseLogs(), tailFile(node.KubeletLog()))
	})
	AddReportEntry("helm install", fmt.Sprintf("configward's release ready on the real node %s after helm install started", time.Since(started).Round(time.Second)))
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// releasePods are the running (not terminating) pods of one component
// of the release: "webhook" or "controller".
func releasePods(component string) []corev1.Pod {
	var list corev1.PodList
	Expect(env.Client.List(context.Background(), &list, client.InNamespace(releaseNamespace), client.MatchingLabels{
		"app.kubernetes.io/instance": release, "app.kubernetes.io/component": component})).To(Succeed())
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// releaseLogs is the end of what each container of the release's pods
// printed, for a failure message.
func releaseLogs() string {
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(releaseNamespace)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, c := range p.Spec.Containers {
			lines, err := node.ContainerOutput(p, c.Name)
			fmt.Fprintf(&b, "--- %s/%s (%v):\n%s\n", p.Name, c.Name, err, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	}
	return b.String()
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	s := string(b)
	return s[max(0, len(s)-3000):]
}
