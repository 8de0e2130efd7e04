// Package policies embeds configward's built-in rules, written in Rego
// (v1 syntax), with their Rego unit tests beside them. policies/README.md
// documents the input document the rules receive and the findings they
// return.
package policies

import "embed"

// FS holds the built-in modules and their tests (*_test.rego), which the
// engine leaves out.
//
//go:embed *.rego
var FS embed.FS
