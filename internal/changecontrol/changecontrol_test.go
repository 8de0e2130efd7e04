package changecontrol

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
)

func TestChanges(t *testing.T) {
	base := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"bin": {1}}}
	}
	tests := []struct {
		name string
		edit func(*corev1.ConfigMap)
		want []string
	}{
		{"nothing", func(*corev1.ConfigMap) {}, nil},
		{"metadata only", func(c *corev1.ConfigMap) { c.Labels = map[string]string{"x": "y"} }, nil},
		{"free annotation", func(c *corev1.ConfigMap) { c.Annotations = map[string]string{"owner": "alice"} }, nil},
		{"break-glass annotations are the emergency path, not governing metadata", func(c *corev1.ConfigMap) {
			c.Annotations = map[string]string{v1alpha1.BreakGlassAnnotation: "x", v1alpha1.BreakGlassDeleteAnnotation: "y"}
		}, nil},
		{"reload mode", func(c *corev1.ConfigMap) { c.Annotations = map[string]string{v1alpha1.ReloadAnnotation: "ignore"} },
			[]string{`metadata.annotations["configward.dev/reload"]`}},
		{"exemption", func(c *corev1.ConfigMap) {
			c.Annotations = map[string]string{"configward.dev/exempt.config-schema": "why"}
		},
			[]string{`metadata.annotations["configward.dev/exempt.config-schema"]`}},
		{"schema named by annotation", func(c *corev1.ConfigMap) { c.Annotations = map[string]string{v1alpha1.SchemaAnnotation: "other"} },
			[]string{`metadata.annotations["configward.dev/schema"]`}},
		{"configward label", func(c *corev1.ConfigMap) { c.Labels = map[string]string{"configward.dev/anything": "x"} },
			[]string{`metadata.labels["configward.dev/anything"]`}},
		{"a label a ConfigSchema selects on", func(c *corev1.ConfigMap) { c.Labels = map[string]string{"schema-tier": "none"} },
			[]string{`metadata.labels["schema-tier"]`}},
		{"owner reference", func(c *corev1.ConfigMap) {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "ghost", UID: "no-such-uid"}}
		}, []string{"metadata.ownerReferences"}},
		{"finalizer", func(c *corev1.ConfigMap) { c.Finalizers = []string{"example.com/hold"} }, []string{"metadata.finalizers"}},
		{"value changed", func(c *corev1.ConfigMap) { c.Data["a"] = "9" }, []string{`data["a"]`}},
		{"key added and removed", func(c *corev1.ConfigMap) { delete(c.Data, "b"); c.Data["c"] = "" }, []string{`data["b"]`, `data["c"]`}},
		{"binary data", func(c *corev1.ConfigMap) { c.BinaryData["bin"] = []byte{2} }, []string{`binaryData["bin"]`}},
		{"made immutable", func(c *corev1.ConfigMap) { c.Immutable = ptr.To(true) }, []string{"immutable"}},
		{"immutable false is no change", func(c *corev1.ConfigMap) { c.Immutable = ptr.To(false) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base()
			tt.edit(n)
			schemaLabels := []string{"schema-tier"}
			if got := Changes(FromConfigMap(base(), schemaLabels), FromConfigMap(n, schemaLabels)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Changes = %q, want %q", got, tt.want)
			}
		})
	}

	old := &corev1.Secret{Data: map[string][]byte{"password": []byte("a")}, Type: corev1.SecretTypeOpaque}
	viaStringData := &corev1.Secret{Data: map[string][]byte{"password": []byte("a")}, StringData: map[string]string{"password": "b"}, Type: corev1.SecretTypeOpaque}
	if got := Changes(FromSecret(old), FromSecret(viaStringData)); !reflect.DeepEqual(got, []string{`data["password"]`}) {
		t.Errorf("stringData change = %q", got)
	}
	if old.Data["password"][0] != 'a' {
		t.Error("FromSecret changed the object it read")
	}
	manage := old.DeepCopy()
	manage.Annotations = map[string]string{"cert-manager.io/certificate-name": "x"}
	if got := Changes(FromSecret(old), FromSecret(manage)); !reflect.DeepEqual(got, []string{`metadata.annotations["cert-manager.io/certificate-name"]`}) {
		t.Errorf("cert-manager annotation on a Secret = %q", got)
	}
	if got := Changes(nil, FromConfigMap(base(), nil)); !reflect.DeepEqual(got, []string{`data["a"]`, `data["b"]`, `binaryData["bin"]`}) {
		t.Errorf("a create changes everything it sets: %q", got)
	}
	retyped := old.DeepCopy()
	retyped.Type = corev1.SecretTypeTLS
	if got := Changes(FromSecret(old), FromSecret(retyped)); !reflect.DeepEqual(got, []string{"type"}) {
		t.Errorf("type change = %q", got)
	}
}

func TestParseServiceAccount(t *testing.T) {
	if u, err := ParseServiceAccount("ci/deployer"); err != nil || u != "system:serviceaccount:ci:deployer" {
		t.Errorf("= %q, %v", u, err)
	}
	for _, bad := range []string{"deployer", "/x", "ci/", "a/b/c"} {
		if _, err := ParseServiceAccount(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDecide(t *testing.T) {
	human := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	deployer := authenticationv1.UserInfo{Username: "system:serviceaccount:ci:deployer", Groups: []string{"system:serviceaccounts"}}
	releaser := authenticationv1.UserInfo{Username: "bob", Groups: []string{"release-managers"}}
	certManager := authenticationv1.UserInfo{Username: "system:serviceaccount:cert-manager:cert-manager"}
	settings := Settings{
		Governed:    true,
		Pipeline:    Identities{ServiceAccounts: []string{deployer.Username}, Groups: []string{"release-managers"}},
		Configward:  Identities{ServiceAccounts: []string{"system:serviceaccount:configward:configward-controller"}},
		CertManager: Identities{ServiceAccounts: []string{certManager.Username}},
	}
	cm := func(data string, ann map[string]string) *Content {
		return FromConfigMap(&corev1.ConfigMap{Data: map[string]string{"level": data}, ObjectMeta: metav1.ObjectMeta{Annotations: ann}}, nil)
	}
	update := func(u authenticationv1.UserInfo, old, new *Content) Request {
		return Request{Operation: "UPDATE", User: u, Kind: "ConfigMap", Namespace: "shop", Name: "flags", Old: old, New: new}
	}
	tlsSecret := func(key string, ann map[string]string) *Content {
		return FromSecret(&corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.key": []byte(key)}, ObjectMeta: metav1.ObjectMeta{Annotations: ann}})
	}
	issued := map[string]string{"cert-manager.io/certificate-name": "serving"}

	tests := []struct {
		name     string
		settings *Settings // nil: the settings above
		req      Request
		rules    []string // rule ids of the findings
		action   rules.Action
		exempt   bool
		glass    string
	}{
		{name: "human edit of content", req: update(human, cm("info", nil), cm("debug", nil)), rules: []string{rules.OutOfPipelineEdit}},
		{name: "human metadata-only edit", req: update(human, cm("info", nil), cm("info", map[string]string{"team": "a"}))},
		{name: "pipeline service account", req: update(deployer, cm("info", nil), cm("debug", nil))},
		{name: "pipeline group", req: update(releaser, cm("info", nil), cm("debug", nil))},
		{name: "namespace not governed", settings: &Settings{Pipeline: settings.Pipeline}, req: update(human, cm("info", nil), cm("debug", nil))},
		{name: "break-glass", req: update(human, cm("info", nil), cm("debug", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-1"})), glass: "INC-1"},
		{name: "break-glass replayed", req: update(human, cm("info", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-1"}), cm("debug", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-1"})), rules: []string{rules.OutOfPipelineEdit}},
		{name: "break-glass blank", req: update(human, cm("info", nil), cm("debug", map[string]string{v1alpha1.BreakGlassAnnotation: "  "})), rules: []string{rules.OutOfPipelineEdit}},
		// Every new reason is recorded, the pipeline's and one set without
		// other changes too: a delivery of the content skips approvals on it.
		{name: "break-glass by the pipeline", req: update(deployer, cm("info", nil), cm("debug", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-4"})), glass: "INC-4"},
		{name: "break-glass reason alone", req: update(human, cm("info", nil), cm("info", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-5"})), glass: "INC-5"},
		{name: "immediate delivery without a new reason", req: update(human, cm("info", nil), cm("info", map[string]string{v1alpha1.BreakGlassDeliveryAnnotation: v1alpha1.BreakGlassImmediate})), rules: []string{rules.OutOfPipelineEdit}},
		{name: "break-glass not governed", settings: &Settings{Pipeline: settings.Pipeline}, req: update(human, cm("info", nil), cm("debug", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-6"}))},
		{name: "root CA publisher", req: update(authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:root-ca-cert-publisher"}, cm("a", nil), cm("b", nil)), exempt: true},
		{name: "configward", req: update(authenticationv1.UserInfo{Username: "system:serviceaccount:configward:configward-controller"}, cm("a", nil), cm("b", nil)), exempt: true},
		{name: "cert-manager renewing its Secret", req: Request{Operation: "UPDATE", User: certManager, Kind: "Secret", Old: tlsSecret("a", issued), New: tlsSecret("b", issued)}, exempt: true},
		{name: "cert-manager issuing a new Secret", req: Request{Operation: "CREATE", User: certManager, Kind: "Secret", New: tlsSecret("b", issued)}, exempt: true},
		{name: "cert-manager keeping its next private key", req: Request{Operation: "CREATE", User: certManager, Kind: "Secret",
			New: FromSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cert-manager.io/next-private-key": "true"}}})}, exempt: true},
		{name: "cert-manager deleting its next private key", req: Request{Operation: "DELETE", User: certManager, Kind: "Secret",
			Old: FromSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cert-manager.io/next-private-key": "true"}}})}, exempt: true},
		{name: "a human labelling a Secret as cert-manager's", req: Request{Operation: "UPDATE", User: human, Kind: "Secret", Old: FromSecret(&corev1.Secret{}),
			New: FromSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cert-manager.io/next-private-key": "true"}}})}, rules: []string{rules.OutOfPipelineEdit}},
		// Anyone who may create a Certificate could otherwise have
		// cert-manager overwrite a governed Secret: only the stored object
		// says whose it is.
		{name: "cert-manager taking over a Secret it does not manage yet", req: Request{Operation: "UPDATE", User: certManager, Kind: "Secret", Old: tlsSecret("a", nil), New: tlsSecret("b", issued)},
			rules: []string{rules.OutOfPipelineEdit}},
		{name: "cert-manager on a Secret it does not manage", req: Request{Operation: "UPDATE", User: certManager, Kind: "Secret", Old: tlsSecret("a", nil), New: tlsSecret("b", nil)}, rules: []string{rules.OutOfPipelineEdit}},
		{name: "human on a cert-manager Secret", req: Request{Operation: "UPDATE", User: human, Kind: "Secret", Old: tlsSecret("a", issued), New: tlsSecret("b", issued)}, rules: []string{rules.OutOfPipelineEdit}},
		{name: "helm release Secret", req: Request{Operation: "DELETE", User: human, Kind: "Secret", Name: "sh.helm.release.v1.web.v1",
			Old: FromSecret(&corev1.Secret{Type: HelmReleaseSecretType}), Consumers: []string{"Pod x"}}, exempt: true},
		{name: "helm creating a release Secret", req: Request{Operation: "CREATE", User: human, Kind: "Secret", Name: "sh.helm.release.v1.web.v2",
			New: FromSecret(&corev1.Secret{Type: HelmReleaseSecretType, Data: map[string][]byte{"release": []byte("x")}})}, exempt: true},
		// A workload's Secret re-created with Helm's type is not Helm's.
		{name: "a Secret of Helm's type under another name", req: Request{Operation: "CREATE", User: human, Kind: "Secret", Name: "db",
			New: FromSecret(&corev1.Secret{Type: HelmReleaseSecretType, Data: map[string][]byte{"password": []byte("x")}})}, rules: []string{rules.OutOfPipelineEdit}},
		{name: "human create", req: Request{Operation: "CREATE", User: human, Kind: "ConfigMap", New: cm("a", nil)}, rules: []string{rules.OutOfPipelineEdit}},
		{name: "pipeline create", req: Request{Operation: "CREATE", User: deployer, Kind: "ConfigMap", New: cm("a", nil)}},
		{name: "human create, namespace not governed", settings: &Settings{Pipeline: settings.Pipeline}, req: Request{Operation: "CREATE", User: human, Kind: "ConfigMap", New: cm("a", nil)}},
		{name: "break-glass create", req: Request{Operation: "CREATE", User: human, Kind: "ConfigMap", New: cm("a", map[string]string{v1alpha1.BreakGlassAnnotation: "INC-3"})}, glass: "INC-3"},
		{name: "human adds an owner reference", req: update(human, cm("a", nil), func() *Content {
			c := cm("a", nil)
			c.Governing["metadata.ownerReferences"] = "v1/ConfigMap/ghost/no-such-uid/false/false"
			return c
		}()), rules: []string{rules.OutOfPipelineEdit}},
		{name: "human marks the config not to roll", req: update(human, cm("a", nil), cm("a", map[string]string{v1alpha1.ReloadAnnotation: "ignore"})), rules: []string{rules.OutOfPipelineEdit}},
		{name: "human delete", req: Request{Operation: "DELETE", User: human, Kind: "ConfigMap", Old: cm("a", nil)}, rules: []string{rules.OutOfPipelineEdit}},
		{name: "human delete with break-glass-delete", req: Request{Operation: "DELETE", User: human, Kind: "ConfigMap", Old: cm("a", map[string]string{v1alpha1.BreakGlassDeleteAnnotation: "INC-2"})}, glass: "INC-2"},
		{name: "human delete in use", req: Request{Operation: "DELETE", User: human, Kind: "ConfigMap", Old: cm("a", nil), Consumers: []string{"Deployment web"}},
			rules: []string{rules.OutOfPipelineEdit, rules.ConfigInUseDelete}},
		{name: "in use, ungoverned namespace", settings: &Settings{}, req: Request{Operation: "DELETE", User: human, Kind: "ConfigMap", Old: cm("a", nil), Consumers: []string{"Deployment web"}},
			rules: []string{rules.ConfigInUseDelete}},
		{name: "in use, namespace terminating", req: Request{Operation: "DELETE", User: human, Kind: "ConfigMap", Old: cm("a", map[string]string{v1alpha1.BreakGlassDeleteAnnotation: "x"}), Consumers: []string{"Deployment web"}, NamespaceTerminating: true}, glass: "x"},
		{name: "in use, pipeline is warned", req: Request{Operation: "DELETE", User: deployer, Kind: "ConfigMap", Old: cm("a", nil), Consumers: []string{"Deployment web"}},
			rules: []string{rules.ConfigInUseDelete}, action: rules.Warn},
		{name: "namespace controller", req: Request{Operation: "DELETE", User: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:namespace-controller"}, Kind: "ConfigMap", Old: cm("a", nil), Consumers: []string{"Deployment web"}}, exempt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settings
			if tt.settings != nil {
				s = *tt.settings
			}
			v := Decide(s, tt.req)
			var rules []string
			for _, f := range v.Findings {
				rules = append(rules, f.Rule)
				if tt.action != "" && f.Action != tt.action {
					t.Errorf("action of %s = %q, want %q", f.Rule, f.Action, tt.action)
				}
				if strings.Contains(f.Message, "debug") || strings.Contains(f.Message, `"b"`) {
					t.Errorf("a value reached the message: %s", f.Message)
				}
			}
			if !reflect.DeepEqual(rules, tt.rules) {
				t.Errorf("findings = %v, want %v (%+v)", rules, tt.rules, v.Findings)
			}
			if (v.Exempt != "") != tt.exempt {
				t.Errorf("exempt = %q, want %v", v.Exempt, tt.exempt)
			}
			if v.BreakGlass != tt.glass {
				t.Errorf("break-glass = %q, want %q", v.BreakGlass, tt.glass)
			}
		})
	}
}

func TestDecideMessages(t *testing.T) {
	v := Decide(Settings{Governed: true}, Request{Operation: "UPDATE", User: authenticationv1.UserInfo{Username: "alice"}, Kind: "Secret", Namespace: "shop", Name: "db",
		Old: FromSecret(&corev1.Secret{Data: map[string][]byte{"user": []byte("u"), "password": []byte("hunter2")}}),
		New: FromSecret(&corev1.Secret{Data: map[string][]byte{"user": []byte("v"), "password": []byte("swordfish")}})})
	want := `alice changes data["password"] and data["user"] of Secret shop/db outside the pipeline. Make the change in version control and let the pipeline apply it; in an emergency, repeat the edit with a new annotation configward.dev/break-glass: "<reason>" (the edit is recorded).`
	if len(v.Findings) != 1 || v.Findings[0].Message != want {
		t.Fatalf("findings = %+v\nwant message %s", v.Findings, want)
	}

	v = Decide(Settings{}, Request{Operation: "DELETE", Kind: "ConfigMap", Namespace: "shop", Name: "flags", Old: &Content{},
		Consumers: []string{"CronJob a", "Deployment b", "Pod c", "StatefulSet d", "StatefulSet e"}})
	want = `ConfigMap shop/flags is used by CronJob a, Deployment b, Pod c and 2 more: their pods fail to start or to refresh it once it is gone. Remove the references (or the workloads) first.`
	if len(v.Findings) != 1 || v.Findings[0].Message != want {
		t.Fatalf("findings = %+v\nwant message %s", v.Findings, want)
	}

	v = Decide(Settings{Governed: true}, Request{Operation: "CREATE", User: authenticationv1.UserInfo{Username: "alice"}, Kind: "ConfigMap", Namespace: "shop", Name: "flags",
		New: FromConfigMap(&corev1.ConfigMap{Data: map[string]string{"level": "debug"}}, nil)})
	want = `alice creates ConfigMap shop/flags outside the pipeline. Create it through the pipeline; in an emergency, create it with an annotation configward.dev/break-glass: "<reason>" (the creation is recorded).`
	if len(v.Findings) != 1 || v.Findings[0].Message != want || v.Findings[0].Path != `data["level"]` {
		t.Fatalf("findings = %+v\nwant message %s", v.Findings, want)
	}
}

func TestLive(t *testing.T) {
	now := metav1.Now()
	isController := true
	owned := func(apiVersion, kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "u", Controller: &isController}}
	}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{"f"}}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: owned("apps/v1", "Deployment")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1-x", OwnerReferences: owned("apps/v1", "ReplicaSet")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "operated", OwnerReferences: owned("example.com/v1", "Database")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "nightly-1", OwnerReferences: owned("batch/v1", "CronJob")}},
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}},
	}
	want := []string{"CronJob nightly", "Deployment web", "Pod bare", "Pod operated"}
	if got := Names(workload.Builtin(), Live(workload.Builtin(), objs)); !reflect.DeepEqual(got, want) {
		t.Errorf("Live = %q, want %q", got, want)
	}
}

// A config snapshot is configward's alone: refused for everyone else,
// pipeline included, however the namespace is governed.
func TestSnapshotsAreConfigwards(t *testing.T) {
	snap := &Content{Data: map[string][]byte{"k": []byte("v")}, Immutable: true,
		Labels:      map[string]string{v1alpha1.SnapshotLabel: v1alpha1.SnapshotLabelValue},
		Annotations: map[string]string{v1alpha1.SnapshotOfAnnotation: "app"}}
	pipeline := authenticationv1.UserInfo{Username: "system:serviceaccount:ci:deployer"}
	own := authenticationv1.UserInfo{Username: "system:serviceaccount:configward:configward-controller"}
	s := Settings{Pipeline: Identities{ServiceAccounts: []string{pipeline.Username}},
		Configward: Identities{ServiceAccounts: []string{own.Username}}}
	for _, governed := range []bool{true, false} {
		s.Governed = governed
		for _, r := range []Request{
			{Operation: "DELETE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "app-1234567890", Old: snap},
			{Operation: "UPDATE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "app-1234567890", Old: snap, New: snap},
			{Operation: "CREATE", User: authenticationv1.UserInfo{Username: "mallory"}, Kind: "ConfigMap", Namespace: "shop", Name: "app-1234567890", New: snap},
		} {
			v := Decide(s, r)
			if !strings.HasPrefix(v.Refused, "[config-revision] ConfigMap shop/app-1234567890 is configward's snapshot of ConfigMap app") {
				t.Errorf("%s by %s (governed %v): %+v", r.Operation, r.User.Username, governed, v)
			}
		}
		if v := Decide(s, Request{Operation: "DELETE", User: own, Kind: "ConfigMap", Namespace: "shop", Name: "app-1234567890", Old: snap}); v.Exempt == "" {
			t.Errorf("configward's own delete was judged: %+v", v)
		}
		if v := Decide(s, Request{Operation: "DELETE", User: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:namespace-controller"},
			Kind: "ConfigMap", Namespace: "shop", Name: "app-1234567890", Old: snap}); v.Exempt == "" {
			t.Errorf("namespace deletion was judged: %+v", v)
		}
	}
}

// A ConfigSchema's spec is compared field by field, named as users write
// it; its break-glass annotations are the emergency path, not a change.
func TestConfigSchemaChanges(t *testing.T) {
	schema := func(required bool, annotations map[string]string) *Content {
		cs := &v1alpha1.ConfigSchema{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: v1alpha1.ConfigSchemaSpec{
			ConfigMapNames: []string{"app"},
			Keys:           []v1alpha1.KeySchema{{Name: "app.yaml", Format: "yaml", Required: required}},
		}}
		c, err := FromConfigSchema(cs)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got := Changes(schema(true, nil), schema(false, nil)); !slices.Equal(got, []string{"spec.keys"}) {
		t.Errorf("dropping required: %v, want [spec.keys]", got)
	}
	if got := Changes(schema(true, nil), schema(true, map[string]string{v1alpha1.BreakGlassAnnotation: "INC-1"})); len(got) != 0 {
		t.Errorf("a break-glass annotation alone: %v, want no change", got)
	}
	if got := Changes(nil, schema(true, nil)); !slices.Equal(got, []string{"spec.configMapNames", "spec.keys"}) {
		t.Errorf("a create: %v", got)
	}
}

// A channel of hot config is written by configward alone: a change written
// into it would reach its wave's pods past the delivery's gates. A write
// that makes an object look like a channel is refused the same way.
func TestChannelsAreConfigwards(t *testing.T) {
	ch := &Content{Data: map[string][]byte{"k": []byte("v")},
		Labels:      map[string]string{v1alpha1.ChannelLabel: v1alpha1.ChannelLabelValue},
		Annotations: map[string]string{v1alpha1.ChannelOfAnnotation: "flags", v1alpha1.ChannelWaveAnnotation: "canary"}}
	plain := &Content{Data: map[string][]byte{"k": []byte("v")}}
	pipeline := authenticationv1.UserInfo{Username: "system:serviceaccount:ci:deployer"}
	own := authenticationv1.UserInfo{Username: "system:serviceaccount:configward:configward-controller"}
	s := Settings{Pipeline: Identities{ServiceAccounts: []string{pipeline.Username}},
		Configward: Identities{ServiceAccounts: []string{own.Username}}}
	for _, governed := range []bool{true, false} {
		s.Governed = governed
		for _, r := range []Request{
			{Operation: "DELETE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", Old: ch},
			{Operation: "UPDATE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", Old: ch, New: ch},
			{Operation: "UPDATE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", Old: ch, New: plain},
			{Operation: "UPDATE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", Old: plain, New: ch},
			{Operation: "CREATE", User: authenticationv1.UserInfo{Username: "mallory"}, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", New: ch},
		} {
			v := Decide(s, r)
			if !strings.HasPrefix(v.Refused, "[config-delivery] ConfigMap shop/flags-ch-canary is configward's channel of ConfigMap flags for wave canary") {
				t.Errorf("%s by %s (governed %v): %+v", r.Operation, r.User.Username, governed, v)
			}
		}
		labelled := &Content{Data: map[string][]byte{"k": []byte("v")}, Labels: map[string]string{v1alpha1.ChannelLabel: "true"}}
		if v := Decide(s, Request{Operation: "CREATE", User: authenticationv1.UserInfo{Username: "mallory"}, Kind: "ConfigMap", Namespace: "shop", Name: "extra", New: labelled}); !strings.HasPrefix(v.Refused,
			`[config-delivery] ConfigMap shop/extra carries the label configward.dev/channel, which marks configward's channels`) || !strings.HasSuffix(v.Refused, `Remove metadata.labels["configward.dev/channel"] from the object.`) {
			t.Errorf("a create that only labels an object as a channel (governed %v): %+v", governed, v)
		}
		if v := Decide(s, Request{Operation: "UPDATE", User: own, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", Old: ch, New: ch}); v.Exempt == "" {
			t.Errorf("configward's own write was judged: %+v", v)
		}
		// Where config is delivered in waves, a channel's name is
		// configward's before the channel exists: an object written there
		// first (the pipeline's, say) would keep the channel from being
		// written, and the wave's pods would read it.
		waves := []v1alpha1.Wave{{Name: "canary"}, {Name: "rest"}}
		for _, r := range []Request{
			{Operation: "CREATE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", New: plain, ChannelWaves: waves},
			{Operation: "UPDATE", User: authenticationv1.UserInfo{Username: "mallory"}, Kind: "Secret", Namespace: "shop", Name: "db-ch-rest", Old: plain, New: plain, ChannelWaves: waves},
		} {
			if v := Decide(s, r); !strings.Contains(v.Refused, "has the name of a channel of hot config for wave") {
				t.Errorf("%s %s by %s (governed %v): %+v", r.Operation, r.Name, r.User.Username, governed, v)
			}
		}
		for _, r := range []Request{
			{Operation: "DELETE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", Old: plain, ChannelWaves: waves},
			{Operation: "CREATE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", New: plain},
			{Operation: "CREATE", User: pipeline, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-blue", New: plain, ChannelWaves: waves},
			{Operation: "UPDATE", User: own, Kind: "ConfigMap", Namespace: "shop", Name: "flags-ch-canary", Old: plain, New: plain, ChannelWaves: waves},
		} {
			if v := Decide(s, r); v.Refused != "" {
				t.Errorf("%s %s by %s, waves %v (governed %v): refused %s", r.Operation, r.Name, r.User.Username, r.ChannelWaves, governed, v.Refused)
			}
		}
	}
}
