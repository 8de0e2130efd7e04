package policies_test

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/tester"
)

// TestRego runs the Rego unit tests (*_test.rego) beside the rules with
// OPA's own test runner, so `go test` needs no opa binary.
func TestRego(t *testing.T) {
	results, err := tester.Run(context.Background(), ".")
	if err != nil {
		t.Fatalf("loading the policies: %v", err)
	}
	if len(results) == 0 {
		t.Fatal("no Rego tests found")
	}
	for _, r := range results {
		if !r.Pass() {
			t.Errorf("%s.%s: %s", r.Package, r.Name, r.String())
		} else {
			t.Logf("PASS %s.%s", r.Package, r.Name)
		}
	}
}
