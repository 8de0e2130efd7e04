package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/reload"
)

// The agent goes into a pod that asks for it and mounts hot config as its
// own volume, watching exactly those volumes; a pod that cannot use it is
// left as written, saying why.
func TestReloadAgentInjection(t *testing.T) {
	hot := map[string]string{v1alpha1.ReloadAnnotation: v1alpha1.ReloadHot}
	volume := func(name string, src corev1.VolumeSource) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: src}
	}
	cm := func(name string, items ...corev1.KeyToPath) corev1.VolumeSource {
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items}}
	}
	uid := int64(1000)
	agentPod := func(trigger string, volumes ...corev1.Volume) *corev1.Pod {
		spec := corev1.PodSpec{Volumes: volumes, SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid},
			Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "proxy", Image: "proxy:1"}}}
		for _, v := range volumes {
			spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/etc/" + v.Name})
		}
		return withAnnotations(pod("", spec, nil), map[string]string{v1alpha1.ReloadAgentAnnotation: trigger})
	}
	cache := newCache(t, namespace(testNS, nil),
		configMap("flags", map[string]string{"flags.yaml": "beta: false"}, hot),
		configMap("routes", map[string]string{"routes.yaml": "[]"}, hot),
		configMap("static", map[string]string{"static.yaml": "x"}, nil),
		secret("tls", map[string]string{"tls.crt": "c"}, hot))
	h := &PodConfig{Inventory: newInventory(cache), Agent: &ReloadAgent{Image: "configward:test", ReportURL: "https://configward.example:9444" + reload.ReportPath,
		CA: func() string { return "PEM" }}}

	t.Run("signal: hot directories watched, the process namespace shared, the target marked", func(t *testing.T) {
		p := agentPod("signal:SIGHUP@app",
			volume("flags", cm("flags")),
			volume("routes", cm("routes", corev1.KeyToPath{Key: "routes.yaml", Path: "conf/routes"})),
			volume("static", cm("static")),
			volume("tls", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}),
			volume("bundle", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "flags"}}}}}}))
		resp := serve(h).Handle(context.Background(), req{op: admissionv1.Create, kind: podKind, object: p}.build(t))
		if !resp.Allowed || !strings.Contains(resp.Result.Message, "reload agent injected for 3 hot configs") {
			t.Fatalf("allowed %v: %+v", resp.Allowed, resp.Result)
		}
		got := map[string]any{}
		for _, op := range resp.Patches {
			got[op.Path] = op.Value
		}
		var c corev1.Container
		decode(t, got["/spec/initContainers"].([]any)[0], &c)
		if c.Name != reload.AgentContainer || c.Image != "configward:test" || c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("agent container %s %s %v", c.Name, c.Image, c.RestartPolicy)
		}
		if s := c.SecurityContext; s.RunAsUser == nil || *s.RunAsUser != uid || !*s.RunAsNonRoot || !*s.ReadOnlyRootFilesystem || *s.AllowPrivilegeEscalation {
			t.Errorf("security context %+v: want restricted, as the signalled container's user", s)
		}
		spec, err := reload.ParseSpec(c.Env[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		want := []reload.Config{
			{Kind: "ConfigMap", Name: "flags", Dir: "/var/run/configward/config/flags"},
			{Kind: "ConfigMap", Name: "routes", Dir: "/var/run/configward/config/routes", Items: map[string]string{"conf/routes": "routes.yaml"}},
			{Kind: "Secret", Name: "tls", Dir: "/var/run/configward/config/tls"},
		}
		if gotJSON, wantJSON := jsonOf(t, spec.Configs), jsonOf(t, want); string(gotJSON) != string(wantJSON) {
			t.Errorf("configs\n got %s\nwant %s", gotJSON, wantJSON)
		}
		if spec.CA != "PEM" || spec.Trigger != "signal:SIGHUP@app" || !strings.HasSuffix(spec.Report, reload.ReportPath) {
			t.Errorf("spec %+v", spec)
		}
		var mounts []string
		for _, m := range c.VolumeMounts {
			if !m.ReadOnly {
				t.Errorf("mount %s is writable", m.Name)
			}
			mounts = append(mounts, m.Name)
		}
		if strings.Join(mounts, ",") != "flags,routes,tls,"+agentTokenVolume {
			t.Errorf("agent mounts %v", mounts)
		}
		var token corev1.Volume
		decode(t, got["/spec/volumes/-"], &token)
		if token.Projected == nil || token.Projected.Sources[0].ServiceAccountToken.Audience != reload.Audience {
			t.Errorf("token volume %+v", token)
		}
		if got["/spec/shareProcessNamespace"] != true {
			t.Errorf("shareProcessNamespace not set")
		}
		var marker corev1.EnvVar
		decode(t, got["/spec/containers/0/env"].([]any)[0], &marker)
		if marker.Name != reload.ContainerEnv || marker.Value != "app" {
			t.Errorf("target marker %+v", marker)
		}
		if _, other := got["/spec/containers/1/env"]; other {
			t.Errorf("a container the signal does not name is marked")
		}
	})

	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"watch: no signal, so nothing shared": {agentPod("watch", volume("flags", cm("flags"))), "reload agent injected for 1 hot configs"},
		"no hot config as a directory":        {agentPod("watch", volume("static", cm("static"))), "no reload agent: the pod mounts no hot ConfigMap or Secret as a directory"},
		"a signal for a container not there":  {agentPod("signal:SIGHUP@web", volume("flags", cm("flags"))), "no reload agent: configward.dev/reload-agent names container web, which the pod does not have"},
		"an annotation that does not parse":   {agentPod("signal:SIGKILL@app", volume("flags", cm("flags"))), "no reload agent: configward.dev/reload-agent:"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := serve(h).Handle(context.Background(), req{op: admissionv1.Create, kind: podKind, object: tc.pod}.build(t))
			if !resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) {
				t.Fatalf("allowed %v: %q, want %q", resp.Allowed, resp.Result.Message, tc.want)
			}
			for _, op := range resp.Patches {
				if op.Path == "/spec/shareProcessNamespace" || strings.HasPrefix(op.Path, "/spec/containers") {
					t.Errorf("patched %s", op.Path)
				}
			}
		})
	}

	t.Run("already there: the webhook's reinvocation adds nothing", func(t *testing.T) {
		p := agentPod("watch", volume("flags", cm("flags")))
		p.Spec.InitContainers = []corev1.Container{{Name: reload.AgentContainer}}
		resp := serve(h).Handle(context.Background(), req{op: admissionv1.Create, kind: podKind, object: p}.build(t))
		if len(resp.Patches) != 0 || !strings.Contains(resp.Result.Message, "in the pod already") {
			t.Fatalf("%d patches: %q", len(resp.Patches), resp.Result.Message)
		}
	})
}

// decode reads a patch value (a Go value the patch holds) as out.
func decode(t *testing.T, v any, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}
