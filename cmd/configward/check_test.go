package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runCLI runs configward with args the way main does and returns stdout
// and stderr together, and the exit code.
func runCLI(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	code := exitCode(cmd.Execute(), &out)
	return out.String(), code
}

const shop = "../../internal/check/testdata/shop"

func TestCheckFindsWhatAdmissionWouldRefuse(t *testing.T) {
	out, code := runCLI(t, "", "check", "-f", shop)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (something denied)\n%s", code, out)
	}
	for _, want := range []string{
		// Each finding points at its field: data, the volumeMounts item,
		// the secretKeyRef key; the note, which names no field, at the
		// object's start.
		shop + `/config.yaml:16:1: Deny [config-schema] ConfigMap shop/settings breaks ConfigSchema "settings" (1 violation)`,
		`key "app.yaml" line 2 column 9 at /server/port: expected integer, found string "eighty"`,
		shop + `/deploy.yaml:17:24: Deny [subpath-config] Deployment shop/checkout container "api" mounts ConfigMap "flags" with subPath "flags.yaml"`,
		shop + `/deploy.yaml:20:23: Warn [secret-in-env] Deployment shop/checkout container "api" gets Secret "db" as env`,
		shop + `/deploy.yaml:20:23: Unknown [missing-config-ref] Deployment shop/checkout references Secret "db"`,
		shop + `/deploy.yaml:1:1: Note [secret-in-env] configward.dev/exempt.secret-in-env does not count here`,
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
	for _, field := range []string{"file", "line", "column", "kind", "namespace", "name", "rule", "action", "message"} {
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
	if code != 0 || !strings.Contains(out, "<stdin>:20:23: Warn [secret-in-env]") || !strings.Contains(out, `<stdin>:21:31: Unknown [missing-config-ref] Deployment shop/checkout references ConfigMap "flags"`) {
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
		samples + "/03-deny-subpath-config.yaml:24:11: Deny [subpath-config] Deployment demo/checkout-subpath",
		samples + "/04-deny-hot-config-in-env.yaml:23:11: Deny [hot-config-in-env] Deployment demo/checkout-flags-env",
		samples + "/05-warn-secret-in-env.yaml:25:13: Warn [secret-in-env] Deployment demo/checkout-worker",
		samples + `/06-deny-config-schema.yaml:12:1: Deny [config-schema] ConfigMap demo/checkout-config breaks ConfigSchema "checkout"`,
		`key "app.yaml" line 3 column 9 at /server/port: expected integer, found string "eighty"`,
		samples + `/07-deny-missing-schema.yaml:14:1: Deny [config-schema] ConfigMap demo/payments-config names ConfigSchema "payments"`,
		samples + "/15-forged-owner.yaml:25:7: Deny [subpath-config] Pod demo/checkout-forged",
		"51 objects checked, 6 findings",
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

// TestMain lets a test run the real main, os.Exit and all, in a child
// process: the test binary re-run with CONFIGWARD_TEST_MAIN=1 is configward.
func TestMain(m *testing.M) {
	if os.Getenv("CONFIGWARD_TEST_MAIN") == "1" {
		main()
		// main exits with its code; should it ever return, exit here
		// rather than run the tests again in this child (and so on).
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExitCodesOfTheProcess runs configward as a CI step does and checks
// what the step sees: 0 nothing denied, 1 denied, 2 anything the command
// could not use, with the reason on stderr and nothing on stdout (so a
// report piped to a file is never half a report).
func TestExitCodesOfTheProcess(t *testing.T) {
	clean := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\ndata: {a: b}\n"
	for _, tc := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"nothing denied", clean, []string{"check", "-f", "-"}, 0, ""},
		{"denied", "", []string{"check", "-f", shop, "-o", "sarif"}, 1, ""},
		{"unknown flag", "", []string{"check", "-f", shop, "--fromat", "json"}, 2, "unknown flag: --fromat"},
		{"bad flag value", "", []string{"check", "-f", shop, "--complete=maybe"}, 2, `invalid argument "maybe" for "--complete"`},
		{"unknown output format", "", []string{"check", "-f", shop, "-o", "xml"}, 2, `-o must be one of text, json, sarif, junit, github, not "xml"`},
		{"unknown command", "", []string{"chek"}, 2, `unknown command "chek" for "configward": did you mean check?`},
		{"unknown command with flags", "", []string{"chek", "-f", shop}, 2, `unknown command "chek" for "configward": did you mean check?`},
		{"a manifest without -f", "", []string{"check", shop}, 2, "pass manifests with -f"},
		{"no manifests", "", []string{"check"}, 2, "no manifests"},
		{"unreadable file", "", []string{"check", "-f", "/does/not/exist.yaml"}, 2, "/does/not/exist.yaml"},
		{"unparseable YAML", "kind: [", []string{"check", "-f", "-"}, 2, "<stdin>:1: not valid YAML or JSON"},
		{"a List item that is not an object", "apiVersion: v1\nkind: List\nitems:\n- 42\n", []string{"check", "-f", "-"}, 2, "<stdin>:4: items[0] of List is not an object"},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		cmd.Env = append(os.Environ(), "CONFIGWARD_TEST_MAIN=1")
		cmd.Stdin = strings.NewReader(tc.stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%s: exit %d, want %d; stderr %q, want it to hold %q", tc.name, code, tc.code, stderr.String(), tc.stderr)
		}
		if code == 2 && stdout.Len() > 0 {
			t.Errorf("%s: a usage error printed to stdout: %q", tc.name, stdout.String())
		}
	}
}

func TestCheckListsItemByItem(t *testing.T) {
	const lists = "../../internal/check/testdata/lists"
	out, code := runCLI(t, "", "check", "-f", lists)
	if code != 1 || !strings.Contains(out, lists+"/lists.yaml:22:26: Deny [subpath-config] Deployment shop/checkout") || !strings.Contains(out, "5 objects checked, 1 findings") {
		t.Fatalf("exit %d, want 1 with the List's Deployment denied at its mount\n%s", code, out)
	}
}

const workloadKinds = "../../internal/check/testdata/kinds/workload-kinds.yaml"

// An Argo Rollout declared with --workload-kinds gets exactly the findings
// of the equivalent Deployment, kind substituted; undeclared, it is not
// judged at all.
func TestCheckJudgesDeclaredKindsLikeDeployments(t *testing.T) {
	dir := t.TempDir()
	deploy, err := os.ReadFile(shop + "/deploy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(shop + "/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rollout := strings.NewReplacer("apiVersion: apps/v1", "apiVersion: argoproj.io/v1alpha1", "kind: Deployment", "kind: Rollout").Replace(string(deploy))
	if err := os.WriteFile(dir+"/deploy.yaml", []byte(rollout), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/config.yaml", config, 0o600); err != nil {
		t.Fatal(err)
	}
	deployOut, deployCode := runCLI(t, "", "check", "-f", shop)
	rolloutOut, rolloutCode := runCLI(t, "", "check", "-f", dir, "--workload-kinds", workloadKinds)
	want := strings.NewReplacer(shop, dir, "Deployment shop/checkout", "Rollout shop/checkout").Replace(deployOut)
	if rolloutOut != want || rolloutCode != deployCode {
		t.Fatalf("the Rollout's check (exit %d):\n%s\nwant the Deployment's (exit %d), kind substituted:\n%s", rolloutCode, rolloutOut, deployCode, want)
	}
	if !strings.Contains(rolloutOut, "Deny [subpath-config] Rollout shop/checkout") {
		t.Fatalf("the comparison must include the subPath denial:\n%s", rolloutOut)
	}

	undeclared, _ := runCLI(t, "", "check", "-f", dir)
	if strings.Contains(undeclared, "Rollout") {
		t.Fatalf("an undeclared kind was judged:\n%s", undeclared)
	}
}

func TestCheckRefusesABadWorkloadKindsFile(t *testing.T) {
	bad := t.TempDir() + "/kinds.yaml"
	if err := os.WriteFile(bad, []byte("- {group: argoproj.io, version: v1alpha1, kind: Rollout, podTemplatePath: spec.template}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "", "check", "-f", shop, "--workload-kinds", bad)
	if code != 2 || !strings.Contains(out, "--workload-kinds: workload kinds in "+bad+": workload kind 1 (Rollout.argoproj.io): resource is required") {
		t.Fatalf("exit %d, want 2 with the problem named:\n%s", code, out)
	}
}
