// Package register stands in for ESO's pkg/provider/register in the copy of
// ESO's module the Makefile's eso target builds from: ESO's reconciler
// packages import that package, which imports every provider and with them
// every cloud SDK. The tests use only the fake provider.
package register

import (
	_ "github.com/external-secrets/external-secrets/pkg/provider/fake"
)
