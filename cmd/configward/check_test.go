package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// runCLI runs configward with args the way main does and returns stdout and
// the exit code.
func runCLI(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	var exit exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		if exit.code == 2 { // unusable input: main prints the error
			return out.String() + exit.Error(), exit.code
		}
		return out.String(), exit.code
	}
	return out.String() + err.Error(), 1
}

const shop = "../../internal/check/testdata/shop"

func TestCheckFindsWhatAdmissionWouldRefuse(t *testing.T) {
	out, code := runCLI(t, "", "check", "-f", shop)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (something denied)\n%s", code, out)
	}
	for _, want := range []string{
		shop + `/config.yaml:11: Deny [config-schema] ConfigMap shop/settings breaks ConfigSchema "settings" (1 violation)`,
		`key "app.yaml" line 2 column 9 at /server/port: expected integer, found string "eighty"`,
		shop + `/deploy.yaml:1: Deny [subpath-config] Deployment shop/checkout container "api" mounts ConfigMap "flags" with subPath "flags.yaml"`,
		shop + `/deploy.yaml:1: Warn [secret-in-env] Deployment shop/checkout container "api" gets Secret "db" as env`,
		shop + `/deploy.yaml:1: Unknown [missing-config-ref] Deployment shop/checkout references Secret "db"`,
		shop + `/deploy.yaml:1: Note [secret-in-env] configward.dev/exempt.secret-in-env does not count here`,
		"4 objects checked, 5 findings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}
}

func TestCheckCompleteTurnsUnknownIntoMissing(t *testing.T) {
	out, _ := runCLI(t, "", "check", "-f", shop, "--complete")
	if !strings.Contains(out, `Warn [missing-config-ref] Deployment shop/checkout references Secret "db" (spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef), which does not exist: pods will not start`) {
		t.Fatalf("with --complete a reference outside the set is missing:\n%s", out)
	}
	if strings.Contains(out, "Unknown") {
		t.Fatalf("nothing is unknown with --complete:\n%s", out)
	}
}

func TestCheckJSON(t *testing.T) {
	out, code := runCLI(t, "", "check", "-f", shop, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Objects, Denied, Warned, Audited, Unknown, Notes int
		Results                                          []map[string]any
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if doc.Objects != 4 || doc.Denied != 2 || doc.Warned != 1 || doc.Unknown != 1 || doc.Notes != 1 || len(doc.Results) != 5 {
		t.Fatalf("counts: %+v", doc)
	}
	for _, field := range []string{"file", "line", "kind", "namespace", "name", "rule", "action", "message"} {
		if _, ok := doc.Results[0][field]; !ok {
			t.Errorf("result lacks %q: %v", field, doc.Results[0])
		}
	}
}

func TestCheckStdinAndExitCodes(t *testing.T) {
	deploy, err := os.ReadFile(shop + "/deploy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Without its ConfigMap, the reload mode of "flags" is unknown: the
	// subPath is not denied, the Secret still warns, nothing fails.
	out, code := runCLI(t, string(deploy), "check", "-f", "-")
	if code != 0 || !strings.Contains(out, "<stdin>:1: Warn [secret-in-env]") || !strings.Contains(out, `<stdin>:1: Unknown [missing-config-ref] Deployment shop/checkout references ConfigMap "flags"`) {
		t.Fatalf("exit %d, want 0 with a warning and unknown references\n%s", code, out)
	}
	clean := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\ndata: {a: b}\n"
	if out, code := runCLI(t, clean, "check", "-f", "-"); code != 0 || !strings.Contains(out, "1 objects checked, 0 findings") {
		t.Fatalf("clean input: exit %d\n%s", code, out)
	}
	for name, in := range map[string]string{
		"not YAML":      "kind: [",
		"not an object": "- just\n- a list\n",
		"no kind":       "metadata: {name: x}\n",
	} {
		if out, code := runCLI(t, in, "check", "-f", "-"); code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", name, code, out)
		}
	}
	if _, code := runCLI(t, "", "check"); code != 2 {
		t.Errorf("no -f: exit %d, want 2", code)
	}
	if _, code := runCLI(t, "", "check", "-f", "/does/not/exist"); code != 2 {
		t.Errorf("missing file: exit %d, want 2", code)
	}
}

// The samples `make demo` walks through: check must refuse the same ones the
// webhook refuses in the demo.
func TestCheckOnTheSamples(t *testing.T) {
	const samples = "../../config/samples"
	out, code := runCLI(t, "", "check", "-f", samples, "--complete")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		samples + "/03-deny-subpath-config.yaml:8: Deny [subpath-config] Deployment demo/checkout-subpath",
		samples + "/04-deny-hot-config-in-env.yaml:7: Deny [hot-config-in-env] Deployment demo/checkout-flags-env",
		samples + "/05-warn-secret-in-env.yaml:7: Warn [secret-in-env] Deployment demo/checkout-worker",
		samples + `/06-deny-config-schema.yaml:7: Deny [config-schema] ConfigMap demo/checkout-config breaks ConfigSchema "checkout"`,
		`key "app.yaml" line 3 column 9 at /server/port: expected integer, found string "eighty"`,
		samples + `/07-deny-missing-schema.yaml:7: Deny [config-schema] ConfigMap demo/payments-config names ConfigSchema "payments"`,
		"13 objects checked, 5 findings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}
}

func TestCheckTakesActionsFromConfigPolicies(t *testing.T) {
	dir := t.TempDir()
	policy := dir + "/policy.yaml"
	if err := os.WriteFile(policy, []byte(`apiVersion: configward.dev/v1alpha1
kind: ConfigPolicy
metadata: {name: shop}
spec:
  rules:
    secret-in-env: {action: Deny}
    subpath-config: {action: "Off"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "", "check", "-f", shop, "--policy", policy)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	if !strings.Contains(out, `Deny [secret-in-env] Deployment shop/checkout`) || strings.Contains(out, "[subpath-config]") {
		t.Fatalf("the policy's actions were not applied:\n%s", out)
	}

	broken := dir + "/broken.yaml"
	if err := os.WriteFile(broken, []byte("apiVersion: configward.dev/v1alpha1\nkind: ConfigPolicy\nmetadata: {name: broken}\nspec:\n  rules:\n    nope: {action: Deny}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runCLI(t, "", "check", "-f", shop, "--policy", broken)
	if code != 2 || !strings.Contains(out, `--policy: `+broken+`:1: ConfigPolicy broken: spec.rules[nope]: Invalid value: unknown rule id "nope"`) {
		t.Fatalf("exit %d, want 2 with the policy error\n%s", code, out)
	}
}
