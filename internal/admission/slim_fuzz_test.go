package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

// slimPaths are the webhooks whose objects are decoded slim (see
// slimobject): the workloads' and the Pod path.
var slimPaths = []string{ConfigHashPath, ValidateWorkloadsPath, PodConfigPath}

// slimChain is the webhooks served one way, with the Events they record.
type slimChain struct {
	mux    http.Handler
	events *events.FakeRecorder
}

// newSlimChains serves the webhooks twice over the same cache and policies
// (built-in rules only, so that the workload objects are decoded in one
// pass): [0] as in production, [1] with every field of the objects decoded.
func newSlimChains(tb testing.TB) [2]slimChain {
	tb.Helper()
	ctx := context.Background()
	web, objs := fuzzWorld()
	cache := newCache(tb, objs...)
	policies, err := configpolicy.New(ctx, logr.Discard())
	if err != nil {
		tb.Fatal(err)
	}
	if err := policies.Load(ctx, configPolicy("strict", v1alpha1.ConfigPolicySpec{
		Rules:    map[string]v1alpha1.RuleSettings{"secret-in-env": {Action: "Deny"}},
		Pipeline: v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer"}},
	})); err != nil {
		tb.Fatal(err)
	}
	if policies.Current().Version.WantsObjects {
		tb.Fatal("the policies keep the objects' bytes: nothing would be decoded slim")
	}
	var chains [2]slimChain
	for i, full := range []bool{false, true} {
		srv, err := webhookserver.New(webhookserver.Options{CertDir: "/nonexistent", MaxRequestBytes: 1 << 20, Log: logr.Discard()})
		if err != nil {
			tb.Fatal(err)
		}
		rec := events.NewFakeRecorder(100)
		Register(srv, Facts{
			Scheme: testScheme, Inventory: newInventory(cache), Kinds: workload.Builtin(), Cache: cache, Live: newLive(web.DeepCopy()),
			Keys: hashkey.Fixed(testKey), Policies: policies, Schemas: configschema.New(cache), ChangeControl: governed,
			Recorder: Recorder{Events: rec, Effects: effects.New(true, workload.Builtin())}, FullObjects: full,
			Agent: &ReloadAgent{Image: "configward:test", ReportURL: "https://configward.example:9444" + reload.ReportPath, CA: func() string { return "PEM" }},
		})
		chains[i] = slimChain{mux: srv.WebhookMux(), events: rec}
	}
	return chains
}

// answer is what chain answers to body at path, and the Events it recorded.
func (c slimChain) answer(path string, body []byte) (string, []string) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	c.mux.ServeHTTP(rec, r)
	return rec.Body.String(), recorded(c.events)
}

// heavy fills in what the slim decoding passes over, the way the API
// server sends it: managed fields, resources, probes, lifecycle hooks,
// affinity, status.
func heavy(spec *corev1.PodSpec, meta *metav1.ObjectMeta) {
	meta.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{}}}`)}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = probe, probe, probe
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	}
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
}

// FuzzSlimAnswers sends the workload and Pod webhooks each structured
// review (as FuzzWebhookBodies builds them) through both chains of
// newSlimChains and fails on any difference in the answer or the Events:
// no handler reads what the slim decoding passes over. The seeds are
// FuzzWebhookBodies' and heavy objects of every kind the slim decoding
// knows.
func FuzzSlimAnswers(f *testing.F) {
	chains := newSlimChains(f)
	for _, s := range fuzzSeeds(f) {
		f.Add(s.op, s.kind, s.object, s.oldObject, s.user, s.flags)
	}
	j := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	hot := corev1.VolumeMount{Name: "flags", MountPath: "/etc/flags/level", SubPath: "level"}
	web := deployment("web", podSpec([]corev1.EnvVar{envSecretKey("DB_PASSWORD", "db", "password")}, envFromConfigMap("app")))
	web.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "flags"}}}}}
	web.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{hot}
	heavy(&web.Spec.Template.Spec, &web.ObjectMeta)
	web.Status = appsv1.DeploymentStatus{Replicas: 3, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	older := web.DeepCopy()
	older.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	p := pod("web-abc", podSpec(nil, envFromConfigMap("flags")), nil)
	heavy(&p.Spec, &p.ObjectMeta)
	agent := p.DeepCopy()
	agent.Spec.Containers[0].EnvFrom = nil
	agent.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptrTo(int64(1000))}
	agent.Spec.Volumes = []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "flags"}}}}}
	agent.Annotations = map[string]string{v1alpha1.ReloadAgentAnnotation: "signal:SIGHUP@" + agent.Spec.Containers[0].Name}
	f.Add("CREATE", kindIndex(f, "Pod"), j(agent), []byte(nil), "alice", uint8(0))
	f.Add("CREATE", kindIndex(f, "Deployment"), j(web), []byte(nil), "alice", uint8(0))
	f.Add("UPDATE", kindIndex(f, "Deployment"), j(web), j(older), "alice", uint8(0))
	f.Add("CREATE", kindIndex(f, "Pod"), j(p), []byte(nil), "alice", uint8(0))

	f.Fuzz(func(t *testing.T, op string, kind uint8, object, oldObject []byte, user string, flags uint8) {
		review, _ := structuredReview(op, kind, object, oldObject, user, flags)
		for _, path := range slimPaths {
			slim, slimEvents := chains[0].answer(path, review)
			full, fullEvents := chains[1].answer(path, review)
			if slim != full || strings.Join(slimEvents, "\n") != strings.Join(fullEvents, "\n") {
				t.Fatalf("%s: the answer read slim differs from the answer read whole\nreview: %.3000s\nslim: %s\nEvents: %q\nwhole: %s\nEvents: %q",
					path, review, slim, slimEvents, full, fullEvents)
			}
		}
	})
}
