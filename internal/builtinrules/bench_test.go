package builtinrules_test

import (
	"testing"

	"github.com/configward/configward/internal/builtinrules"
	"github.com/configward/configward/internal/ruleinput/ruleinputtest"
	"github.com/configward/configward/internal/rules"
)

// BenchmarkBuiltinRules measures one admission's worth of built-in rule
// evaluation (ruleinputtest.Benchmarks), as workloadrules.Judge does it
// without custom rules: every rule, then the findings in their order.
// Budget: 60 µs per review (the performance issue's target), and the
// allocations of the findings' messages, about eight per finding.
func BenchmarkBuiltinRules(b *testing.B) {
	for _, bc := range ruleinputtest.Benchmarks(b) {
		b.Run(bc.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fs := builtinrules.Findings(bc.In)
				rules.SortFindings(fs)
				if len(fs) != bc.Want {
					b.Fatalf("%d findings, want %d", len(fs), bc.Want)
				}
			}
		})
	}
}
