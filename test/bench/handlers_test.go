package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

// handlerBudgets are the webhooks' allocation budgets (#44): heap
// allocations per review through the whole webhook as served (the review
// decoded, the adapter's checks, the handler with its cache reads from a
// real informer cache, the answer encoded), on the reviews the API server
// sends for the benchmark's fixture. BenchmarkHandlers reports each with
// -benchmem beside its time; TestAllocationBudgets (in make test) fails a
// handler over its budget. Raise a budget only with the reason in the
// commit that raises it.
var handlerBudgets = []struct {
	name   string
	path   string
	budget float64
	review func(f *handlerFixture) []byte
	// patched: the answer carries a patch (what the budget measures).
	patched bool
}{
	// The fixture's Deployment (10 references), created: stamped with the
	// hash of its 10 objects.
	{"config-hash/Deployment-create", admission.ConfigHashPath, 525, (*handlerFixture).deploymentCreate, true},
	// The same create, judged by the built-in rules (nothing to report).
	{"validate-workloads/Deployment-create", admission.ValidateWorkloadsPath, 405, (*handlerFixture).deploymentCreate, false},
	// An update that re-stamps the template and leaves the pod spec as
	// it was: what was passed over is compared as bytes.
	{"validate-workloads/Deployment-update", admission.ValidateWorkloadsPath, 705, (*handlerFixture).deploymentRestamp, false},
	// A revision's pod, pointed at the 10 snapshots its annotation names.
	{"pod-config/Pod-create", admission.PodConfigPath, 400, (*handlerFixture).podCreate, true},
	// A ConfigMap update no ConfigSchema selects.
	{"validate-configmaps/ConfigMap-update", admission.ValidateConfigMapsPath, 190, (*handlerFixture).configMapUpdate, false},
	// The same update by the pipeline, in a governed namespace.
	{"validate-config-changes/ConfigMap-update", admission.ValidateConfigChangesPath, 215, (*handlerFixture).configMapUpdate, false},
}

// handlerFixture is the benchmark's fixture in a real API server, the
// webhooks served over a real informer cache of it, and the objects as the
// API server sends them.
type handlerFixture struct {
	tb  testing.TB
	ctx context.Context
	c   client.Client
	mux http.Handler
	// deployment is the fixture's Deployment as the API server sends its
	// create (defaulted, with its managed fields), with the resources
	// and probes a real one has.
	deployment *appsv1.Deployment
	pod        []byte
}

func newHandlerFixture(tb testing.TB) *handlerFixture {
	cfg := controlPlane(tb)
	f := &handlerFixture{tb: tb, ctx: context.Background(), c: newClient(tb, cfg)}
	createNamespace(tb, f.c, admissionNamespace)
	dep := seedAdmissionFixture(tb, f.ctx, f.c)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5}
	for i := range dep.Spec.Template.Spec.Containers {
		c := &dep.Spec.Template.Spec.Containers[i]
		c.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}
		c.LivenessProbe, c.ReadinessProbe = probe, probe
	}
	f.deployment = dep.DeepCopy()
	if err := f.c.Create(f.ctx, f.deployment, client.DryRunAll); err != nil {
		tb.Fatal(err)
	}
	f.deployment.TypeMeta = dep.TypeMeta
	inv, cache := startInventoryCache(tb, cfg)
	f.pod = pinnedPodReview(tb, f.ctx, f.c, inv, dep)
	// The ConfigMap webhooks look up the ConfigSchemas that select a
	// ConfigMap (none here).
	if _, err := cache.(ctrlcache.Cache).GetInformer(f.ctx, &v1alpha1.ConfigSchema{}); err != nil {
		tb.Fatal(err)
	}

	policies, err := configpolicy.New(f.ctx, logr.Discard())
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := webhookserver.New(webhookserver.Options{CertDir: "/nonexistent", MaxRequestBytes: 3 << 20, Log: logr.Discard()})
	if err != nil {
		tb.Fatal(err)
	}
	governed := func(*corev1.Namespace) changecontrol.Settings {
		return changecontrol.Settings{Governed: true, Pipeline: changecontrol.Identities{Users: []string{"ci"}}}
	}
	// Callers authenticated (the chart's default: the API server's client
	// certificate is required), so effects are recorded at once.
	recorder := events.NewFakeRecorder(1 << 16)
	tb.Cleanup(func() {
		for len(recorder.Events) > 0 {
			<-recorder.Events
		}
	})
	admission.Register(srv, admission.Facts{
		Scheme: scheme.Scheme(), Inventory: inv, Kinds: workload.Builtin(), Cache: cache, Live: f.c,
		Keys: hashkey.Fixed(benchKey), Policies: policies, Schemas: configschema.New(cache), ChangeControl: governed,
		Recorder: admission.Recorder{Events: recorder, Effects: effects.New(true, workload.Builtin())},
	})
	f.mux = srv.WebhookMux()
	return f
}

func (f *handlerFixture) review(op admissionv1.Operation, kind metav1.GroupVersionKind, resource string, user string, obj, old client.Object) []byte {
	raw := func(o client.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			f.tb.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	r := &admissionv1.AdmissionRequest{UID: types.UID("bench-budget-0001"), Kind: kind,
		Resource:  metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: resource},
		Operation: op, Namespace: admissionNamespace, Name: obj.GetName(), Object: raw(obj), OldObject: raw(old)}
	r.UserInfo.Username = user
	b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: r})
	if err != nil {
		f.tb.Fatal(err)
	}
	return b
}

var deploymentKind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

func (f *handlerFixture) deploymentCreate() []byte {
	return f.review(admissionv1.Create, deploymentKind, "deployments", "alice", f.deployment, nil)
}

func (f *handlerFixture) deploymentRestamp() []byte {
	old := f.deployment.DeepCopy()
	old.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: "v1-0000"}
	now := f.deployment.DeepCopy()
	now.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: "v1-1111"}
	return f.review(admissionv1.Update, deploymentKind, "deployments", "alice", now, old)
}

func (f *handlerFixture) podCreate() []byte { return f.pod }

func (f *handlerFixture) configMapUpdate() []byte {
	var old corev1.ConfigMap
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: admissionNamespace, Name: referencedConfigMaps()[0]}, &old); err != nil {
		f.tb.Fatal(err)
	}
	old.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	now := old.DeepCopy()
	now.Data["key-0"] = "a new value"
	return f.review(admissionv1.Update, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", "ci", now, &old)
}

// poster sends one review to a mux again and again, reusing the request
// and a writer that keeps nothing, so that what is counted is the
// webhook's.
type poster struct {
	mux  http.Handler
	req  *http.Request
	raw  []byte
	body *bytes.Reader
	out  discard
}

type discard struct {
	header http.Header
	status int
	buf    *bytes.Buffer // nil: the answer is dropped
}

func (d *discard) Header() http.Header  { return d.header }
func (d *discard) WriteHeader(code int) { d.status = code }
func (d *discard) Write(b []byte) (int, error) {
	if d.buf != nil {
		return d.buf.Write(b)
	}
	return len(b), nil
}

func newPoster(tb testing.TB, mux http.Handler, path string, body []byte) *poster {
	req, err := http.NewRequest(http.MethodPost, "https://configward.example"+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return &poster{mux: mux, req: req, raw: body, body: bytes.NewReader(body), out: discard{header: http.Header{}}}
}

func (p *poster) post() {
	p.body.Reset(p.raw)
	p.req.Body = io.NopCloser(p.body)
	p.out.status = 0
	clear(p.out.header)
	p.mux.ServeHTTP(&p.out, p.req)
}

// check sends the review once and fails unless it was answered as the
// budget's comment says: a budget measured on a refusal measures nothing.
func (p *poster) check(tb testing.TB, name string, wantPatch bool) {
	tb.Helper()
	p.out.buf = &bytes.Buffer{}
	p.post()
	answer := p.out.buf.Bytes()
	p.out.buf = nil
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &out); err != nil || out.Response == nil {
		tb.Fatalf("%s: not an answer: %v: %s", name, err, answer)
	}
	if !out.Response.Allowed {
		tb.Fatalf("%s: refused: %s", name, answer)
	}
	if patched := len(out.Response.Patch) > 0; patched != wantPatch {
		tb.Fatalf("%s: patched %v: %s", name, patched, answer)
	}
}

func BenchmarkHandlers(b *testing.B) {
	f := newHandlerFixture(b)
	for _, h := range handlerBudgets {
		b.Run(h.name, func(b *testing.B) {
			p := newPoster(b, f.mux, h.path, h.review(f))
			p.check(b, h.name, h.patched)
			b.ReportAllocs()
			b.ReportMetric(h.budget, "budget-allocs/op")
			for b.Loop() {
				p.post()
			}
		})
	}
}

func TestAllocationBudgets(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("the race detector and coverage allocate: the budgets hold for the plain build")
	}
	f := newHandlerFixture(t)
	for _, h := range handlerBudgets {
		p := newPoster(t, f.mux, h.path, h.review(f))
		p.check(t, h.name, h.patched)
		if got := testing.AllocsPerRun(100, p.post); got > h.budget {
			t.Errorf("%s: %.0f allocations per review, over its budget of %.0f", h.name, got, h.budget)
		} else {
			t.Logf("%s: %.0f allocations per review (budget %.0f)", h.name, got, h.budget)
		}
	}
}
