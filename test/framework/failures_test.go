package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

func TestWriteFailureDigest(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(FailureDigestEnv, dir)
	long := "the start of a long log\n" + strings.Repeat("x", 2*digestMessageBytes) + "\nits end"
	report := types.Report{SuiteDescription: "configward under faults", SpecReports: types.SpecReports{
		{State: types.SpecStatePassed, LeafNodeText: "passes"},
		{State: types.SpecStateFailed, ContainerHierarchyTexts: []string{"rolling restarts"}, LeafNodeText: "fail no request",
			Failure: types.Failure{Message: long, Location: types.CodeLocation{FileName: "rolling_test.go", LineNumber: 119}}},
		{State: types.SpecStateFailed, LeafNodeType: types.NodeTypeBeforeSuite, Failure: types.Failure{Message: "no control plane"}},
	}}
	WriteFailureDigest(report)
	b, err := os.ReadFile(filepath.Join(dir, "configward-under-faults.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"--- configward under faults: rolling restarts fail no request (failed)\n    at rolling_test.go:119\n    ...",
		"\n    its end\n", "--- configward under faults: [BeforeSuite] (failed)", "    no control plane"} {
		if !strings.Contains(got, want) {
			t.Errorf("the digest lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "the start of a long log") || strings.Contains(got, "passes") {
		t.Errorf("the digest holds more than the failures' ends:\n%s", got)
	}

	// A suite that passed writes nothing.
	report.SuiteSucceeded, report.SuiteDescription = true, "configward e2e"
	WriteFailureDigest(report)
	if _, err := os.Stat(filepath.Join(dir, "configward-e2e.txt")); !os.IsNotExist(err) {
		t.Errorf("a passing suite wrote a digest: %v", err)
	}
}
