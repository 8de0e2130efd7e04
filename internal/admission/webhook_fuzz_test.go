package admission

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/effects"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

// FuzzWebhookBodies sends every webhook, through the layers the server puts
// in front of it (webhookserver's in-flight bound and harden, serve.go's
// Webhook wrapper, controller-runtime's admission.Webhook), two requests per
// input:
//
//   - body, as it comes: arbitrary bytes, a review the API server never
//     sends, a truncated or oversized one;
//   - a review built from the other arguments (operation, a kind and
//     resource from fuzzKinds, object and old object JSON, user, flags), so
//     that the handlers' own decoding and rules are reached, not only the
//     JSON parser.
//
// For each answer it asserts:
//
//   - no panic, neither escaping nor recovered by harden or
//     controller-runtime (a recovered panic is a bug answered safely);
//   - HTTP 200 with exactly one JSON AdmissionReview that has a response;
//   - a body that decodes as an AdmissionReview (what the API server sends)
//     gets an answer of the same apiVersion and kind with the request's
//     uid; an oversized one gets harden's 413 denial, admission.k8s.io/v1,
//     with the uid a JSON reader finds; an answer never carries a uid other
//     than the one the body holds;
//   - allowed only when the body decodes to a review with uid, kind,
//     resource and operation set; a refusal has a 4xx/5xx code and a
//     message; an allowed answer has code 200;
//   - a patch is a JSON patch that applies to the object as the API server
//     holds it, and touches annotations only;
//   - a Secret value (a canary planted in data and stringData of every
//     Secret the structured review carries) appears in no answer, Event or
//     log line.
func FuzzWebhookBodies(f *testing.F) {
	chains := newFuzzChains(f)

	for _, s := range fuzzSeeds(f) {
		f.Add(s.body, s.op, s.kind, s.object, s.oldObject, s.user, s.flags)
	}
	f.Add([]byte(""), "", uint8(0), []byte(nil), []byte(nil), "", uint8(0))
	f.Add([]byte("{}"), "CREATE", uint8(0), []byte("{}"), []byte(nil), "alice", uint8(1))
	f.Add([]byte(`{"request":{"uid":"u-1"}}`), "UPDATE", uint8(7), []byte(`{"data":null}`), []byte(`{}`), "alice", uint8(2))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`), "DELETE", uint8(8), []byte(nil), []byte(`{"metadata":{"name":"db"}}`), "alice", uint8(0))

	f.Fuzz(func(t *testing.T, body []byte, op string, kind uint8, object, oldObject []byte, user string, flags uint8) {
		chain := chains[flags&1]
		for _, p := range fuzzPaths {
			checkAnswer(t, chain, p, body, nil)
		}
		review, canary := structuredReview(op, kind, object, oldObject, user, flags)
		if canary != nil {
			// The fuzzer must not be able to put the canary anywhere
			// else: the check would find it where it is allowed to be.
			for _, in := range [][]byte{object, oldObject, []byte(user)} {
				for _, c := range canary {
					if bytes.Contains(in, c) {
						canary = nil
					}
				}
			}
		}
		for _, p := range fuzzPaths {
			checkAnswer(t, chain, p, review, canary)
		}
	})
}

// fuzzPaths are the webhooks as run.go registers them.
var fuzzPaths = []string{
	ConfigHashPath, ValidateWorkloadsPath, ValidateConfigMapsPath, ValidateConfigSchemasPath,
	ValidateConfigPoliciesPath, ValidateConfigChangesPath, RecordNamespaceChangesPath, ValidateConfigSetsPath, ValidateConfigSetMembersPath,
}

// fuzzMaxBody is the server's --max-request-bytes here: small, so that
// harden's refusal of an oversized review is reached too.
const fuzzMaxBody = 32 << 10

const fuzzUID = "5c7a9a9e-fuzz-4f1b-9d5e-structured"

// The canary planted in every Secret of a structured review.
const fuzzCanary = "fuzzCANARYs3cr3tVALUE"

var fuzzCanaryB64 = base64.StdEncoding.EncodeToString([]byte(fuzzCanary))

// fuzzCapture collects what leaves the webhook besides its answer: Events
// and log lines. It records only while armed, so the other tests of the
// package (which share the process-wide logger) do not fill it.
type fuzzCapture struct {
	armed atomic.Bool
	mu    sync.Mutex
	buf   bytes.Buffer
}

func (c *fuzzCapture) add(s string) {
	if !c.armed.Load() {
		return
	}
	c.mu.Lock()
	c.buf.WriteString(s)
	c.buf.WriteByte('\n')
	c.mu.Unlock()
}

func (c *fuzzCapture) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := bytes.Clone(c.buf.Bytes())
	c.buf.Reset()
	return out
}

var fuzzOut fuzzCapture

// Eventf and AnnotatedEventf make fuzzCapture an Event recorder that formats
// every Event as the API server would store it.
func (c *fuzzCapture) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	c.add(fmt.Sprintf("event %s %s %s: ", eventtype, reason, action) + fmt.Sprintf(note, args...))
}

func (c *fuzzCapture) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	c.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

var fuzzLoggerOnce sync.Once

// fuzzLogger writes every log line, at every verbosity, to fuzzOut.
func fuzzLogger() logr.Logger {
	return funcr.New(func(prefix, args string) { fuzzOut.add("log " + prefix + " " + args) }, funcr.Options{Verbosity: 10})
}

// newFuzzChains builds the webhooks twice, as run.go does, over a fake
// cache: [0] for a server that does not authenticate its callers (effects
// wait for the cache), [1] for one that does (effects at once).
func newFuzzChains(tb testing.TB) [2]http.Handler {
	tb.Helper()
	fuzzLoggerOnce.Do(func() { ctrllog.SetLogger(fuzzLogger()) })
	ctx := context.Background()

	tiered := configSchema("tiered", "uid-tiered", v1alpha1.ConfigSchemaSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"schema-tier": "gold"}},
		Keys: []v1alpha1.KeySchema{{Pattern: "^[a-z]+\\.json$", Format: "json",
			Schema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":["level"]}`)}}},
		AllowUndeclaredKeys: true,
	})
	web, objs := fuzzWorld()
	cache := newCache(tb, append(objs, configSchema("app", "uid-app", appSchema), tiered)...)
	live := newLive(web.DeepCopy())

	policies, err := configpolicy.New(ctx, logr.Discard())
	if err != nil {
		tb.Fatal(err)
	}
	if err := policies.Load(ctx, configPolicy("strict", v1alpha1.ConfigPolicySpec{
		Rules:       map[string]v1alpha1.RuleSettings{"secret-in-env": {Action: "Deny"}, "no-latest": {Action: "Warn"}},
		CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: noLatestRego}},
		Pipeline:    v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer"}},
	})); err != nil {
		tb.Fatal(err)
	}

	var chains [2]http.Handler
	for i, trusted := range []bool{false, true} {
		srv, err := webhookserver.New(webhookserver.Options{
			CertDir: "/nonexistent", MaxRequestBytes: fuzzMaxBody, Log: fuzzLogger().WithName("server"),
		})
		if err != nil {
			tb.Fatal(err)
		}
		ledger := effects.New(trusted, workload.Builtin())
		Register(srv, Facts{
			Scheme: testScheme, Inventory: newInventory(cache), Kinds: workload.Builtin(), Cache: cache, Live: live,
			Keys: hashkey.Fixed(testKey), Policies: policies, Schemas: configschema.New(cache), ChangeControl: governed,
			Recorder: Recorder{Events: &fuzzOut, Effects: ledger},
		})
		chains[i] = srv.WebhookMux()
	}
	return chains
}

// fuzzWorld is what the fuzzed webhooks' cache holds: two namespaces (one
// governed), a Deployment (returned apart: the live reader holds it too)
// and a pod of it, a ConfigMap, a hot ConfigMap and a Secret they read.
func fuzzWorld() (*appsv1.Deployment, []client.Object) {
	web := deployment("web", podSpec([]corev1.EnvVar{envSecretKey("DB_PASSWORD", "db", "password")}, envFromConfigMap("app")))
	return web, []client.Object{
		namespace(testNS, map[string]string{v1alpha1.ChangeControlLabel: v1alpha1.ChangeControlGoverned}),
		namespace("other", nil),
		web,
		pod("web-abc", podSpec(nil, envFromConfigMap("flags")), controllerRef("apps/v1", "ReplicaSet", "web-1")),
		configMap("app", map[string]string{"port": "80"}, nil),
		configMap("flags", map[string]string{"level": "debug"}, map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}),
		secret("db", dbData, nil),
	}
}

// fuzzKinds are the kinds and resources a structured review names: every
// kind a webhook judges, one none does, and kinds that do not match their
// resource.
var fuzzKinds = []struct {
	kind     metav1.GroupVersionKind
	resource metav1.GroupVersionResource
}{
	{deploymentKind, deploymentsRes},
	{podKind, podsResource},
	{replicaSetKind, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}},
	{cronJobKind, metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}},
	{metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}},
	{metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}},
	{configMapKind, configMapsResource},
	{secretKind, secretsResource},
	{metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}},
	{configSchemaKind, metav1.GroupVersionResource{Group: "configward.dev", Version: "v1alpha1", Resource: "configschemas"}},
	{configPolicyKind, metav1.GroupVersionResource{Group: "configward.dev", Version: "v1alpha1", Resource: "configpolicies"}},
	{serviceKind, metav1.GroupVersionResource{Version: "v1", Resource: "services"}},
	{configMapKind, secretsResource},
	{secretKind, configMapsResource},
	{deploymentKind, podsResource},
	{metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ConfigMap"}, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "configmaps"}},
}

// Flags of a structured review, bit by bit.
const (
	flagTrusted   = 1 << iota // the server authenticates its callers
	flagDryRun                // dryRun: true
	flagOtherNS               // namespace "other" (not governed) instead of "shop"
	flagNameEmpty             // request name "" (a create with generateName)
	flagNameFixed             // request name "db" instead of the object's
	flagEphemeral             // subresource ephemeralcontainers
	flagStatus                // subresource status
	flagPipeline              // the user is in the pipeline's group
)

// structuredReview builds a complete AdmissionReview (but for an empty
// op) from the fuzzed parts. An object that is not JSON is sent as a JSON
// string, which the decoders read as YAML. For a Secret it plants the
// canary in data and stringData and returns the forms it may take.
func structuredReview(op string, kind uint8, object, oldObject []byte, user string, flags uint8) ([]byte, [][]byte) {
	k := fuzzKinds[int(kind)%len(fuzzKinds)]
	var canary [][]byte
	if k.kind.Kind == "Secret" {
		var planted bool
		object, planted = plantCanary(object)
		var plantedOld bool
		oldObject, plantedOld = plantCanary(oldObject)
		if planted || plantedOld {
			canary = [][]byte{[]byte(fuzzCanary), []byte(fuzzCanaryB64)}
		}
	}
	ns := testNS
	if flags&flagOtherNS != 0 {
		ns = "other"
	}
	r := &admissionv1.AdmissionRequest{
		UID: fuzzUID, Kind: k.kind, Resource: k.resource, Operation: admissionv1.Operation(op),
		Namespace: ns, Object: fuzzRaw(object), OldObject: fuzzRaw(oldObject),
	}
	switch {
	case flags&flagNameEmpty != 0:
	case flags&flagNameFixed != 0:
		r.Name = "db"
	default:
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		src := object
		if len(src) == 0 {
			src = oldObject
		}
		_ = json.Unmarshal(src, &meta)
		r.Name = meta.Metadata.Name
	}
	if flags&flagEphemeral != 0 {
		r.SubResource = "ephemeralcontainers"
	} else if flags&flagStatus != 0 {
		r.SubResource = "status"
	}
	r.UserInfo.Username = user
	r.UserInfo.Groups = []string{"system:authenticated"}
	if flags&flagPipeline != 0 {
		r.UserInfo.Groups = append(r.UserInfo.Groups, "system:serviceaccounts")
		r.UserInfo.Username = changecontrolDeployer
	}
	if flags&flagDryRun != 0 {
		r.DryRun = ptr.To(true)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: r,
	})
	if err != nil {
		panic(err) // fuzzRaw makes every part valid JSON
	}
	return b, canary
}

// changecontrolDeployer is the pipeline the fixture's ConfigPolicy names.
const changecontrolDeployer = "system:serviceaccount:ci:deployer"

// fuzzRaw is b as the object of a review: JSON as is, anything else as a
// JSON string, nothing as no object.
func fuzzRaw(b []byte) runtime.RawExtension {
	if len(b) == 0 {
		return runtime.RawExtension{}
	}
	if json.Valid(b) {
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return runtime.RawExtension{Raw: buf.Bytes()}
		}
	}
	s, _ := json.Marshal(string(b))
	return runtime.RawExtension{Raw: s}
}

// plantCanary adds the canary to the data and stringData of a JSON object
// whose data and stringData are objects (or absent).
func plantCanary(obj []byte) ([]byte, bool) {
	var m map[string]any
	if len(obj) == 0 || json.Unmarshal(obj, &m) != nil || m == nil {
		return obj, false
	}
	data, ok := m["data"].(map[string]any)
	if m["data"] != nil && !ok {
		return obj, false
	}
	if data == nil {
		data = map[string]any{}
	}
	data["zz-fuzz-canary"] = fuzzCanaryB64
	m["data"] = data
	if sd, ok := m["stringData"].(map[string]any); ok {
		sd["zz-fuzz-canary-s"] = fuzzCanary
	}
	out, err := json.Marshal(m)
	if err != nil {
		return obj, false
	}
	return out, true
}

// fuzzExpect is what a body entitles its sender to.
type fuzzExpect struct {
	tooLarge bool
	decoded  bool
	gvk      schema.GroupVersionKind // the review's, when decoded
	req      admissionv1.AdmissionRequest
	// uid is the request's uid: the decoded review's, else what a JSON
	// reader finds at request.uid ("" if none).
	uid      types.UID
	complete bool
}

func expectFor(body []byte) fuzzExpect {
	var e fuzzExpect
	if len(body) > fuzzMaxBody {
		e.tooLarge = true
	} else {
		// A review is decoded when it is JSON of an AdmissionReview of
		// admission.k8s.io/v1 or v1beta1 (the same fields), field names
		// matched case-sensitively as the API machinery matches them; it
		// is answered in its own version.
		var ar admissionv1.AdmissionReview
		if utiljson.Unmarshal(body, &ar) == nil {
			if gvk := ar.GroupVersionKind(); gvk == v1Review || gvk == v1beta1Review {
				e.decoded, e.gvk = true, gvk
				if ar.Request != nil {
					e.req = *ar.Request
				}
			}
		}
	}
	if e.decoded {
		e.uid = e.req.UID
		r := e.req
		e.complete = r.UID != "" && r.Kind.Kind != "" && r.Kind.Version != "" &&
			r.Resource.Resource != "" && r.Resource.Version != "" && r.Operation != ""
	} else {
		var probe struct {
			Request *struct {
				UID types.UID `json:"uid"`
			} `json:"request"`
		}
		if len(body) < 1<<20 && json.Unmarshal(body, &probe) == nil && probe.Request != nil {
			e.uid = probe.Request.UID
		}
	}
	return e
}

var v1Review = schema.GroupVersionKind{Group: "admission.k8s.io", Version: "v1", Kind: "AdmissionReview"}
var v1beta1Review = schema.GroupVersionKind{Group: "admission.k8s.io", Version: "v1beta1", Kind: "AdmissionReview"}

// checkAnswer sends body to path and checks the answer against what the
// body entitles its sender to; canary, when set, must appear nowhere.
func checkAnswer(t *testing.T, chain http.Handler, path string, body []byte, canary [][]byte) {
	t.Helper()
	e := expectFor(body)
	fuzzOut.take()
	fuzzOut.armed.Store(true)
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	chain.ServeHTTP(rec, r)
	fuzzOut.armed.Store(false)
	leftovers := fuzzOut.take()

	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s\nrequest: %.2000q\nanswer: %.2000s", path, fmt.Sprintf(format, args...), body, rec.Body.Bytes())
	}
	if rec.Code != http.StatusOK {
		fail("HTTP %d, want 200 (the API server reads only the body of a 200)", rec.Code)
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	var out admissionv1.AdmissionReview
	if err := dec.Decode(&out); err != nil {
		fail("the answer is not an AdmissionReview: %v", err)
	}
	if dec.More() {
		fail("the answer holds more than one JSON document")
	}
	resp := out.Response
	if resp == nil {
		fail("the answer has no response")
	}
	msg := ""
	var code int32
	if resp.Result != nil {
		msg, code = resp.Result.Message, resp.Result.Code
	}
	if code == http.StatusInternalServerError && (strings.Contains(msg, "[recovered]") || strings.Contains(msg, "internal error while checking")) {
		fail("a handler panicked (recovered): %s", msg)
	}
	gvk := out.GroupVersionKind()
	switch {
	case e.tooLarge:
		if gvk != v1Review || code != http.StatusRequestEntityTooLarge || resp.Allowed {
			fail("an oversized review got %v allowed=%v code %d, want harden's v1 413 denial", gvk, resp.Allowed, code)
		}
	case e.decoded:
		if gvk != e.gvk {
			fail("the answer is a %v, the review a %v", gvk, e.gvk)
		}
		if resp.UID != e.uid {
			fail("the answer's uid is %q, the request's %q", resp.UID, e.uid)
		}
	}
	if e.uid != "" && resp.UID != e.uid {
		fail("the answer's uid is %q, the body's %q", resp.UID, e.uid)
	}
	if resp.UID != "" && resp.UID != e.uid {
		fail("the answer's uid is %q, which the body does not hold (%q)", resp.UID, e.uid)
	}
	if resp.Allowed {
		if !e.complete {
			fail("allowed a body that is not a complete AdmissionReview (decoded=%v request=%+v)", e.decoded, e.req)
		}
		if resp.Result != nil && code != http.StatusOK {
			fail("allowed with code %d", code)
		}
	} else if code < 400 || code > 599 || msg == "" {
		fail("a refusal with code %d and message %q, want a 4xx/5xx with a reason", code, msg)
	}
	if resp.PatchType != nil || len(resp.Patch) > 0 {
		if !resp.Allowed || path != ConfigHashPath {
			fail("a patch from %s (allowed=%v)", path, resp.Allowed)
		}
		if err := patchApplies(e.req, resp.Patch); err != nil {
			fail("the patch does not apply: %v", err)
		}
	}
	for _, c := range canary {
		if bytes.Contains(rec.Body.Bytes(), c) {
			fail("a Secret value (%s) is in the answer", c)
		}
		if i := bytes.Index(leftovers, c); i >= 0 {
			fail("a Secret value (%s) left the webhook: %.500s", c, leftovers[max(0, i-300):])
		}
	}
}

// patchApplies applies a JSON patch to the request's object as the API
// server holds it: the object decoded into its kind and written again (the
// API server sends what it serialised).
func patchApplies(req admissionv1.AdmissionRequest, patch []byte) error {
	var ops []jsonpatch.Operation
	if err := json.Unmarshal(patch, &ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return fmt.Errorf("an empty patch")
	}
	t, ok := workload.Builtin().Type(schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind})
	if !ok {
		return fmt.Errorf("a patch for kind %q", req.Kind.Kind)
	}
	obj := t.New()
	if err := newDecoder().DecodeRaw(req.Object, obj); err != nil {
		return fmt.Errorf("a patch for an object that does not decode: %w", err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	for _, op := range ops {
		if !strings.Contains(op.Path, "/annotations") {
			return fmt.Errorf("%s %s touches more than annotations", op.Operation, op.Path)
		}
		if doc, err = applyOp(doc, op); err != nil {
			return fmt.Errorf("%s %s: %w", op.Operation, op.Path, err)
		}
	}
	return nil
}

// applyOp applies one add or remove (all configward writes) as RFC 6902
// says: the parent of the target must exist; remove needs the target.
func applyOp(doc any, op jsonpatch.Operation) (any, error) {
	if !strings.HasPrefix(op.Path, "/") {
		return nil, fmt.Errorf("not a JSON pointer")
	}
	tokens := strings.Split(op.Path[1:], "/")
	for i, tok := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	parent := doc
	for _, tok := range tokens[:len(tokens)-1] {
		switch p := parent.(type) {
		case map[string]any:
			next, ok := p[tok]
			if !ok {
				return nil, fmt.Errorf("no %q", tok)
			}
			parent = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(p) {
				return nil, fmt.Errorf("no index %q", tok)
			}
			parent = p[i]
		default:
			return nil, fmt.Errorf("%q is not in an object", tok)
		}
	}
	m, ok := parent.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the parent is not an object")
	}
	last := tokens[len(tokens)-1]
	switch op.Operation {
	case "add":
		v, err := json.Marshal(op.Value)
		if err != nil {
			return nil, err
		}
		var val any
		if err := json.Unmarshal(v, &val); err != nil {
			return nil, err
		}
		m[last] = val
	case "remove":
		if _, ok := m[last]; !ok {
			return nil, fmt.Errorf("nothing to remove")
		}
		delete(m, last)
	default:
		return nil, fmt.Errorf("unexpected operation")
	}
	return doc, nil
}

type fuzzSeed struct {
	body              []byte
	op                string
	kind              uint8
	object, oldObject []byte
	user              string
	flags             uint8
}

// kindIndex is the index of kind in fuzzKinds, where it first comes with
// its own resource.
func kindIndex(tb testing.TB, kind string) uint8 {
	for i, k := range fuzzKinds {
		if k.kind.Kind == kind {
			return uint8(i)
		}
	}
	tb.Fatalf("no kind %s", kind)
	return 0
}

// fuzzSeeds are real reviews for each webhook: the body is the review the
// API server would send, and the structured parts are the same review.
func fuzzSeeds(tb testing.TB) []fuzzSeed {
	tb.Helper()
	j := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	seed := func(op admissionv1.Operation, kind string, obj, old any, user string, flags uint8) fuzzSeed {
		s := fuzzSeed{op: string(op), kind: kindIndex(tb, kind), user: user, flags: flags}
		if obj != nil {
			s.object = j(obj)
		}
		if old != nil {
			s.oldObject = j(old)
		}
		k := fuzzKinds[s.kind]
		r := &admissionv1.AdmissionRequest{
			UID: types.UID("0f3e2d1c-seed-4a5b-8c7d-" + strings.ToLower(kind)), Kind: k.kind, Resource: k.resource, Operation: op,
			Namespace: testNS, Object: fuzzRaw(s.object), OldObject: fuzzRaw(s.oldObject),
		}
		if m, ok := obj.(metav1.Object); ok {
			r.Name = m.GetName()
		} else if m, ok := old.(metav1.Object); ok {
			r.Name = m.GetName()
		}
		r.UserInfo.Username = user
		s.body = j(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: r})
		return s
	}
	web := deployment("web", podSpec([]corev1.EnvVar{envSecretKey("DB_PASSWORD", "db", "password")}, envFromConfigMap("app")))
	latest := deployment("api", podSpec(nil, envFromConfigMap("flags")))
	latest.Spec.Template.Spec.Containers[0].Image = "api:latest"
	latest.Spec.Template.Annotations = map[string]string{v1alpha1.ConfigHashAnnotation: "stale"}
	oldFlags := configMap("flags", map[string]string{"level": "info"}, nil)
	newFlags := configMap("flags", map[string]string{"level": "debug"}, map[string]string{v1alpha1.BreakGlassAnnotation: "INC-7"})
	oldDB := secret("db", dbData, map[string]string{v1alpha1.BreakGlassDeleteAnnotation: "rotating"})
	newDB := secret("db", map[string]string{"password": "swordfish"}, nil)
	strict := configPolicy("strict", v1alpha1.ConfigPolicySpec{
		Rules:       map[string]v1alpha1.RuleSettings{"secret-in-env": {Action: "Deny"}, "no-latest": {Action: "Warn"}},
		CustomRules: []v1alpha1.CustomRule{{ID: "no-latest", Rego: noLatestRego}},
		Pipeline:    v1alpha1.PipelineIdentities{ServiceAccounts: []string{"ci/deployer"}},
	})
	schemaObj := configSchema("app", "", appSchema)
	oldNS := namespace(testNS, map[string]string{v1alpha1.ChangeControlLabel: v1alpha1.ChangeControlGoverned})
	newNS := namespace(testNS, map[string]string{"team": "shop"})
	for _, n := range []*corev1.Namespace{oldNS, newNS} {
		n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
	}
	app := configMap("app", map[string]string{"other": "1"}, nil)
	return []fuzzSeed{
		seed(admissionv1.Create, "Deployment", web, nil, "alice", 0),
		seed(admissionv1.Update, "Deployment", latest, web, "alice", flagTrusted),
		seed(admissionv1.Create, "Pod", pod("runner", podSpec(nil, envFromConfigMap("app")), nil), nil, "alice", flagTrusted),
		seed(admissionv1.Create, "ConfigMap", app, nil, "alice", 0),
		seed(admissionv1.Update, "ConfigMap", newFlags, oldFlags, "alice", flagTrusted),
		seed(admissionv1.Update, "Secret", newDB, oldDB, "alice", 0),
		seed(admissionv1.Delete, "Secret", nil, oldDB, "alice", flagTrusted),
		seed(admissionv1.Create, "ConfigPolicy", strict, nil, "admin", 0),
		seed(admissionv1.Create, "ConfigSchema", schemaObj, nil, "admin", 0),
		seed(admissionv1.Update, "Namespace", newNS, oldNS, "admin", flagTrusted),
	}
}
