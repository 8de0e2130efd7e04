// Command promrules checks alerting rules and PromQL queries with
// Prometheus' own parsers, so that what the chart ships is what Prometheus
// loads. It reads stdin and prints, one per line and sorted, the metric
// names the expressions select; it exits 1 with the parsers' errors.
//
//	promrules rules < groups.yaml    # a rule file: groups of rules
//	promrules exprs < queries.json   # a JSON array of PromQL expressions
//	promrules fires < case.json      # which alerts' expressions select
//	                                 # something over recorded samples
//
// fires reads {"rules": "<a rule file>", "time": <Unix seconds>,
// "samples": [{"labels": {"__name__": ..., ...}, "value": v}]}, records
// each sample at time in a TSDB of its own, evaluates every alert's
// expression there with Prometheus' engine, and prints the names of those
// that select a series (their "for" aside).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "promrules:", err)
		os.Exit(1)
	}
}

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: promrules rules|exprs < input")
	}
	input, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	p := parser.NewParser(parser.Options{})
	var exprs []string
	switch args[0] {
	case "fires":
		return fires(input, p, out)
	case "rules":
		groups, errs := rulefmt.Parse(input, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			return fmt.Errorf("%d errors in the rules: %v", len(errs), errs)
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				exprs = append(exprs, r.Expr)
			}
		}
		if len(exprs) == 0 {
			return fmt.Errorf("no rules")
		}
	case "exprs":
		if err := json.Unmarshal(input, &exprs); err != nil {
			return fmt.Errorf("reading the expressions: %w", err)
		}
	default:
		return fmt.Errorf("unknown mode %q", args[0])
	}
	names := map[string]bool{}
	for _, e := range exprs {
		expr, err := p.ParseExpr(e)
		if err != nil {
			return fmt.Errorf("%q: %w", e, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				names[vs.Name] = true
			}
			return nil
		})
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		fmt.Fprintln(out, n)
	}
	return nil
}
