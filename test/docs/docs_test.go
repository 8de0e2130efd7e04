// Package docs checks that the documentation names what the code has: every
// metric and Event reason configward emits is in the tables of the
// operations page and every one in the tables exists, every chart value is
// in the chart README's values table and every one there exists, and every
// annotation and label key is named somewhere in README.md or docs/. It also
// checks that every relative link and anchor between the Markdown files
// resolves (links_test.go). Documentation that drifts from the code misleads
// the people who operate configward.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/controller/rollouts"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/test/framework"
)

// operationsPage holds the metric and Event tables (its "Metrics and
// Events" section).
const operationsPage = "docs/platform/operations.md"

// firstColumns returns the backticked names in the first column of the
// Markdown table whose header row starts with header, in file.
func firstColumns(t *testing.T, file, header string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(framework.RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	in := false
	for _, line := range strings.Split(string(text), "\n") {
		switch {
		case strings.HasPrefix(line, "| "+header+" |"):
			if in {
				t.Fatalf("%s has two tables headed %q", file, header)
			}
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			first := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)[0]
			for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
				names = append(names, m[1])
			}
		case in:
			in = false
			if len(names) == 0 {
				t.Fatalf("the table headed %q in %s is empty", header, file)
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("no table headed %q in %s", header, file)
	}
	return names
}

// inCode returns the first submatch of re in every non-test Go file under
// the repository's cmd and internal.
func inCode(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	found, err := framework.InProductCode(re)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// sameSet reports what one side has and the other lacks.
func sameSet(t *testing.T, what string, code, docs []string) {
	t.Helper()
	for _, c := range code {
		if !slices.Contains(docs, c) {
			t.Errorf("%s %q exists in the code but is missing from the documentation", what, c)
		}
	}
	for _, d := range docs {
		if !slices.Contains(code, d) {
			t.Errorf("%s %q is documented but does not exist in the code", what, d)
		}
	}
}

func TestMetricsTable(t *testing.T) {
	var documented []string
	for _, n := range firstColumns(t, operationsPage, "metric") {
		documented = append(documented, strings.SplitN(n, "{", 2)[0]) // name{labels}
	}
	registered, err := framework.RegisteredMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if len(registered) < 10 {
		t.Fatalf("found only %d metrics in the code; the pattern no longer matches how metrics are declared", len(registered))
	}
	sameSet(t, "metric", registered, documented)
}

func TestEventsTable(t *testing.T) {
	documented := firstColumns(t, operationsPage, "reason")
	emitted := inCode(t, regexp.MustCompile(`\.Eventf\([^,]+,[^,]+,[^,]+,\s*"([A-Za-z]+)"`))
	if len(emitted) < 4 {
		t.Fatalf("found only %d literal Event reasons in the code; the pattern no longer matches how Events are recorded", len(emitted))
	}
	// Findings are recorded under their rule's id in CamelCase.
	for id := range rules.Defaults {
		emitted = append(emitted, rules.EventReason(id))
	}
	emitted = append(emitted, rules.EventReason(rules.SubpathConfig))
	emitted = append(emitted, delivery.EventReasons()...)
	emitted = append(emitted, rollouts.EventReasons()...)
	sameSet(t, "Event reason", emitted, documented)
}

func TestChartValuesTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "charts", "configward", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{} // every path, inner ones included
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		paths[prefix] = true
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			leaves = append(leaves, prefix)
			return
		}
		for k, child := range m {
			walk(strings.TrimPrefix(prefix+"."+k, "."), child)
		}
	}
	walk("", values)
	sort.Strings(leaves)

	// A row names a value in full (`webhook.port`), or continues the one
	// before it with a suffix (`webhook.podDisruptionBudget.enabled` /
	// `.minAvailable`).
	var documented []string
	last := ""
	for _, n := range firstColumns(t, "charts/configward/README.md", "value") {
		if strings.HasPrefix(n, ".") {
			n = last[:strings.LastIndex(last, ".")] + n
		}
		documented = append(documented, n)
		last = n
	}
	for _, d := range documented {
		if !paths[d] {
			t.Errorf("value %q is documented but is not in values.yaml", d)
		}
	}
	// A leaf is covered by its own row or by a row for a map above it
	// (`webhook.resources`).
	for _, leaf := range leaves {
		covered := false
		for _, d := range documented {
			if leaf == d || strings.HasPrefix(leaf, d+".") {
				covered = true
			}
		}
		if !covered {
			t.Errorf("value %q is in values.yaml but missing from the chart README's values table", leaf)
		}
	}
}

// The annotations and labels users write or read: every key configward
// defines is named in the documentation (README.md and the pages under
// docs/), and every configward.dev/ key it names exists (in names.go, or as
// the chart's ignore label).
func TestAnnotationsAndLabels(t *testing.T) {
	text := documentation(t)
	// internal/api/v1alpha1/names.go holds every key users write or read.
	names, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "internal", "api", "v1alpha1", "names.go"))
	if err != nil {
		t.Fatal(err)
	}
	var defined []string
	for _, m := range regexp.MustCompile(`=\s+"(configward\.dev/[a-z][a-z.-]*)"`).FindAllStringSubmatch(string(names), -1) {
		defined = append(defined, m[1])
	}
	if len(defined) < 8 {
		t.Fatalf("found only %d annotation and label keys in the code; the pattern no longer matches how they are declared", len(defined))
	}
	chart, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "charts", "configward", "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	defined = append(defined, regexp.MustCompile(`configward\.dev/[a-z][a-z-]*`).FindAllString(string(chart), -1)...)
	for _, key := range defined {
		if !strings.Contains(string(text), key) {
			t.Errorf("%q exists in the code but the documentation (README.md, docs/) never names it", key)
		}
	}
	for _, named := range regexp.MustCompile(`configward\.dev/[a-z][a-z.-]*[a-z]`).FindAllString(string(text), -1) {
		if strings.HasPrefix(named, "configward.dev/v1") {
			continue // the API group
		}
		known := false
		for _, key := range defined {
			// configward.dev/exempt.secret-in-env is an instance of configward.dev/exempt.
			// (and configward.dev/exempt.<rule-id> reads as configward.dev/exempt).
			if named == key || (strings.HasSuffix(key, ".") && (strings.HasPrefix(named, key) || named+"." == key)) {
				known = true
			}
		}
		if !known {
			t.Errorf("the documentation (README.md, docs/) names %q, which configward does not define", named)
		}
	}
}

// documentation returns README.md and every Markdown page under docs/, one
// after the other.
func documentation(t *testing.T) []byte {
	t.Helper()
	root := framework.RepoRoot()
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		page, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text = append(append(text, '\n'), page...)
		pages++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages < 5 {
		t.Fatalf("found only %d pages under docs/", pages)
	}
	return text
}
