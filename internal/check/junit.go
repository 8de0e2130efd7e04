package check

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/configward/configward/internal/rules"
)

// The JUnit XML of Ant's junitreport, which GitLab's and Jenkins' test
// reports read: a test suite per file, a test case per object, a failure
// per denied finding. failures counts failed test cases, as JUnit does.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string         `xml:"name,attr"`
	Classname string         `xml:"classname,attr"`
	File      string         `xml:"file,attr"`
	Line      int            `xml:"line,attr"`
	Time      string         `xml:"time,attr"`
	Failures  []junitFailure `xml:"failure"`
	SystemOut string         `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit prints a test suite per file and a test case per object judged
// in it, named "Kind namespace/name". Each denied finding is a failure of
// its object's case; the other findings (warnings, audit, unknown
// references, notes) are lines of the case's system-out, which both CI test
// tabs show, without failing it.
func writeJUnit(w io.Writer, r Report) error {
	doc := junitSuites{Name: "configward check"}
	suites := map[string]int{} // file -> index in doc.Suites
	for _, o := range r.Objects {
		i, ok := suites[o.File]
		if !ok {
			i = len(doc.Suites)
			suites[o.File] = i
			doc.Suites = append(doc.Suites, junitSuite{Name: o.File, Time: "0"})
		}
		tc := junitCase{Name: objectName(o), Classname: o.File, File: o.File, Line: o.Line, Time: "0"}
		var out strings.Builder
		for _, res := range r.Results {
			if res.File != o.File || res.objectLine != o.Line || res.objectColumn != o.Column {
				continue
			}
			where := fmt.Sprintf("%s:%d:%d", res.File, res.Line, res.Column)
			if res.Action == rules.Deny {
				tc.Failures = append(tc.Failures, junitFailure{
					Message: "[" + res.Rule + "] " + firstLine(res.Message), Type: res.Rule,
					Text: where + ": " + res.Message,
				})
				continue
			}
			fmt.Fprintf(&out, "%s: %s [%s] %s\n", where, res.Action, res.Rule, res.Message)
		}
		tc.SystemOut = out.String()
		suite := &doc.Suites[i]
		suite.Tests++
		doc.Tests++
		if len(tc.Failures) > 0 {
			suite.Failures++
			doc.Failures++
		}
		suite.Cases = append(suite.Cases, tc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// objectName is "Kind namespace/name", or "Kind name" for a cluster-scoped
// object.
func objectName(o Object) string {
	name := o.Obj.GetName()
	if ns := o.Obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return o.Obj.GetObjectKind().GroupVersionKind().Kind + " " + name
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
