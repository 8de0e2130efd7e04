package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// The soak's world: a bounded set of names, reused for the whole run, so
// that after warm-up the cluster holds about as many objects at the end
// as at the start and what configward keeps in memory should not grow.
const (
	// workloadsNS holds the Deployments and the ConfigMaps and Secrets
	// they consume; the ConfigPolicy selects it.
	workloadsNS = "soak-workloads"
	// schemasNS holds the ConfigSchema and the ConfigMaps it governs.
	schemasNS = "soak-schemas"

	deployments = 50
	// configs ConfigMaps and as many Secrets: Deployment j consumes
	// ConfigMap cfg-(j mod configs) and Secret sec-(j/2 mod configs), so
	// each config object has two consumers and a change to it rolls two
	// Deployments.
	configs       = 25
	schemaConfigs = 50

	schemaName  = "app"
	schemaLabel = "soak.configward.dev/schema"
	policyName  = "soak"
	// canaryRule is the ConfigPolicy's custom rule; the policy swaps its
	// action between Warn and Deny.
	canaryRule = "soak-no-canary"
)

func configMapName(i int) string  { return fmt.Sprintf("cfg-%02d", i) }
func secretName(i int) string     { return fmt.Sprintf("sec-%02d", i) }
func deploymentName(j int) string { return fmt.Sprintf("web-%02d", j) }
func schemaCMName(k int) string   { return fmt.Sprintf("app-%02d", k) }

// createWorld creates the namespaces, the consumed config, the ConfigSchema
// and the ConfigPolicy (its Deny variant), and waits until the webhook
// enforces both.
func createWorld(ctx context.Context) {
	for _, ns := range []string{workloadsNS, schemasNS} {
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for i := range configs {
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: workloadsNS, Name: configMapName(i)},
			Data: map[string]string{"rev": "0"}})).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: workloadsNS, Name: secretName(i)},
			StringData: map[string]string{"token": "t-0"}})).To(Succeed())
	}
	Expect(env.Client.Create(ctx, configSchema())).To(Succeed())
	Expect(env.Client.Create(ctx, &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName}, Spec: policySpec(true)})).To(Succeed())

	Eventually(func() string { return dryRunDenial(ctx, schemaConfigMap(0, 3)) }, time.Minute, 200*time.Millisecond).
		Should(ContainSubstring("[config-schema]"), "the ConfigSchema is not enforced")
	canary := deployment(0, 0)
	canary.Spec.Template.Spec.Containers[0].Image = canaryImage
	Eventually(func() string { return dryRunDenial(ctx, canary) }, time.Minute, 200*time.Millisecond).
		Should(ContainSubstring("["+canaryRule+"]"), "the ConfigPolicy is not in force")
}

// dryRunDenial creates obj as a server-side dry run and returns the error,
// if any.
func dryRunDenial(ctx context.Context, obj client.Object) string {
	if err := env.Client.Create(ctx, obj, client.DryRunAll); err != nil {
		return err.Error()
	}
	return ""
}

// configSchema governs the ConfigMaps labelled soak.configward.dev/schema=app:
// app.yaml, YAML with an integer server.port, and optional limits.json, JSON
// with an integer maxConnections; no other key.
func configSchema() *v1alpha1.ConfigSchema {
	return &v1alpha1.ConfigSchema{
		ObjectMeta: metav1.ObjectMeta{Namespace: schemasNS, Name: schemaName},
		Spec: v1alpha1.ConfigSchemaSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{schemaLabel: schemaName}},
			Keys: []v1alpha1.KeySchema{
				{Name: "app.yaml", Format: "yaml", Required: true, Schema: &apiextensionsv1.JSON{Raw: []byte(
					`{"type":"object","required":["server"],"properties":{"server":{"type":"object","required":["port"],` +
						`"properties":{"port":{"type":"integer","minimum":1,"maximum":65535}}}}}`)}},
				{Name: "limits.json", Format: "json", Schema: &apiextensionsv1.JSON{Raw: []byte(
					`{"type":"object","properties":{"maxConnections":{"type":"integer","minimum":0}}}`)}},
			},
		},
	}
}

// schemaConfigMap is governed ConfigMap k at its visit v: valid content, or
// (when invalid(v)) one of three ways of breaking the schema.
func schemaConfigMap(k, v int) *corev1.ConfigMap {
	data := map[string]string{
		"app.yaml":    fmt.Sprintf("server:\n  port: %d\nlog:\n  level: info\n", 1024+v%60000),
		"limits.json": fmt.Sprintf(`{"maxConnections": %d}`, v),
	}
	if invalid(v) {
		switch (v / 5) % 3 {
		case 0:
			data["app.yaml"] = "server:\n  port: eighty\n"
		case 1:
			data["limits.json"] = `{"maxConnections": `
		case 2:
			data["app.yml"] = "server:\n  port: 8080\n" // a typo of the key name
		}
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: schemasNS, Name: schemaCMName(k), Labels: map[string]string{schemaLabel: schemaName}},
		Data:       data,
	}
}

// invalid says whether visit v of a governed ConfigMap writes content that
// breaks the schema: one visit in five.
func invalid(v int) bool { return v%5 == 3 }

// canaryImage is the image the ConfigPolicy's custom rule flags.
const canaryImage = "registry.example/app:canary"

// deployment is Deployment j at its visit v: one pod mounting its ConfigMap;
// even ones read their Secret's token through env (which rule
// secret-in-env reports), odd ones mount it.
func deployment(j, v int) *appsv1.Deployment {
	labels := map[string]string{"app": deploymentName(j)}
	spec := corev1.PodSpec{
		Containers: []corev1.Container{container(j, v)},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(j % configs)}}}}},
	}
	if j%2 == 1 {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "secret", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: secretName(j / 2 % configs)}}})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadsNS, Name: deploymentName(j)},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			// Old ReplicaSets are what a Deployment keeps of its history;
			// two keeps their number, and so the caches, at a steady size
			// soon after warm-up.
			RevisionHistoryLimit: new(int32(2)),
			Selector:             &metav1.LabelSelector{MatchLabels: labels},
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// container is Deployment j's container at visit v: its image and env
// change with v, so each update replaces its pod.
func container(j, v int) corev1.Container {
	c := corev1.Container{
		Name:         "app",
		Image:        fmt.Sprintf("registry.example/app:1.%d", v),
		Env:          []corev1.EnvVar{{Name: "REVISION", Value: fmt.Sprint(v)}},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
	}
	if j%2 == 0 {
		c.Env = append(c.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secretName(j / 2 % configs)}, Key: "token"}}})
	} else {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "secret", MountPath: "/etc/secret"})
	}
	return c
}

// policySpec is one of the two ConfigPolicies the soak swaps between. The
// Deny variant refuses :canary images and warns of Secrets in env; the
// other warns of :canary images and only audits Secrets in env. Either way
// every finding leaves an Event, so both variants exercise the same paths.
func policySpec(deny bool) v1alpha1.ConfigPolicySpec {
	canary, secretInEnv := v1alpha1.Action("Warn"), v1alpha1.Action("Audit")
	if deny {
		canary, secretInEnv = "Deny", "Warn"
	}
	return v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: workloadsNS}},
		Rules:             map[string]v1alpha1.RuleSettings{"secret-in-env": {Action: secretInEnv}},
		CustomRules:       []v1alpha1.CustomRule{{ID: canaryRule, Action: canary, Rego: canaryRego}},
	}
}

var canaryRego = strings.ReplaceAll(`package configward.custom.RULE

findings contains f if {
  some i, c in input.object.spec.template.spec.containers
  endswith(c.image, ":canary")
  f := {
    "rule": "soak-no-canary",
    "path": sprintf("spec.template.spec.containers[%d].image", [i]),
    "message": sprintf("%s container %q runs a :canary image", [input.workload.display, c.name]),
  }
}
`, "RULE", strings.ReplaceAll(canaryRule, "-", "_"))
