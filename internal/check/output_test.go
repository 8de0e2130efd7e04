package check

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/configward/configward/internal/rules"
)

// shopReport is the check of testdata/shop: a denied ConfigMap, a denied,
// warned and noted Deployment with an unknown reference, and two objects
// with nothing to say.
func shopReport(t *testing.T) Report {
	t.Helper()
	objs, err := Load([]string{"testdata/shop"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Report{Objects: objs, Results: runCheck(t, objs, Options{}), Version: "v1.2.3"}
}

func write(t *testing.T, format string, r Report) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := Write(&out, format, r); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSARIFIsValid validates -o sarif against the published SARIF 2.1.0
// schema (testdata/README.md says where it comes from), formats asserted,
// so an artifact URI must be a URI reference.
func TestSARIFIsValid(t *testing.T) {
	raw, err := os.ReadFile("testdata/sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(sarifSchemaURI, doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(sarifSchemaURI)
	if err != nil {
		t.Fatal(err)
	}

	report := shopReport(t)
	// A path that needs escaping, and a custom rule (no documentation).
	report.Results = append(report.Results, Result{File: "dir with space/x.yaml", Line: 3, Column: 5, Rule: "team-rule", Action: rules.Audit, Message: "custom"})
	out := write(t, "sarif", report)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if err := schema.Validate(inst); err != nil {
		t.Fatalf("not valid SARIF 2.1.0: %#v\n%s", err, out)
	}

	var log sarifLog
	if err := json.Unmarshal(out, &log); err != nil {
		t.Fatal(err)
	}
	if len(log.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(log.Runs))
	}
	run := log.Runs[0]
	driver := run.Tool.Driver
	if driver.Name != "configward" || driver.Version != "v1.2.3" {
		t.Errorf("driver %s %s", driver.Name, driver.Version)
	}
	// The rules that fired, each once, built-in ones with their
	// documentation page.
	var ids []string
	for _, r := range driver.Rules {
		ids = append(ids, r.ID)
		if r.ShortDescription.Text == "" {
			t.Errorf("rule %s has no description", r.ID)
		}
		want := ""
		if page := ruleDocs[r.ID].page; page != "" {
			want = "https://github.com/configward/configward/blob/main/" + page
		}
		if r.HelpURI != want {
			t.Errorf("rule %s helpUri %q, want %q", r.ID, r.HelpURI, want)
		}
	}
	if got := strings.Join(ids, " "); got != "config-schema missing-config-ref secret-in-env subpath-config team-rule" {
		t.Errorf("rules %s", got)
	}
	levels := map[string]string{}
	for _, res := range run.Results {
		if driver.Rules[res.RuleIndex].ID != res.RuleID {
			t.Errorf("result %s points at rule %d", res.RuleID, res.RuleIndex)
		}
		loc := res.Locations[0].PhysicalLocation
		levels[res.Properties["action"]+" "+res.RuleID] = res.Level
		if res.RuleID == rules.SubpathConfig {
			if loc.ArtifactLocation.URI != "testdata/shop/deploy.yaml" || loc.Region.StartLine != 17 || loc.Region.StartColumn != 24 {
				t.Errorf("subpath-config at %+v", loc)
			}
		}
		if res.RuleID == "team-rule" && loc.ArtifactLocation.URI != "dir%20with%20space/x.yaml" {
			t.Errorf("uri %q", loc.ArtifactLocation.URI)
		}
	}
	for finding, want := range map[string]string{
		"Deny subpath-config": "error", "Deny config-schema": "error", "Warn secret-in-env": "warning",
		"Audit team-rule": "note", "Unknown missing-config-ref": "note", "Note secret-in-env": "warning",
	} {
		if levels[finding] != want {
			t.Errorf("%s: level %q, want %q", finding, levels[finding], want)
		}
	}

	// Nothing found is still a run, with an empty results array.
	report.Results = nil
	if err := json.Unmarshal(write(t, "sarif", report), &log); err != nil || log.Runs[0].Results == nil || len(log.Runs[0].Results) != 0 {
		t.Errorf("no findings: %v %+v", err, log.Runs)
	}
}

// The documentation pages (and sections) that SARIF's helpUri names must
// exist: GitHub anchors are the heading, lower-cased, punctuation dropped,
// spaces as -.
func TestRuleHelpPointsAtDocPages(t *testing.T) {
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for id, doc := range ruleDocs {
		page, section, _ := strings.Cut(doc.page, "#")
		text, err := os.ReadFile("../../" + page)
		if err != nil {
			t.Errorf("rule %s: %v", id, err)
			continue
		}
		if section == "" {
			continue
		}
		anchors := map[string]bool{}
		for _, l := range strings.Split(string(text), "\n") {
			if h := strings.TrimLeft(l, "#"); h != l && strings.HasPrefix(h, " ") {
				anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")] = true
			}
		}
		if !anchors[section] {
			t.Errorf("rule %s: %s has no section #%s", id, page, section)
		}
	}
}

// JUnit as CI test tabs read it: a suite per file, a case per object, a
// failure per denied finding, everything else in system-out.
func TestJUnit(t *testing.T) {
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type testcase struct {
		Name      string    `xml:"name,attr"`
		Classname string    `xml:"classname,attr"`
		Failures  []failure `xml:"failure"`
		SystemOut string    `xml:"system-out"`
	}
	type testsuite struct {
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	var doc struct {
		XMLName  xml.Name    `xml:"testsuites"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Suites   []testsuite `xml:"testsuite"`
	}
	report := shopReport(t)
	// A second denial of the Deployment: a second failure of its case,
	// which still counts one failed test.
	deployment := report.Objects[3]
	report.Results = append(report.Results, result(deployment, rules.Finding{Rule: "team-rule", Path: "spec", Message: "also denied"}, rules.Deny))
	out := write(t, "junit", report)
	if !bytes.HasPrefix(out, []byte(xml.Header)) {
		t.Errorf("no XML declaration:\n%s", out)
	}
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out)
	}
	if doc.Tests != 4 || doc.Failures != 2 || len(doc.Suites) != 2 {
		t.Fatalf("tests=%d failures=%d suites=%d, want 4, 2, 2\n%s", doc.Tests, doc.Failures, len(doc.Suites), out)
	}
	config, deploy := doc.Suites[0], doc.Suites[1]
	if config.Name != "testdata/shop/config.yaml" || config.Tests != 3 || config.Failures != 1 ||
		deploy.Name != "testdata/shop/deploy.yaml" || deploy.Tests != 1 || deploy.Failures != 1 {
		t.Fatalf("suites %+v %+v", config, deploy)
	}
	var names []string
	for _, c := range config.Cases {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ", "); got != "ConfigMap shop/flags, ConfigMap shop/settings, ConfigSchema shop/settings" {
		t.Errorf("cases %s", got)
	}
	if f := config.Cases[1].Failures; len(f) != 1 || f[0].Type != "config-schema" || !strings.HasPrefix(f[0].Text, "testdata/shop/config.yaml:16:1: ConfigMap shop/settings breaks") {
		t.Errorf("settings failures %+v", f)
	}
	if c := config.Cases[0]; len(c.Failures) != 0 || c.SystemOut != "" {
		t.Errorf("a clean object has a failure or output: %+v", c)
	}
	c := deploy.Cases[0]
	if c.Name != "Deployment shop/checkout" || c.Classname != "testdata/shop/deploy.yaml" || len(c.Failures) != 2 ||
		c.Failures[1].Text != "testdata/shop/deploy.yaml:9:1: also denied" ||
		c.Failures[0].Message != `[subpath-config] Deployment shop/checkout container "api" mounts ConfigMap "flags" with subPath "flags.yaml" at /etc/app/flags.yaml (spec.template.spec.containers[0].volumeMounts[0]): subPath mounts never receive updates, and this ConfigMap is marked configward.dev/reload=hot. Mount the volume as a directory (drop the subPath) and point the app at the file inside it.` {
		t.Errorf("checkout %+v", c)
	}
	for _, want := range []string{
		"testdata/shop/deploy.yaml:20:23: Warn [secret-in-env]",
		"testdata/shop/deploy.yaml:20:23: Unknown [missing-config-ref]",
		"testdata/shop/deploy.yaml:1:1: Note [secret-in-env]",
	} {
		if !strings.Contains(c.SystemOut, want) {
			t.Errorf("checkout system-out lacks %q:\n%s", want, c.SystemOut)
		}
	}
	if strings.Contains(c.SystemOut, "Deny") {
		t.Errorf("a denial is in system-out as well as a failure:\n%s", c.SystemOut)
	}
}

func TestGitHubWorkflowCommands(t *testing.T) {
	report := Report{Results: []Result{
		{File: "a,b:c%.yaml", Line: 7, Column: 3, Rule: "r", Action: rules.Deny, Message: "100% wrong:\r\nsee, here"},
		{File: "w.yaml", Line: 1, Column: 1, Rule: "w", Action: rules.Warn, Message: "warned"},
		{File: "n.yaml", Line: 2, Column: 4, Rule: "n", Action: rules.Audit, Message: "audited"},
	}}
	want := "::error file=a%2Cb%3Ac%25.yaml,line=7,col=3,title=[r]::100%25 wrong:%0D%0Asee, here\n" +
		"::warning file=w.yaml,line=1,col=1,title=[w]::warned\n" +
		"::notice file=n.yaml,line=2,col=4,title=[n]::audited\n" +
		"0 objects checked, 3 findings\n"
	if got := string(write(t, "github", report)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestTextAndJSONCarryColumns(t *testing.T) {
	report := shopReport(t)
	if text := string(write(t, "text", report)); !strings.Contains(text, "testdata/shop/deploy.yaml:17:24: Deny [subpath-config] ") {
		t.Errorf("text:\n%s", text)
	}
	var doc struct{ Results []Result }
	if err := json.Unmarshal(write(t, "json", report), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Results {
		if r.Rule == rules.SubpathConfig && (r.Line != 17 || r.Column != 24) {
			t.Errorf("json: %+v", r)
		}
	}
	if err := Write(&bytes.Buffer{}, "xml", report); err == nil {
		t.Error("an unknown format is not an error")
	}
}
