// Package register stands in for ESO's pkg/generator/register in the copy
// of ESO's module the Makefile's eso target builds from: of the generators
// (spec.dataFrom[].sourceRef.generatorRef) only those that call no cloud
// API, so the build carries no cloud SDK.
package register

import (
	_ "github.com/external-secrets/external-secrets/pkg/generator/fake"
	_ "github.com/external-secrets/external-secrets/pkg/generator/password"
	_ "github.com/external-secrets/external-secrets/pkg/generator/uuid"
)
