package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// schemaYAML is a ConfigSchema governing the ConfigMaps named in names, with
// one required key of the given format and JSON Schema.
func schemaYAML(ns, name string, names []string, key, format, jsonSchema string, extra string) string {
	return fmt.Sprintf(`apiVersion: configward.dev/v1alpha1
kind: ConfigSchema
metadata: {name: %s, namespace: %s}
spec:
  configMapNames: [%s]
%s  keys:
  - name: %q
    format: %s
    required: true
    schema: %s
`, name, ns, strings.Join(names, ", "), extra, key, format, jsonSchema)
}

// literalConfigMap writes data values as YAML block literals so line
// numbers inside them are what a user wrote.
func literalConfigMap(ns, name string, data map[string]string, annotations string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n%sdata:\n", name, ns, annotations)
	for k, v := range data {
		fmt.Fprintf(&b, "  %q: |\n", k)
		for _, line := range strings.Split(strings.TrimRight(v, "\n"), "\n") {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	return b.String()
}

// schemaNamespace creates a namespace and waits until the ConfigMap schema
// webhook demonstrably enforces there.
func schemaNamespace() string {
	ns := newNamespace("schema", nil)
	Eventually(func() int {
		return env.Kubectl(literalConfigMap(ns, "probe", map[string]string{"k": "v"}, "  annotations: {configward.dev/schema: nowhere}\n"),
			"apply", "--dry-run=server", "-f", "-").ExitCode
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(1), "the ConfigMap schema webhook never enforced")
	return ns
}

func schemaReady(ns, name string) func() string {
	return func() string {
		var cs v1alpha1.ConfigSchema
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cs); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(cs.Status.Conditions, "Ready")
		if c == nil || cs.Status.ObservedGeneration != cs.Generation {
			return "not reconciled"
		}
		return string(c.Status)
	}
}

var _ = Describe("ConfigSchema", func() {
	var ns string
	BeforeEach(func() { ns = schemaNamespace() })

	DescribeTable("validates every format: a good value passes, a bad one is refused with key, line and reason",
		func(format, key, jsonSchema, good, bad string, want []string) {
			apply(schemaYAML(ns, "s-"+format, []string{"app-" + format}, key, format, jsonSchema, ""))
			Eventually(schemaReady(ns, "s-"+format), 10*time.Second).Should(Equal("True"))

			res := env.Kubectl(literalConfigMap(ns, "app-"+format, map[string]string{key: good}, ""), "apply", "-f", "-")
			Expect(res.ExitCode).To(Equal(0), res.Stderr)

			res = env.Kubectl(literalConfigMap(ns, "app-"+format, map[string]string{key: bad}, ""), "apply", "-f", "-")
			Expect(res.ExitCode).To(Equal(1), res.Stdout)
			Expect(res.Stderr).To(ContainSubstring(`admission webhook "configmaps.validate.configward.dev" denied the request: [config-schema] ConfigMap ` + ns + `/app-` + format + ` breaks ConfigSchema "s-` + format + `"`))
			for _, w := range want {
				Expect(res.Stderr).To(ContainSubstring(w))
			}
		},
		Entry("yaml", "yaml", "app.yaml", `{"type": "object", "properties": {"server": {"type": "object", "properties": {"port": {"type": "integer"}}}}}`,
			"server:\n  host: a\n  port: 8080", "server:\n  host: a\n  port: 80a",
			[]string{`key "app.yaml" line 3`, "/server/port", "integer"}),
		Entry("json", "json", "app.json", `{"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}}`,
			"{\n  \"replicas\": 3\n}", "{\n  \"name\": \"x\",\n  \"replicas\": 0\n}",
			[]string{`key "app.json" line 3`, "/replicas"}),
		Entry("toml", "toml", "app.toml", `{"type": "object", "properties": {"server": {"type": "object", "properties": {"port": {"type": "integer"}}}}}`,
			"[server]\nport = 8080", "[server]\nhost = \"a\"\nport = \"eighty\"",
			[]string{`key "app.toml" line 3`, "/server/port", "integer"}),
		Entry("properties", "properties", "app.properties", `{"type": "object", "required": ["db.url"], "properties": {"pool.size": {"type": "string", "pattern": "^[0-9]+$"}}}`,
			"db.url=jdbc:x\npool.size=10", "db.url=jdbc:x\npool.size=ten",
			[]string{`key "app.properties" line 2`, "pool.size"}),
		Entry("ini", "ini", "app.ini", `{"type": "object", "properties": {"log": {"type": "object", "properties": {"level": {"enum": ["debug", "info"]}}}}}`,
			"[log]\nlevel = info", "[log]\nlevel = loud",
			[]string{`key "app.ini" line 2`, "/log/level"}),
		Entry("env", "env", "app.env", `{"type": "object", "required": ["PORT"], "properties": {"PORT": {"pattern": "^[0-9]+$"}}}`,
			"PORT=8080", "# port\nPORT=http",
			[]string{`key "app.env" line 2`, "/PORT"}),
		Entry("text", "text", "motd", `{"maxLength": 10}`,
			"hello", "this line is far too long",
			[]string{`key "motd"`, "10"}),
	)

	It("refuses a missing required key, an undeclared key and bad binaryData", func() {
		apply(schemaYAML(ns, "strict", []string{"strict-app"}, "app.yaml", "yaml", `{"type": "object"}`, ""))
		Eventually(schemaReady(ns, "strict"), 10*time.Second).Should(Equal("True"))

		res := env.Kubectl(literalConfigMap(ns, "strict-app", map[string]string{"other": "x"}, ""), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`key "app.yaml"`))
		Expect(res.Stderr).To(ContainSubstring(`key "other"`))

		bin := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: strict-app, namespace: %s}\nbinaryData:\n  app.yaml: %s\n",
			ns, base64.StdEncoding.EncodeToString([]byte("- not\n- an object\n")))
		res = env.Kubectl(bin, "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`key "app.yaml"`))
		Expect(res.Stderr).To(ContainSubstring("object"))
	})

	It("refuses an update that breaks the schema and leaves the stored ConfigMap exactly as it was", func() {
		apply(schemaYAML(ns, "upd", []string{"upd-app"}, "app.yaml", "yaml", `{"type": "object", "properties": {"port": {"type": "integer"}}}`, ""))
		Eventually(schemaReady(ns, "upd"), 10*time.Second).Should(Equal("True"))
		apply(literalConfigMap(ns, "upd-app", map[string]string{"app.yaml": "port: 8080"}, ""))
		var before corev1.ConfigMap
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "upd-app"}, &before)).To(Succeed())

		res := env.Kubectl(literalConfigMap(ns, "upd-app", map[string]string{"app.yaml": "port: eighty"}, ""), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		res = env.Kubectl("", "patch", "configmap", "upd-app", "-n", ns, "--type=merge", "-p", `{"data":{"app.yaml":"port: [1]"}}`)
		Expect(res.ExitCode).To(Equal(1))

		got := env.Kubectl("", "get", "configmap", "upd-app", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion} {.data.app\\.yaml}")
		Expect(got.ExitCode).To(Equal(0), got.Stderr)
		Expect(got.Stdout).To(Equal(before.ResourceVersion + " port: 8080\n"))
	})

	It("refuses one write that takes a ConfigMap out of its schema and breaks what the schema kept out, and records a clean exit", func() {
		apply(schemaYAML(ns, "labelled", nil, "app.yaml", "yaml", `{"type": "object", "properties": {"port": {"type": "integer"}}}`, "  selector: {matchLabels: {schema: labelled}}\n"))
		Eventually(schemaReady(ns, "labelled"), 10*time.Second).Should(Equal("True"))
		apply(literalConfigMap(ns, "sel-app", map[string]string{"app.yaml": "port: 8080"}, "  labels: {schema: labelled}\n"))
		resourceVersion := func() string {
			var cm corev1.ConfigMap
			Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "sel-app"}, &cm)).To(Succeed())
			return cm.ResourceVersion
		}
		before := resourceVersion()

		By("kubectl replace, without the label and with a value the schema refuses, in one write")
		res := env.Kubectl(literalConfigMap(ns, "sel-app", map[string]string{"app.yaml": "port: [not, an, int"}, ""), "replace", "-f", "-")
		Expect(res.ExitCode).To(Equal(1), res.Stdout)
		Expect(res.Stderr).To(ContainSubstring(`denied the request: [config-schema] ConfigMap ` + ns + `/sel-app leaves ConfigSchema "labelled" in the same write that changes its values, which must still satisfy it. Leave the schema in a write of its own`))
		Expect(resourceVersion()).To(Equal(before), "the refused write left the stored object as it was")

		By("leaving the schema in a write of its own: allowed, with a warning and an Event")
		res = env.Kubectl("", "label", "configmap", "sel-app", "-n", ns, "schema-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		note := `ConfigMap ` + ns + `/sel-app leaves ConfigSchema "labelled": its values are no longer checked against it.`
		Expect(res.Stderr).To(ContainSubstring("Warning: [config-schema] " + note))
		Eventually(func() []string { return eventsFor(ns, "sel-app", "LeftConfigSchema") }, 10*time.Second, 200*time.Millisecond).Should(ConsistOf(note))

		By("then its values are its own")
		res = env.Kubectl("", "patch", "configmap", "sel-app", "-n", ns, "--type=merge", "-p", `{"data":{"app.yaml":"port: eighty"}}`)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	})

	It("refuses a ConfigMap that names a schema that does not exist", func() {
		res := env.Kubectl(literalConfigMap(ns, "orphan", map[string]string{"k": "v"}, "  annotations: {configward.dev/schema: nowhere}\n"), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`[config-schema] ConfigMap ` + ns + `/orphan names ConfigSchema "nowhere" in configward.dev/schema, which does not exist`))
	})

	It("refuses a ConfigSchema that does not compile with every problem as a field error, the way kubectl shows invalid objects", func() {
		for _, bad := range []struct{ schema, key, want string }{
			{`{"type": 5}`, `name: "a"`, `The ConfigSchema "broken" is invalid: spec.keys[0].schema: Invalid value: schema does not compile`},
			{`{"type": "object"}`, `pattern: "([a-z"`, `The ConfigSchema "broken" is invalid: spec.keys[0].pattern: Invalid value: invalid pattern "([a-z"`},
		} {
			y := fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigSchema\nmetadata: {name: broken, namespace: %s}\nspec:\n  keys:\n  - %s\n    format: yaml\n    schema: %s\n", ns, bad.key, bad.schema)
			res := env.Kubectl(y, "apply", "-f", "-")
			Expect(res.ExitCode).To(Equal(1), res.Stdout)
			Expect(res.Stderr).To(ContainSubstring(bad.want))
		}
		res := env.Kubectl(fmt.Sprintf("apiVersion: configward.dev/v1alpha1\nkind: ConfigSchema\nmetadata: {name: broken, namespace: %s}\nspec:\n  keys:\n  - name: a\n    format: xml\n", ns), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`Unsupported value: "xml"`))
	})

	It("reports ConfigMaps that already break a schema added over them", func() {
		apply(literalConfigMap(ns, "old-good", map[string]string{"app.yaml": "port: 1"}, ""),
			literalConfigMap(ns, "old-bad", map[string]string{"app.yaml": "port: one"}, ""))
		apply(schemaYAML(ns, "late", []string{"old-good", "old-bad"}, "app.yaml", "yaml", `{"type": "object", "properties": {"port": {"type": "integer"}}}`, ""))
		Eventually(schemaReady(ns, "late"), 10*time.Second).Should(Equal("True"))
		var cs v1alpha1.ConfigSchema
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "late"}, &cs)).To(Succeed())
		Expect(cs.Status.GovernedConfigMaps).To(Equal(int32(2)))
		Expect(cs.Status.ViolatingConfigMaps).To(Equal(int32(1)))
		Expect(cs.Status.Violations).To(HaveLen(1))
		Expect(cs.Status.Violations[0].Name).To(Equal("old-bad"))
		Expect(cs.Status.Violations[0].Error).To(ContainSubstring(`key "app.yaml" line 1`))

		out := env.Kubectl("", "get", "configschema", "late", "-n", ns)
		Expect(out.Stdout).To(MatchRegexp(`late\s+True\s+2\s+1\s+`))
	})

	It("refuses hostile values quickly and clearly", func() {
		apply(schemaYAML(ns, "hostile", []string{"h"}, "app.yaml", "yaml", `{"type": "object"}`, ""))
		Eventually(schemaReady(ns, "hostile"), 10*time.Second).Should(Equal("True"))
		nested := strings.Repeat("[", 400_000) + strings.Repeat("]", 400_000)
		bomb := "a: &a [x, x, x, x, x, x, x, x, x]\n"
		prev := "a"
		for i := 0; i < 9; i++ {
			name := fmt.Sprintf("l%d", i)
			bomb += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev)
			prev = name
		}
		for name, value := range map[string]string{"deep nesting": nested, "alias bomb": bomb} {
			start := time.Now()
			cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: h, namespace: %s}\nbinaryData:\n  app.yaml: %s\n", ns, base64.StdEncoding.EncodeToString([]byte(value)))
			// create, not apply: apply would copy the value into the
			// last-applied annotation, which the API server caps at 256 KiB.
			res := env.Kubectl(cm, "create", "-f", "-")
			Expect(res.ExitCode).To(Equal(1), name)
			Expect(res.Stderr).To(ContainSubstring(`[config-schema] ConfigMap `+ns+`/h breaks ConfigSchema "hostile"`), name)
			Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second), name)
		}
		invalid := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: h, namespace: %s}\nbinaryData:\n  app.yaml: %s\n", ns, base64.StdEncoding.EncodeToString([]byte("a: \xff\xfe\n")))
		res := env.Kubectl(invalid, "create", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring(`key "app.yaml"`))
		Expect(res.Stderr).To(ContainSubstring("UTF-8"))
	})

	It("keeps the last good generation in force when a broken one is stored behind the webhook's back", func() {
		good := schemaYAML(ns, "lkg", []string{"lkg-app"}, "app.yaml", "yaml", `{"type": "object", "properties": {"port": {"type": "integer"}}}`, "")
		apply(good)
		Eventually(schemaReady(ns, "lkg"), 10*time.Second).Should(Equal("True"))

		By("taking the ConfigSchema webhook out of this namespace, as if configward were down")
		setSchemaWebhookSkipped(ns, true)
		broken := strings.Replace(good, `schema: {"type": "object", "properties": {"port": {"type": "integer"}}}`, `schema: {"type": 5}`, 1)
		Eventually(func() int { return env.Kubectl(broken, "apply", "-f", "-").ExitCode }, 15*time.Second, 200*time.Millisecond).Should(Equal(0))
		setSchemaWebhookSkipped(ns, false)

		Eventually(schemaReady(ns, "lkg"), 10*time.Second).Should(Equal("False"))
		var cs v1alpha1.ConfigSchema
		Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "lkg"}, &cs)).To(Succeed())
		Expect(meta.FindStatusCondition(cs.Status.Conditions, "Ready").Message).To(ContainSubstring("last generation that compiled stays in force"))

		res := env.Kubectl(literalConfigMap(ns, "lkg-app", map[string]string{"app.yaml": "port: eighty"}, ""), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(1), "the last good schema must still be enforced")
		Expect(res.Stderr).To(ContainSubstring(`at /port: expected integer`))
		res = env.Kubectl(literalConfigMap(ns, "lkg-app", map[string]string{"app.yaml": "port: 80"}, ""), "apply", "-f", "-")
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
	})
})

// setSchemaWebhookSkipped makes the ConfigSchema webhook skip (or stop
// skipping) one namespace, and waits until the API server acts on it.
func setSchemaWebhookSkipped(ns string, skipped bool) {
	var cfgs admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(env.Client.List(context.Background(), &cfgs)).To(Succeed())
	for i := range cfgs.Items {
		c := &cfgs.Items[i]
		for j := range c.Webhooks {
			if c.Webhooks[j].Name != "configschemas.validate.configward.dev" {
				continue
			}
			op := metav1.LabelSelectorOpDoesNotExist
			if skipped {
				op = metav1.LabelSelectorOpNotIn
			}
			req := metav1.LabelSelectorRequirement{Key: unmanagedLabel, Operator: metav1.LabelSelectorOpDoesNotExist}
			sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req}}
			if op == metav1.LabelSelectorOpNotIn {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
					Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{ns}})
			}
			c.Webhooks[j].NamespaceSelector = sel
			Expect(env.Client.Update(context.Background(), c)).To(Succeed())
		}
	}
}
