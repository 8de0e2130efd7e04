// Package security holds configward's secret-safety suite: configward runs
// as processes of its own (the webhook without client authentication, the
// harder case, and the controller) on a whole cluster, so the suite can
// send them fabricated reviews, read their memory and measure what they
// use.
package security

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/test/framework"
)

var (
	env        *framework.Env
	webhook    *framework.Process
	controller *framework.Process
	// agents is where the webhook takes reload agents' reports.
	agents string
)

// changeControlFlags are the pipeline both processes are given.
var changeControlFlags = []string{"--pipeline-service-accounts=ci/deployer",
	"--configward-service-accounts=" + framework.Namespace + "/configward-controller"}

// idleTimeout is the webhook's: the canary spec waits it out, as a quiet
// cluster would, before it reads the webhook's memory.
const idleTimeout = 2 * time.Second

const (
	pipeline = "system:serviceaccount:ci:deployer"
	human    = "alice"
)

func TestSecurity(t *testing.T) {
	defer framework.RemoveBuilds()
	framework.RequireControlPlane(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "configward secret safety")
}

// The suite's failures, again at the end of `make test`'s output.
var _ = ReportAfterSuite("failure digest", framework.WriteFailureDigest)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.Start(framework.Options{WithoutWebhook: true, UnauthenticatedCallers: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.StartCluster(1)).To(Succeed())
	// Every allocation is profiled, so the heap dumps say who allocated
	// each object.
	env.BinaryEnv = []string{"GODEBUG=memprofilerate=1"}
	defer func() { env.BinaryEnv = nil }()
	ports, err := framework.FreePorts(1)
	Expect(err).NotTo(HaveOccurred())
	agents = fmt.Sprintf("127.0.0.1:%d", ports[0])
	webhook, err = env.StartWebhookBinary("webhook", append(append(changeControlFlags, "--idle-timeout="+idleTimeout.String()), env.AgentFlags(agents)...)...)
	Expect(err).NotTo(HaveOccurred())
	_, err = env.InstallWebhookConfigurations(context.Background())
	Expect(err).NotTo(HaveOccurred())
	controller, err = env.StartControllerBinary("controller", append(changeControlFlags, "--rollout-batch-window=1s")...)
	Expect(err).NotTo(HaveOccurred())
	Expect(env.Client.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "security-suite-editors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: human},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"},
		},
	})).To(Succeed())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// kubectl runs kubectl as identity ("" for the admin) and keeps what it
// printed in the transcript the canary spec searches.
func kubectl(identity, stdin string, args ...string) framework.KubectlResult {
	if identity != "" {
		args = append([]string{"--as=" + identity}, args...)
	}
	res := env.Kubectl(stdin, args...)
	transcript.WriteString(res.Stdout + res.Stderr)
	return res
}

// transcript is everything kubectl printed in this suite.
var transcript strings.Builder
