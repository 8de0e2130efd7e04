package admission

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/internal/workload"
)

// The serving-cert annotation alone brings the agent, with a volume per
// port that projects the certificate of the Secret the container mounts,
// never its key; a template that names a port ambiguously is refused at
// apply, saying what to write.
func TestServingCertInjection(t *testing.T) {
	secretVolume := func(name, secret string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
	}
	serving := func(annotation string, containers []corev1.Container, volumes ...corev1.Volume) *corev1.Pod {
		return withAnnotations(pod("", corev1.PodSpec{Volumes: volumes, Containers: containers}, nil), map[string]string{v1alpha1.ServingCertAnnotation: annotation})
	}
	mounting := func(name string, volumes ...string) corev1.Container {
		c := corev1.Container{Name: name, Image: name + ":1"}
		for _, v := range volumes {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/etc/" + v})
		}
		return c
	}
	cache := newCache(t, namespace(testNS, nil),
		secret("web-tls", map[string]string{"tls.crt": "c", "tls.key": "k", "ca.crt": "a"}, nil),
		secret("admin-tls", map[string]string{"tls.crt": "c", "tls.key": "k"}, nil),
		secret("creds", map[string]string{"password": "p"}, nil))
	validator := &ValidateWorkloads{Kinds: workload.Builtin(), Inventory: newInventory(cache), Policies: builtinPolicies(t), Namespaces: cache}
	h := &PodConfig{Inventory: newInventory(cache), Agent: &ReloadAgent{Image: "configward:test", ReportURL: "https://configward.example:9444" + reload.ReportPath}}

	t.Run("one container, one certificate: the agent checks it, with the certificate alone", func(t *testing.T) {
		p := serving("8443", []corev1.Container{mounting("web", "tls", "creds")}, secretVolume("tls", "web-tls"), secretVolume("creds", "creds"))
		resp := serve(h).Handle(context.Background(), req{op: admissionv1.Create, kind: podKind, object: p}.build(t))
		if !resp.Allowed || !strings.Contains(resp.Result.Message, "0 hot configs and 1 served certificates") {
			t.Fatalf("allowed %v: %+v", resp.Allowed, resp.Result)
		}
		var agent corev1.Container
		var volumes []corev1.Volume
		for _, op := range resp.Patches {
			switch {
			case op.Path == "/spec/initContainers":
				decode(t, op.Value.([]any)[0], &agent)
			case op.Path == "/spec/volumes/-":
				var v corev1.Volume
				if decode(t, op.Value, &v); v.Name != agentTokenVolume {
					volumes = append(volumes, v)
				}
			}
		}
		spec, err := reload.ParseSpec(agent.Env[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Certificates) != 1 || spec.Certificates[0] != (reload.ServingCert{Port: 8443, Container: "web", Secret: "web-tls", Dir: "/var/run/configward/cert/8443"}) ||
			len(spec.Configs) != 0 || spec.Trigger != "" {
			t.Errorf("spec %+v", spec)
		}
		if len(agent.Env) != 2 || agent.Env[1].Name != reload.PodIPEnv || agent.Env[1].ValueFrom.FieldRef.FieldPath != "status.podIP" {
			t.Errorf("env %+v: want the pod's address", agent.Env)
		}
		if len(volumes) != 1 || volumes[0].Projected == nil {
			t.Fatalf("volumes %+v: want the certificate's", volumes)
		}
		for _, src := range volumes[0].Projected.Sources {
			if src.Secret.Name != "web-tls" || len(src.Secret.Items) != 1 || src.Secret.Items[0].Key == "tls.key" {
				t.Errorf("the agent's certificate volume projects %+v: want tls.crt and ca.crt of web-tls, never the key", src.Secret)
			}
		}
		if m := agent.VolumeMounts[0]; m.Name != volumes[0].Name || m.MountPath != "/var/run/configward/cert/8443" || !m.ReadOnly {
			t.Errorf("mount %+v", m)
		}
	})

	refused := map[string]struct {
		annotation string
		containers []corev1.Container
		want       string
	}{
		"several containers, none named":    {"8443", []corev1.Container{mounting("web", "tls"), mounting("admin", "admin")}, "8443@<container>"},
		"a container the pod does not have": {"8443@api", []corev1.Container{mounting("web", "tls")}, "no container api"},
		"several certificates, none named":  {"8443@web", []corev1.Container{mounting("web", "tls", "admin")}, "8443@web;secret=<name>"},
		"a Secret the container does not mount": {"8443@web;secret=admin-tls", []corev1.Container{mounting("web", "tls")},
			"mounts no Secret admin-tls"},
		"no certificate mounted":    {"8443", []corev1.Container{mounting("web", "creds")}, "no Secret with a tls.crt"},
		"a port that is no port":    {"84430", []corev1.Container{mounting("web", "tls")}, "port 1-65535"},
		"an option nobody knows":    {"8443;verify=no", []corev1.Container{mounting("web", "tls")}, "neither sni=<DNS name> nor secret=<Secret name>"},
		"the same port twice":       {"8443,8443@web", []corev1.Container{mounting("web", "tls")}, "named twice"},
		"restart without the check": {"", nil, v1alpha1.OnStaleCertAnnotation},
		"another on-stale-cert":     {"8443", []corev1.Container{mounting("web", "tls")}, "is not Restart"},
	}
	for name, tc := range refused {
		t.Run("refused at apply: "+name, func(t *testing.T) {
			annotations := map[string]string{v1alpha1.ServingCertAnnotation: tc.annotation}
			switch name {
			case "restart without the check":
				annotations = map[string]string{v1alpha1.OnStaleCertAnnotation: v1alpha1.OnStaleCertRestart}
				tc.containers = []corev1.Container{mounting("web", "tls")}
			case "another on-stale-cert":
				annotations[v1alpha1.OnStaleCertAnnotation] = "Evict"
			}
			d := deployment("web", corev1.PodSpec{Containers: tc.containers, Volumes: []corev1.Volume{secretVolume("tls", "web-tls"), secretVolume("admin", "admin-tls"), secretVolume("creds", "creds")}})
			d.Spec.Template.Annotations = annotations
			resp := serve(validator).Handle(context.Background(), req{op: admissionv1.Create, kind: deploymentKind, name: "web", object: d}.build(t))
			if resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) || !strings.HasPrefix(resp.Result.Message, "[serving-cert] ") {
				t.Errorf("allowed %v, %q: want refused saying %q", resp.Allowed, resp.Result.Message, tc.want)
			}
		})
	}
	t.Run("a TLS Secret delivered in waves: the agent reads the channel the pod mounts", func(t *testing.T) {
		p := serving("8443", []corev1.Container{mounting("web", "tls")}, secretVolume("tls", "web-tls"))
		ops, _, err := h.Agent.inject(context.Background(), newInventory(cache), p, map[revision.Source]string{{Kind: refs.Secret, Name: "web-tls"}: "web-tls-ch-canary"})
		if err != nil {
			t.Fatal(err)
		}
		var agent corev1.Container
		for _, op := range ops {
			if op.Path == "/spec/initContainers" {
				decode(t, op.Value.([]any)[0], &agent)
			}
		}
		spec, err := reload.ParseSpec(agent.Env[0].Value)
		if err != nil || len(spec.Certificates) != 1 || spec.Certificates[0].Secret != "web-tls-ch-canary" {
			t.Errorf("%+v %v: want the channel", spec.Certificates, err)
		}
	})
	t.Run("named: each port gets the Secret it names", func(t *testing.T) {
		p := serving("8443@web;secret=web-tls;sni=web.shop.svc,9443@web;secret=admin-tls", []corev1.Container{mounting("web", "tls", "admin")},
			secretVolume("tls", "web-tls"), secretVolume("admin", "admin-tls"))
		certs, err := servingCerts(context.Background(), newInventory(cache), testNS, p.Annotations, &p.Spec)
		if err != nil || len(certs) != 2 || certs[0].Secret != "web-tls" || certs[0].SNI != "web.shop.svc" || certs[1].Secret != "admin-tls" {
			t.Errorf("%+v %v", certs, err)
		}
	})
}
