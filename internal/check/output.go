package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/configward/configward/internal/rules"
)

// Formats are the output formats of Write, the values of check's -o.
var Formats = []string{"text", "json", "sarif", "junit", "github"}

// Report is what one check found.
type Report struct {
	// Objects are every object judged: JUnit has a test case for each,
	// with or without findings.
	Objects []Object
	Results []Result
	// Version is configward's, for SARIF's tool.driver.version.
	Version string
}

// Write prints the report in one of Formats.
func Write(w io.Writer, format string, r Report) error {
	switch format {
	case "text":
		return writeText(w, r)
	case "json":
		return writeJSON(w, r)
	case "sarif":
		return writeSARIF(w, r)
	case "junit":
		return writeJUnit(w, r)
	case "github":
		return writeGitHub(w, r)
	}
	return fmt.Errorf("unknown output format %q (one of %s)", format, strings.Join(Formats, ", "))
}

// writeText prints FILE:LINE:COLUMN: ACTION [RULE] MESSAGE per finding, the
// form editors and terminals turn into links, then a count.
func writeText(w io.Writer, r Report) error {
	for _, res := range r.Results {
		if _, err := fmt.Fprintf(w, "%s:%d:%d: %s [%s] %s\n", res.File, res.Line, res.Column, res.Action, res.Rule, res.Message); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, summary(r))
	return err
}

func summary(r Report) string {
	return fmt.Sprintf("%d objects checked, %d findings", len(r.Objects), len(r.Results))
}

func writeJSON(w io.Writer, r Report) error {
	counts := map[rules.Action]int{}
	for _, res := range r.Results {
		counts[res.Action]++
	}
	results := r.Results
	if results == nil {
		results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"objects": len(r.Objects), "results": results,
		"denied": counts[rules.Deny], "warned": counts[rules.Warn], "audited": counts[rules.Audit], "unknown": counts[Unknown],
		"notes": counts[Note],
	})
}

// githubLevels are the workflow commands of each action. A Note (an
// exemption that does not count) is a warning, as the webhook returns it;
// an Unknown reference only informs.
var githubLevels = map[rules.Action]string{rules.Deny: "error", rules.Warn: "warning", Note: "warning", rules.Audit: "notice", Unknown: "notice"}

// writeGitHub prints a GitHub Actions workflow command per finding, which
// the runner turns into an annotation on the file and line, then a count
// (plain text, left in the log as is).
func writeGitHub(w io.Writer, r Report) error {
	for _, res := range r.Results {
		if _, err := fmt.Fprintf(w, "::%s file=%s,line=%d,col=%d,title=%s::%s\n", githubLevels[res.Action],
			githubProperty(res.File), res.Line, res.Column, githubProperty("["+res.Rule+"]"), githubData(res.Message)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, summary(r))
	return err
}

// githubData escapes a workflow command's message as GitHub's actions
// toolkit does (command.ts escapeData): %, and CR and LF, which would end
// the command. A Replacer makes one pass, so an escape's % stays as is.
var githubData = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace

// githubProperty escapes a property value (command.ts escapeProperty): also
// ':' and ',', which end the value.
var githubProperty = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace
