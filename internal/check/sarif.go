package check

import (
	"encoding/json"
	"io"
	"net/url"
	"path/filepath"
	"slices"

	"github.com/configward/configward/internal/rules"
)

// The SARIF 2.1.0 schema (OASIS errata01), which the output names and the
// tests validate against.
const sarifSchemaURI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

const (
	homepage = "https://github.com/configward/configward"
	docsBase = homepage + "/blob/main/"
)

// ruleDocs describe the rules check reports, in the words of the Rules
// table (docs/apps/rules.md), with the documentation page that explains
// each (relative to the repository's root, with #section where the page
// covers more). A custom rule of a ConfigPolicy has no description of its
// own and no page.
var ruleDocs = map[string]struct{ description, page string }{
	rules.SubpathConfig:    {"A ConfigMap, Secret or projected volume mounted with subPath or subPathExpr never receives updates", "docs/apps/rules.md"},
	rules.HotConfigInEnv:   {"A hot ConfigMap or Secret consumed through env or envFrom never reaches the running process", "docs/apps/rules.md"},
	rules.SecretInEnv:      {"A Secret passed as env (env[].valueFrom.secretKeyRef or envFrom[].secretRef)", "docs/apps/rules.md"},
	rules.MissingConfigRef: {"A non-optional reference to a missing ConfigMap, Secret or key", "docs/apps/rules.md"},
	rules.SecretFileMode:   {"A Secret volume readable by group or others", "docs/apps/rules.md"},
	rules.ConfigSchema:     {"A ConfigMap that breaks the ConfigSchema governing it, or a ConfigSchema that does not compile", "docs/policy/configschema.md"},
	"configpolicy":         {"A ConfigPolicy that does not compile", "docs/policy/configpolicy.md"},
}

// sarifLevels maps actions to result levels. A Note (an exemption that does
// not count) is a warning, as the webhook returns it; an Unknown reference
// is a note.
var sarifLevels = map[rules.Action]string{rules.Deny: "error", rules.Warn: "warning", Note: "warning", rules.Audit: "note", Unknown: "note"}

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool       sarifTool     `json:"tool"`
	ColumnKind string        `json:"columnKind"`
	Results    []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver struct {
		Name           string      `json:"name"`
		Version        string      `json:"version,omitempty"`
		InformationURI string      `json:"informationUri"`
		Rules          []sarifRule `json:"rules"`
	} `json:"driver"`
}

type sarifRule struct {
	ID               string    `json:"id"`
	ShortDescription sarifText `json:"shortDescription"`
	HelpURI          string    `json:"helpUri,omitempty"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID     string            `json:"ruleId"`
	RuleIndex  int               `json:"ruleIndex"`
	Level      string            `json:"level"`
	Message    sarifText         `json:"message"`
	Locations  []sarifLocation   `json:"locations"`
	Properties map[string]string `json:"properties"`
}

type sarifLocation struct {
	PhysicalLocation struct {
		ArtifactLocation struct {
			URI string `json:"uri"`
		} `json:"artifactLocation"`
		Region struct {
			StartLine   int `json:"startLine"`
			StartColumn int `json:"startColumn"`
		} `json:"region"`
	} `json:"physicalLocation"`
}

// writeSARIF prints one SARIF 2.1.0 run: configward as the tool, with the
// rules that fired, and a result per finding.
func writeSARIF(w io.Writer, r Report) error {
	run := sarifRun{ColumnKind: "unicodeCodePoints", Results: []sarifResult{}}
	run.Tool.Driver.Name = "configward"
	run.Tool.Driver.Version = r.Version
	run.Tool.Driver.InformationURI = homepage
	run.Tool.Driver.Rules = []sarifRule{}
	var fired []string
	for _, res := range r.Results {
		fired = append(fired, res.Rule)
	}
	slices.Sort(fired)
	fired = slices.Compact(fired)
	for _, id := range fired {
		rule := sarifRule{ID: id, ShortDescription: sarifText{"Custom rule " + id + " of a ConfigPolicy"}}
		if doc, ok := ruleDocs[id]; ok {
			rule.ShortDescription.Text, rule.HelpURI = doc.description, docsBase+doc.page
		}
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, rule)
	}
	for _, res := range r.Results {
		var loc sarifLocation
		loc.PhysicalLocation.ArtifactLocation.URI = artifactURI(res.File)
		loc.PhysicalLocation.Region.StartLine = res.Line
		loc.PhysicalLocation.Region.StartColumn = res.Column
		index, _ := slices.BinarySearch(fired, res.Rule)
		run.Results = append(run.Results, sarifResult{
			RuleID: res.Rule, RuleIndex: index, Level: sarifLevels[res.Action], Message: sarifText{res.Message},
			Locations: []sarifLocation{loc},
			// SARIF levels lose Unknown and Note; keep the action and the
			// object for whoever reads the log.
			Properties: map[string]string{"action": string(res.Action), "kind": res.Kind, "namespace": res.Namespace, "name": res.Name, "path": res.Path},
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{Schema: sarifSchemaURI, Version: "2.1.0", Runs: []sarifRun{run}})
}

// artifactURI is a file as a URI reference: the path as given, so a relative
// path stays relative to where check ran (code scanning resolves it against
// the repository), escaped (a space is %20); an absolute path becomes a
// file: URI.
func artifactURI(file string) string {
	u := url.URL{Path: filepath.ToSlash(file)}
	if filepath.IsAbs(file) {
		u.Scheme = "file"
	}
	return u.String()
}
