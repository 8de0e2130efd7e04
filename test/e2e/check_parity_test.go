package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/check"
	"github.com/configward/configward/internal/policystore"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

var _ = Describe("configward check", func() {
	It("gives the same findings and exemption notes offline as the admission webhooks give kubectl", func() {
		ns := schemaNamespace()
		objs, err := check.Load([]string{filepath.Join(framework.RepoRoot(), "internal", "check", "testdata", "shop")}, nil)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			o.Obj.SetNamespace(ns)
		}
		store, err := policystore.New(context.Background(), logr.Discard())
		Expect(err).NotTo(HaveOccurred())
		// The namespace holds exactly these objects, so the set is complete.
		results, err := check.Run(context.Background(), store.Current(), objs, check.Options{Complete: true})
		Expect(err).NotTo(HaveOccurred())

		expect := func(kind string) (denied []string, warned []string) {
			for _, r := range results {
				if r.Kind != kind {
					continue
				}
				switch r.Action {
				case rules.Deny:
					denied = append(denied, rules.Line(rules.Finding{Rule: r.Rule, Message: r.Message}))
				case rules.Warn, check.Note:
					warned = append(warned, "Warning: "+rules.Warning(rules.Finding{Rule: r.Rule, Message: r.Message}))
				}
			}
			return denied, warned
		}
		manifest := func(kind string) string {
			for _, o := range objs {
				if o.Obj.GetObjectKind().GroupVersionKind().Kind == kind && o.Obj.GetName() != "flags" {
					y, err := yaml.Marshal(o.Obj)
					Expect(err).NotTo(HaveOccurred())
					return string(y)
				}
			}
			Fail("no " + kind)
			return ""
		}

		By("storing the config the Deployment and the ConfigMap depend on")
		for _, o := range objs {
			if o.Obj.GetName() == "flags" || o.Obj.GetObjectKind().GroupVersionKind().Kind == "ConfigSchema" {
				y, err := yaml.Marshal(o.Obj)
				Expect(err).NotTo(HaveOccurred())
				apply(string(y))
			}
		}
		Eventually(schemaReady(ns, "settings"), 10*time.Second).Should(Equal("True"))

		_, deploymentWarnings := expect("Deployment")
		Expect(deploymentWarnings).To(ContainElement(ContainSubstring("configward.dev/exempt.secret-in-env does not count here")),
			"the fixture's exemption note must be part of the comparison")
		for _, kind := range []string{"Deployment", "ConfigMap"} {
			denied, warned := expect(kind)
			Expect(denied).NotTo(BeEmpty(), "the fixture should make %s denied", kind)
			res := env.Kubectl(manifest(kind), "create", "--dry-run=server", "-f", "-")
			Expect(res.ExitCode).To(Equal(1), kind)
			Expect(res.Stderr).To(ContainSubstring("denied the request: "+strings.Join(denied, "\n")), kind)
			var gotWarnings []string
			for _, l := range strings.Split(res.Stderr, "\n") {
				if strings.HasPrefix(l, "Warning: ") {
					gotWarnings = append(gotWarnings, l)
				}
			}
			Expect(gotWarnings).To(ConsistOf(warned), kind)
		}
	})

	It("gives a declared Rollout the same findings offline as the webhook gives kubectl", func() {
		ns := rulesNamespace()
		kinds, err := workload.LoadDeclarations(workloadKindsFile)
		Expect(err).NotTo(HaveOccurred())
		manifest := argoRollout(ns, "checkout", `containers:
- name: api
  image: app
  volumeMounts: [{name: flags, mountPath: /etc/app/flags.yaml, subPath: flags.yaml}]
  env: [{name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: db, key: password}}}]
volumes: [{name: flags, configMap: {name: hot-flags}}]
`, "")
		dir := GinkgoT().TempDir()
		// The config it references, as rulesNamespace stored it.
		config := configMap(ns, "hot-flags", map[string]string{"flags.yaml": "a: 1"}, map[string]string{"configward.dev/reload": "hot"}) +
			"---\n" + fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: not-printed}\n", ns)
		Expect(os.WriteFile(filepath.Join(dir, "rollout.yaml"), []byte(manifest), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o600)).To(Succeed())
		objs, err := check.LoadKinds(kinds, []string{dir}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(HaveLen(3))
		store, err := policystore.New(context.Background(), logr.Discard())
		Expect(err).NotTo(HaveOccurred())
		results, err := check.Run(context.Background(), store.Current(), objs, check.Options{Complete: true, Kinds: kinds})
		Expect(err).NotTo(HaveOccurred())
		var denied, warned []string
		for _, r := range results {
			switch r.Action {
			case rules.Deny:
				denied = append(denied, rules.Line(rules.Finding{Rule: r.Rule, Message: r.Message}))
			case rules.Warn:
				warned = append(warned, "Warning: "+rules.Warning(rules.Finding{Rule: r.Rule, Message: r.Message}))
			}
		}
		Expect(denied).To(ConsistOf(HavePrefix("[subpath-config] Rollout " + ns + "/checkout")))
		Expect(warned).To(ConsistOf(HavePrefix("Warning: [secret-in-env] Rollout " + ns + "/checkout")))

		res := env.Kubectl(manifest, "create", "--dry-run=server", "-f", "-")
		Expect(res.ExitCode).To(Equal(1))
		Expect(res.Stderr).To(ContainSubstring("denied the request: " + strings.Join(denied, "\n")))
		var gotWarnings []string
		for _, l := range strings.Split(res.Stderr, "\n") {
			if strings.HasPrefix(l, "Warning: ") {
				gotWarnings = append(gotWarnings, l)
			}
		}
		Expect(gotWarnings).To(ConsistOf(warned))
	})
})
