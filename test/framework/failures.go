package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// FailureDigestEnv names the folder where a suite that fails writes a
// digest of its failures, which `make test` prints once every suite has
// ended. CI keeps only the end of a run's output: a failure's message,
// printed with its suite, is lost among the suites that ended after it,
// and only its name and line remain.
const FailureDigestEnv = "CONFIGWARD_FAILURE_DIGEST"

// digestMessageBytes bounds each failure's message in the digest (a
// failure message may carry a process's log tail), and digestFailures the
// failures of one suite.
const (
	digestMessageBytes = 3000
	digestFailures     = 5
)

// WriteFailureDigest is every suite's ReportAfterSuite: for each spec or
// suite node that failed, what it is, where, and its failure message.
func WriteFailureDigest(report types.Report) {
	dir := os.Getenv(FailureDigestEnv)
	if dir == "" || report.SuiteSucceeded {
		return
	}
	var b strings.Builder
	failed := report.SpecReports.WithState(types.SpecStateFailureStates)
	for i, s := range failed {
		if i == digestFailures {
			fmt.Fprintf(&b, "... and %d more failures of this suite: see its output above\n", len(failed)-i)
			break
		}
		what := s.FullText()
		if what == "" {
			what = "[" + s.LeafNodeType.String() + "]"
		}
		message := s.Failure.Message
		if len(message) > digestMessageBytes {
			message = "..." + message[len(message)-digestMessageBytes:]
		}
		fmt.Fprintf(&b, "--- %s: %s (%s)\n    at %s\n    %s\n", report.SuiteDescription, what, s.State, s.Failure.Location, strings.ReplaceAll(message, "\n", "\n    "))
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "--- %s failed without a failed spec (%s)\n", report.SuiteDescription, strings.Join(report.SpecialSuiteFailureReasons, "; "))
	}
	name := regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(report.SuiteDescription, "-")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, strings.Trim(name, "-")+".txt"), []byte(b.String()), 0o644)
	}
}
