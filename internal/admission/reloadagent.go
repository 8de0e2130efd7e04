package admission

import (
	"context"
	"encoding/json"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
	"github.com/configward/configward/internal/revision"
)

// ReloadAgent injects configward's reload agent, at a pod's creation, into
// pods whose template asks for it (v1alpha1.ReloadAgentAnnotation): a
// native sidecar (an init container that restarts) that mounts the hot
// ConfigMaps and Secrets the pod mounts as directories, read-only, with a
// projected token of its own audience to report with. The pod's own
// template stays as written.
type ReloadAgent struct {
	// Image is configward's image, which holds the agent.
	Image string
	// ReportURL is where agents report; CA the PEM of the authority the
	// report endpoint's certificate chains to, handed to each agent.
	ReportURL string
	CA        func() string
	// ServerName is the name agents check the endpoint's certificate
	// against, where ReportURL names it by address.
	ServerName string
}

// Names of what the injection adds to a pod.
const (
	agentTokenVolume = "configward-agent-token"
	agentTokenDir    = "/var/run/configward/agent"
	agentConfigDir   = "/var/run/configward/config/" // never under /configward, the binary in configward's image
	// agentTokenSeconds is the token's life; the kubelet renews it before
	// it ends.
	agentTokenSeconds = 3600
)

// ParseReloadAnnotations checks a pod template's reload annotations: the
// served certificate's (ParseServingCertAnnotations), then the reload
// agent's and its check's.
func ParseReloadAnnotations(annotations map[string]string) error {
	if err := ParseServingCertAnnotations(annotations); err != nil {
		return err
	}
	return parseAgentAnnotations(annotations)
}

// ParseServingCertAnnotations checks a pod template's served-certificate
// annotations (the check, and what to do when it finds a stale one).
func ParseServingCertAnnotations(annotations map[string]string) error {
	if c, ok := annotations[v1alpha1.ServingCertAnnotation]; ok {
		if _, err := reload.ParseServingCerts(c); err != nil {
			return fmt.Errorf("%s: %w", v1alpha1.ServingCertAnnotation, err)
		}
	}
	if v, ok := annotations[v1alpha1.OnStaleCertAnnotation]; ok {
		if v != v1alpha1.OnStaleCertRestart {
			return fmt.Errorf("%s: %q is not %s (or leave it out: configward then only reports a stale certificate)", v1alpha1.OnStaleCertAnnotation, v, v1alpha1.OnStaleCertRestart)
		}
		if _, checked := annotations[v1alpha1.ServingCertAnnotation]; !checked {
			return fmt.Errorf("%s is set without %s: say which port serves the certificate", v1alpha1.OnStaleCertAnnotation, v1alpha1.ServingCertAnnotation)
		}
	}
	return nil
}

// parseAgentAnnotations checks the reload agent's annotations and its
// check's.
func parseAgentAnnotations(annotations map[string]string) error {
	v, ok := annotations[v1alpha1.ReloadAgentAnnotation]
	if !ok {
		if _, check := annotations[v1alpha1.ReloadCheckAnnotation]; check {
			return fmt.Errorf("%s is set without %s: say how the program reloads (watch, if it watches its files)", v1alpha1.ReloadCheckAnnotation, v1alpha1.ReloadAgentAnnotation)
		}
		return nil
	}
	if _, err := reload.ParseTrigger(v); err != nil {
		return fmt.Errorf("%s: %w", v1alpha1.ReloadAgentAnnotation, err)
	}
	if c, ok := annotations[v1alpha1.ReloadCheckAnnotation]; ok {
		if _, err := reload.ParseCheck(c); err != nil {
			return fmt.Errorf("%s: %w", v1alpha1.ReloadCheckAnnotation, err)
		}
	}
	return nil
}

// AsksForAgent says whether annotations (a pod's, or a template's) ask for
// the reload agent: to reload hot config, or to check a served certificate.
func AsksForAgent(annotations map[string]string) bool {
	_, reloads := annotations[v1alpha1.ReloadAgentAnnotation]
	_, certs := annotations[v1alpha1.ServingCertAnnotation]
	return reloads || certs
}

// inject returns the patch that adds the agent to pod, or why it adds none.
//
// pointed names the channels the same review points hot config at: the
// agent watches (and reports on) what the pod will mount.
func (a *ReloadAgent) inject(ctx context.Context, inv *inventory.Inventory, pod *corev1.Pod, pointed map[revision.Source]string) ([]jsonpatch.Operation, string, error) {
	if err := ParseReloadAnnotations(pod.Annotations); err != nil {
		return nil, "no reload agent: " + err.Error(), nil
	}
	if reload.HasAgent(pod) {
		return nil, "the reload agent is in the pod already", nil
	}
	trigger, _ := reload.ParseTrigger(pod.Annotations[v1alpha1.ReloadAgentAnnotation])
	target := -1
	if trigger.Mode == reload.Signal {
		if target = containerIndex(pod.Spec.Containers, trigger.Container); target < 0 {
			return nil, fmt.Sprintf("no reload agent: %s names container %s, which the pod does not have", v1alpha1.ReloadAgentAnnotation, trigger.Container), nil
		}
	}
	var configs []reload.Config
	var mounts []corev1.VolumeMount
	if _, reloads := pod.Annotations[v1alpha1.ReloadAgentAnnotation]; reloads {
		var err error
		if configs, mounts, err = hotDirectories(ctx, inv, pod, pointed); err != nil {
			return nil, "", err
		}
	}
	certs, err := servingCerts(ctx, inv, pod.Namespace, pod.Annotations, &pod.Spec)
	if err != nil {
		return nil, "no reload agent: " + v1alpha1.ServingCertAnnotation + ": " + err.Error(), nil
	}
	for i, c := range certs {
		// A hot TLS Secret delivered in waves reaches the pod through its
		// wave's channel: the agent compares with what the pod mounts.
		if ch, ok := pointed[revision.Source{Kind: refs.Secret, Name: c.Secret}]; ok {
			certs[i].Secret = ch
		}
	}
	if len(configs) == 0 && len(certs) == 0 {
		return nil, "no reload agent: the pod mounts no hot ConfigMap or Secret as a directory", nil
	}
	var certVolumes []corev1.Volume
	for _, c := range certs {
		v, m := reload.CertVolume(c)
		certVolumes, mounts = append(certVolumes, v), append(mounts, m)
	}
	spec := reload.Spec{Trigger: pod.Annotations[v1alpha1.ReloadAgentAnnotation], Check: pod.Annotations[v1alpha1.ReloadCheckAnnotation],
		Report: a.ReportURL, ServerName: a.ServerName, TokenFile: agentTokenDir + "/token", Configs: configs, Certificates: certs}
	if len(configs) == 0 {
		// Nothing to reload: the agent only checks certificates.
		spec.Trigger, spec.Check = "", ""
	}
	if a.CA != nil {
		spec.CA = a.CA()
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, "", err
	}
	c := a.container(string(specJSON), append(mounts, corev1.VolumeMount{Name: agentTokenVolume, MountPath: agentTokenDir, ReadOnly: true}))
	if len(certs) > 0 {
		// Where nothing answers on localhost, the agent dials the pod's
		// own address.
		c.Env = append(c.Env, corev1.EnvVar{Name: reload.PodIPEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	}
	if target >= 0 {
		// Signals need the program's user: the agent runs as the
		// container it signals does, where that is set.
		c.SecurityContext.RunAsUser = runAsUser(pod, &pod.Spec.Containers[target])
	}
	var ops []jsonpatch.Operation
	if pod.Spec.ServiceAccountName == "" {
		// The agent's token is the pod's service account's. The API
		// server's ServiceAccount admission names "default" before
		// webhooks run; where it is off, a projected token without a
		// named account is invalid, so name the one it would.
		ops = append(ops, jsonpatch.Operation{Operation: "add", Path: "/spec/serviceAccountName", Value: "default"})
	}
	ops = appendItem(ops, "/spec/initContainers", len(pod.Spec.InitContainers), c)
	volumes := append([]corev1.Volume{{Name: agentTokenVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: reload.Audience, ExpirationSeconds: ptr.To[int64](agentTokenSeconds), Path: "token"}}}}}}}, certVolumes...)
	for i, v := range volumes {
		ops = appendItem(ops, "/spec/volumes", len(pod.Spec.Volumes)+i, v)
	}
	if target >= 0 {
		// The agent finds the program's processes, and signals them, in the
		// pod's one process namespace.
		ops = append(ops, jsonpatch.Operation{Operation: "add", Path: "/spec/shareProcessNamespace", Value: true})
		ops = appendItem(ops, fmt.Sprintf("/spec/containers/%d/env", target), len(pod.Spec.Containers[target].Env),
			corev1.EnvVar{Name: reload.ContainerEnv, Value: trigger.Container})
	}
	return ops, fmt.Sprintf("reload agent injected for %d hot configs and %d served certificates", len(configs), len(certs)), nil
}

// container is the agent's container: restricted (non-root, read-only
// root, no capabilities, no privilege escalation) and small.
func (a *ReloadAgent) container(spec string, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:          reload.AgentContainer,
		Image:         a.Image,
		Args:          []string{"agent"},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Env:           []corev1.EnvVar{{Name: reload.SpecEnv, Value: spec}},
		VolumeMounts:  mounts,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("48Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// hotDirectories lists the hot config pod mounts as volumes of their own
// (inventory.HotMounts), each with the mount the agent reads it through.
func hotDirectories(ctx context.Context, inv *inventory.Inventory, pod *corev1.Pod, pointed map[revision.Source]string) ([]reload.Config, []corev1.VolumeMount, error) {
	hot, err := inv.HotMounts(ctx, pod.Namespace, &pod.Spec)
	if err != nil {
		return nil, nil, err
	}
	var configs []reload.Config
	var mounts []corev1.VolumeMount
	for _, m := range hot {
		name := m.Ref.Name
		if ch, ok := pointed[revision.Source{Kind: m.Ref.Kind, Name: name}]; ok {
			name = ch
		}
		c := reload.Config{Kind: string(m.Ref.Kind), Name: name, Dir: agentConfigDir + m.Ref.Volume, Items: m.Ref.Files}
		configs = append(configs, c)
		mounts = append(mounts, corev1.VolumeMount{Name: m.Ref.Volume, MountPath: c.Dir, ReadOnly: true})
	}
	return configs, mounts, nil
}

// appendItem adds item at the end of the list at path, which holds n
// items (a JSON patch cannot append to a list that is not there).
func appendItem(ops []jsonpatch.Operation, path string, n int, item any) []jsonpatch.Operation {
	if n == 0 {
		return append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: []any{item}})
	}
	return append(ops, jsonpatch.Operation{Operation: "add", Path: path + "/-", Value: item})
}

func containerIndex(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

// runAsUser is the user a container runs as, where the pod says: its own
// securityContext, or the pod's.
func runAsUser(pod *corev1.Pod, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.RunAsUser
	}
	return nil
}
