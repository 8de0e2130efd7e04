package framework

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/report"
	"github.com/configward/configward/internal/revision"
)

// A controller package's own suite (internal/controller/<name>, in its
// external test package) runs that controller against kube-apiserver and
// etcd alone, as test/controllers runs them all: no kube-controller-manager,
// no kwok, no webhook; what other controllers would write, its specs
// write. Its Go test function is TestAgainstAPIServer, which `make unit`
// skips; it calls RequireControlPlane first.

// ControllerSuite is the control plane and the controller process of one
// such suite, started once for all its specs.
type ControllerSuite struct {
	// Env is the control plane, once BeforeSuite has run.
	Env *Env
	// Controller is what the controller process is started with.
	Controller manager.Controller
	// stop stops the running controller process; nil while none runs.
	stop func() error
}

// NewControllerSuite registers, in the calling package's Ginkgo suite, a
// BeforeSuite that starts kube-apiserver and etcd and then configward's
// controller process with o, and an AfterSuite that stops them. Call it at
// package level: var suite = framework.NewControllerSuite(...).
func NewControllerSuite(o manager.Controller) *ControllerSuite {
	s := &ControllerSuite{Controller: o}
	ginkgo.BeforeSuite(func() {
		ctrl.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
		var err error
		s.Env, err = Start(Options{WithoutWebhook: true})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		s.StartController()
	})
	ginkgo.AfterSuite(func() {
		if s.Env != nil {
			gomega.Expect(s.Env.Stop()).To(gomega.Succeed())
		}
	})
	// The suite's failures, again at the end of `make test`'s output.
	ginkgo.ReportAfterSuite("failure digest", WriteFailureDigest)
	return s
}

// Run runs the package's specs as its TestAgainstAPIServer: where the
// control plane is built (RequireControlPlane), with the builds it made
// removed after.
func (s *ControllerSuite) Run(t *testing.T, description string) {
	RequireControlPlane(t)
	defer RemoveBuilds()
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, description)
}

// StartController starts the controller process with s.Controller, unless
// one runs, and waits until it is ready. A spec that stops it defers this,
// so that the next spec finds one running even when it failed in between.
func (s *ControllerSuite) StartController() {
	if s.stop != nil {
		return
	}
	stop, err := s.Env.StartController(s.Controller)
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	s.stop = stop
}

// StopController stops the controller process, as a crash or the end of
// a leader's term would; StartController starts the next one.
func (s *ControllerSuite) StopController() {
	stop := s.stop
	s.stop = nil
	gomega.ExpectWithOffset(1, stop()).To(gomega.Succeed())
}

// Create creates objects, failing the spec on the first error.
func (s *ControllerSuite) Create(objs ...client.Object) {
	for _, o := range objs {
		gomega.ExpectWithOffset(1, s.Env.Client.Create(context.Background(), o)).To(gomega.Succeed())
	}
}

// Namespace creates a namespace for one spec, with labels, and returns its
// name.
func (s *ControllerSuite) Namespace(labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctrl-", Labels: labels}}
	gomega.ExpectWithOffset(1, s.Env.Client.Create(context.Background(), ns)).To(gomega.Succeed())
	return ns.Name
}

// PolicyNamespace creates a ConfigPolicy named name, its spec set by set,
// that selects one new namespace alone, waits until the policy is in force,
// and returns the namespace. The policy is deleted when the spec ends.
func (s *ControllerSuite) PolicyNamespace(name string, set func(*v1alpha1.ConfigPolicySpec)) string {
	label := "controllers.configward.dev/" + name
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "on"}},
	}}
	set(&policy.Spec)
	s.Create(policy)
	ginkgo.DeferCleanup(func() { gomega.Expect(s.Env.Client.Delete(context.Background(), policy)).To(gomega.Succeed()) })
	gomega.EventuallyWithOffset(1, PolicyReady(s.Env.Client, policy), 10*time.Second).Should(gomega.Equal(metav1.ConditionTrue))
	return s.Namespace(map[string]string{label: "on"})
}

// PolicyReady is the status of the Ready condition the ConfigPolicy
// reconciler set on policy for its current generation ("" before).
func PolicyReady(c client.Client, policy *v1alpha1.ConfigPolicy) func() metav1.ConditionStatus {
	return func() metav1.ConditionStatus {
		gomega.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(policy), policy)).To(gomega.Succeed())
		cond := meta.FindStatusCondition(policy.Status.Conditions, "Ready")
		if cond == nil || policy.Status.ObservedGeneration != policy.Generation {
			return ""
		}
		return cond.Status
	}
}

// Events lists the notes of the Events of one reason on the object named
// name in ns.
func Events(c client.Client, ns, name, reason string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		gomega.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(gomega.Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				out = append(out, e.Note)
			}
		}
		return out
	}
}

// StoredReport is the Report configward keeps on obj, nil when there is
// none (or obj is gone).
func StoredReport(c client.Client, obj client.Object) func() *openreports.Report {
	return func() *openreports.Report {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return nil
		}
		var r openreports.Report
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: obj.GetNamespace(), Name: report.Name(obj.GetUID())}, &r); err != nil {
			return nil
		}
		return &r
	}
}

// ReportResults lists the results of the Report configward keeps on obj,
// as "rule result action" (a finding) or "rule result state" (config
// current).
func ReportResults(c client.Client, obj client.Object) func() []string {
	stored := StoredReport(c, obj)
	return func() []string {
		r := stored()
		if r == nil {
			return nil
		}
		var out []string
		for _, res := range r.Results {
			out = append(out, res.Rule+" "+string(res.Result)+" "+res.Properties[report.PropAction]+res.Properties[report.PropState])
		}
		return out
	}
}

// Metric is the sum of the series of the metric name whose labels include
// labels, as the controller process running in this test process (see
// Env.StartController) counts it now: it registers in controller-runtime's
// registry.
func Metric(name string, labels map[string]string) float64 {
	families, err := metrics.Registry.Gather()
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched == len(labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// Leaks says which of secrets (values a spec gave its Secrets) obj holds,
// as written, base64-encoded (a Secret's data), or hex- or base64-encoded
// SHA-256 digests: obj is marshalled as the API server would store it.
func Leaks(obj any, secrets ...string) []string {
	data, err := json.Marshal(obj)
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	var out []string
	for _, secret := range secrets {
		for _, form := range SecretForms(secret) {
			if strings.Contains(string(data), form) {
				out = append(out, form)
			}
		}
	}
	return out
}

// SecretForms are the forms a Secret's value would leak in: as given, as
// base64 (a Secret's data in JSON), and as unkeyed digests, its SHA-256 and
// the key digest configward keeps in memory, which anyone could test a
// guess of the value against.
func SecretForms(value string) []string {
	sum := sha256.Sum256([]byte(value))
	return []string{value, base64.StdEncoding.EncodeToString([]byte(value)), hex.EncodeToString(sum[:]),
		digest.SecretKeyDigests(map[string][]byte{"k": []byte(value)})["k"]}
}

// HashOf is the config hash of a template that reads every key of the
// stored ConfigMap cm and nothing else, as configward computes it under the
// suite's key: what the webhook would have stamped.
func (s *ControllerSuite) HashOf(cm *corev1.ConfigMap) string {
	key := s.read(cm)
	return digest.PodTemplateHash(key, cm.Namespace, []digest.Entry{{Kind: string(refs.ConfigMap), Name: cm.Name,
		Content: digest.Content(digest.KeyDigests(cm.Data, cm.BinaryData), nil)}})
}

// SnapshotOf is the name of the snapshot of the stored ConfigMap cm's
// content, as configward names it.
func (s *ControllerSuite) SnapshotOf(cm *corev1.ConfigMap) string {
	key := s.read(cm)
	return revision.SnapshotName(key, cm.Namespace, refs.ConfigMap, cm.Name, digest.Content(digest.KeyDigests(cm.Data, cm.BinaryData), nil))
}

// read refreshes cm from the API server and returns the installation's key.
func (s *ControllerSuite) read(cm *corev1.ConfigMap) []byte {
	ctx := context.Background()
	gomega.ExpectWithOffset(2, s.Env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(gomega.Succeed())
	key, err := s.Env.HashKey(ctx)
	gomega.ExpectWithOffset(2, err).NotTo(gomega.HaveOccurred())
	return key
}
