package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/inventory/inventorytest"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/webhookserver"
)

// Shared fixtures of the handler tests. Nothing here runs an API server:
// the cache is controller-runtime's fake client holding what the real cache
// holds (digest-only ConfigMaps and Secrets, workloads under the consumer
// index), and requests are admission requests built by hand.

var testScheme = scheme.Scheme()

func newDecoder() webhookserver.Decoder { return webhookserver.Decoder{Scheme: testScheme} }

// serve is h as the webhook serves it: behind the adapter that checks and
// decodes each request.
func serve[K any](h webhookserver.Handler[K]) admission.Handler {
	return webhookserver.Adapt(h, newDecoder())
}

// serveReview sends body to h through the webhook's review codec, as the
// API server would.
func serveReview(t *testing.T, h admission.Handler, contentType, body string) admissionv1.AdmissionReview {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	webhookserver.Webhook("test", h).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d, want 200", rec.Code)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("not an AdmissionReview answer: %v: %s", err, rec.Body.String())
	}
	return out
}

// newCache and newInventory are the manager's cache and the inventory over
// it, as every handler test reads them (see inventorytest).
var (
	newCache     = inventorytest.Cache
	newInventory = inventorytest.Inventory
)

// Kinds and resources the requests name.
var (
	podKind            = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podsResource       = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	deploymentKind     = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	deploymentsRes     = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	replicaSetKind     = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	cronJobKind        = metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}
	configMapKind      = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMapsResource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretKind         = metav1.GroupVersionKind{Version: "v1", Kind: "Secret"}
	secretsResource    = metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}
	serviceKind        = metav1.GroupVersionKind{Version: "v1", Kind: "Service"}
	configSchemaKind   = metav1.GroupVersionKind{Group: "configward.dev", Version: "v1alpha1", Kind: "ConfigSchema"}
	configPolicyKind   = metav1.GroupVersionKind{Group: "configward.dev", Version: "v1alpha1", Kind: "ConfigPolicy"}
)

const testNS = "shop"

// newLive returns a plain reader, standing in for the API server.
func newLive(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(testScheme).WithObjects(objs...).Build()
}

var (
	defaultPoliciesOnce sync.Once
	defaultPolicies     *configpolicy.Store
	defaultPoliciesErr  error
)

// builtinPolicies is a store with the built-in rules and no ConfigPolicy,
// shared by the tests that do not load one.
func builtinPolicies(t *testing.T) *configpolicy.Store {
	t.Helper()
	defaultPoliciesOnce.Do(func() { defaultPolicies, defaultPoliciesErr = configpolicy.New(context.Background(), logr.Discard()) })
	if defaultPoliciesErr != nil {
		t.Fatal(defaultPoliciesErr)
	}
	return defaultPolicies
}

// policiesWith is a store with the built-in rules and the given policies.
func policiesWith(t *testing.T, specs ...v1alpha1.ConfigPolicySpec) *configpolicy.Store {
	t.Helper()
	if len(specs) == 0 {
		return builtinPolicies(t)
	}
	ctx := context.Background()
	s, err := configpolicy.New(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	for i, spec := range specs {
		cp := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('0'+i)), Generation: 1}, Spec: spec}
		if err := s.Load(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// jsonOf marshals v; a string or []byte is taken as JSON already.
func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	switch r := v.(type) {
	case nil:
		return nil
	case string:
		return []byte(r)
	case []byte:
		return r
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// req is an admission request in the compact form the tables use.
type req struct {
	op          admissionv1.Operation
	kind        metav1.GroupVersionKind
	resource    metav1.GroupVersionResource
	subResource string
	name        string
	user        string
	groups      []string
	dryRun      bool
	object      any // marshalled by jsonOf
	oldObject   any
}

// resources are the resources of the kinds the tests name: a request
// without one gets its kind's, as the API server sends it.
var resources = map[string]string{"ConfigPolicy": "configpolicies", "ConfigSchema": "configschemas", "Namespace": "namespaces"}

func (r req) build(t *testing.T) admission.Request {
	t.Helper()
	if r.resource.Resource == "" && r.kind.Kind != "" {
		res, ok := resources[r.kind.Kind]
		if !ok {
			res = strings.ToLower(r.kind.Kind) + "s"
		}
		r.resource = metav1.GroupVersionResource{Group: r.kind.Group, Version: r.kind.Version, Resource: res}
	}
	ns := testNS
	ar := admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: r.op, Kind: r.kind, Resource: r.resource, SubResource: r.subResource,
		Namespace: ns, Name: r.name,
		Object:    runtime.RawExtension{Raw: jsonOf(t, r.object)},
		OldObject: runtime.RawExtension{Raw: jsonOf(t, r.oldObject)},
	}
	ar.UserInfo.Username, ar.UserInfo.Groups = r.user, r.groups
	if r.dryRun {
		ar.DryRun = &r.dryRun
	}
	return admission.Request{AdmissionRequest: ar}
}

// expect is what a handler must answer.
type expect struct {
	allowed bool
	code    int32 // Result.Code
	// message is Result.Message exactly, unless contains is set: then each
	// entry must be a substring (for text from libraries, or very long).
	message  string
	contains []string
	lacks    []string          // substrings Result.Message must not hold
	warnings []string          // exactly, in order
	audit    map[string]string // exactly; nil means none
	patches  []jsonpatch.Operation
}

func (e expect) check(t *testing.T, resp admission.Response) {
	t.Helper()
	msg := ""
	var code int32
	if resp.Result != nil {
		msg, code = resp.Result.Message, resp.Result.Code
	}
	if resp.Allowed != e.allowed || code != e.code {
		t.Errorf("allowed=%v code=%d, want allowed=%v code=%d (message %q)", resp.Allowed, code, e.allowed, e.code, msg)
	}
	if e.contains != nil {
		for _, s := range e.contains {
			if !strings.Contains(msg, s) {
				t.Errorf("message %q\ndoes not contain %q", msg, s)
			}
		}
	} else if msg != e.message {
		t.Errorf("message\n got %q\nwant %q", msg, e.message)
	}
	for _, s := range e.lacks {
		if strings.Contains(msg, s) {
			t.Errorf("message %q holds %q", msg, s)
		}
	}
	if len(resp.Warnings) != 0 || len(e.warnings) != 0 {
		if !reflect.DeepEqual(resp.Warnings, e.warnings) {
			t.Errorf("warnings\n got %q\nwant %q", resp.Warnings, e.warnings)
		}
	}
	if len(resp.AuditAnnotations) != 0 || len(e.audit) != 0 {
		if !reflect.DeepEqual(resp.AuditAnnotations, e.audit) {
			t.Errorf("audit annotations\n got %q\nwant %q", resp.AuditAnnotations, e.audit)
		}
	}
	if len(resp.Patches) != 0 || len(e.patches) != 0 {
		if !reflect.DeepEqual(resp.Patches, e.patches) {
			t.Errorf("patches\n got %#v\nwant %#v", resp.Patches, e.patches)
		}
	}
}

// Shorthands for the usual answers.
func allowed(message string) expect { return expect{allowed: true, code: 200, message: message} }
func denied(message string) expect  { return expect{allowed: false, code: 403, message: message} }
func errored(code int32, contains ...string) expect {
	return expect{allowed: false, code: code, contains: contains}
}

func (e expect) withWarnings(w ...string) expect { e.warnings = w; return e }

// recorded drains a fake recorder.
func recorded(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Object builders.

func ptrTo[T any](v T) *T { return &v }

func configMap(name string, data map[string]string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Annotations: annotations},
		Data:       data,
	}
}

func secret(name string, data map[string]string, annotations map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Container parts.

func envFromConfigMap(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func envConfigMapKey(env, name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}}
}

func envSecretKey(env, name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}}
}

// podSpec is one container "app" with the given env and envFrom.
func podSpec(env []corev1.EnvVar, envFrom ...corev1.EnvFromSource) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Env: env, EnvFrom: envFrom}}}
}

func deployment(name string, spec corev1.PodSpec) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
	}
	d.Spec.Template.Spec = spec
	return d
}

func pod(name string, spec corev1.PodSpec, controller *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       spec,
	}
	if controller != nil {
		p.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	return p
}

func controllerRef(apiVersion, kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "owner-uid", Controller: ptrTo(true)}
}

// failing is a reader that answers every Get of an object of the same type
// as like, and every List, with err; other Gets are answered from objs.
func failing(like client.Object, err error, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(testScheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if reflect.TypeOf(obj) == reflect.TypeOf(like) {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return err
		},
	}).Build()
}

// cause is one expected cause of a 422 Invalid answer: the field exactly,
// the message by a substring.
type cause struct {
	field   string
	typ     metav1.CauseType
	message string
}

// checkInvalid checks a refusal the way the API server refuses an invalid
// object: 422, reason Invalid, the object named, one cause per problem.
func checkInvalid(t *testing.T, resp admission.Response, kind, name string, want []cause) {
	t.Helper()
	if resp.Allowed || resp.Result == nil {
		t.Fatalf("allowed=%v result=%v, want a 422 refusal", resp.Allowed, resp.Result)
	}
	r := resp.Result
	if r.Code != 422 || r.Reason != metav1.StatusReasonInvalid || r.Status != metav1.StatusFailure {
		t.Errorf("code=%d reason=%q status=%q, want 422 Invalid Failure", r.Code, r.Reason, r.Status)
	}
	if prefix := kind + `.configward.dev "` + name + `" is invalid: `; !strings.HasPrefix(r.Message, prefix) {
		t.Errorf("message %q does not start with %q", r.Message, prefix)
	}
	if r.Details == nil || r.Details.Kind != kind || r.Details.Group != "configward.dev" || r.Details.Name != name {
		t.Fatalf("details %+v, want %s %q in configward.dev", r.Details, kind, name)
	}
	got := r.Details.Causes
	if len(got) != len(want) {
		t.Fatalf("causes %+v, want %d: %+v", got, len(want), want)
	}
	for i, w := range want {
		if got[i].Field != w.field || got[i].Type != w.typ || !strings.Contains(got[i].Message, w.message) {
			t.Errorf("cause %d: %+v, want field %q type %q message containing %q", i, got[i], w.field, w.typ, w.message)
		}
		if !strings.Contains(r.Message, w.field) {
			t.Errorf("message %q does not name %s", r.Message, w.field)
		}
	}
}
