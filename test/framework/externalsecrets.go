package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// External Secrets Operator's own controller (its ExternalSecret and
// SecretStore reconcilers, the fake provider only), which `make eso` (a
// step of `make test`) builds from ESO's pinned module, and the CRDs it
// copies out of the same module. Specs run it as ESO runs in a cluster, to
// see what configward makes of the Secrets it writes.

// ExternalSecrets returns the ESO controller binary and the folder of its
// CRDs: $CONFIGWARD_ESO and $CONFIGWARD_ESO_CRDS when set, else the newest
// build under bin/.
func ExternalSecrets() (bin, crds string, err error) {
	bin, crds = os.Getenv("CONFIGWARD_ESO"), os.Getenv("CONFIGWARD_ESO_CRDS")
	if bin == "" {
		bin = newest(filepath.Join(RepoRoot(), "bin", "eso-*", "external-secrets"))
	}
	if crds == "" {
		crds = newest(filepath.Join(RepoRoot(), "bin", "crds", "external-secrets-*"))
	}
	if _, err := os.Stat(bin); bin == "" || err != nil {
		return "", "", errors.New("the controller of External Secrets Operator is not built: run `make eso` (part of `make test`) or set CONFIGWARD_ESO")
	}
	if _, err := os.Stat(filepath.Join(crds, "external-secrets.io_externalsecrets.yaml")); crds == "" || err != nil {
		return "", "", errors.New("the CRDs of External Secrets Operator are not in bin/crds: run `make eso` (part of `make test`) or set CONFIGWARD_ESO_CRDS")
	}
	return bin, crds, nil
}

// RequireExternalSecrets is RequireControlPlane for ESO's controller,
// for the specs that run it (GinkgoT() will do).
func RequireExternalSecrets(t skipper) {
	t.Helper()
	if _, _, err := ExternalSecrets(); err != nil {
		missing(t, err.Error())
	}
}

// StartExternalSecrets installs ESO's CRDs and runs its controller against
// the Env's API server, as a cluster administrator (its chart grants it
// every Secret). Stop the returned component to end it; the Env stops it
// otherwise.
func (e *Env) StartExternalSecrets() (*Component, error) {
	bin, crds, err := ExternalSecrets()
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{
		Paths: []string{crds}, ErrorIfPathMissing: true, MaxTime: time.Minute,
	}); err != nil {
		return nil, fmt.Errorf("installing External Secrets Operator's CRDs: %w", err)
	}
	kubeconfig, err := e.UserKubeconfig("external-secrets", "system:masters")
	if err != nil {
		return nil, err
	}
	return e.startProcess("external-secrets", bin, nil, "--kubeconfig="+kubeconfig)
}

// newest is the last match of pattern in lexical order, "" when none.
func newest(pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return ""
	}
	sort.Strings(m)
	return m[len(m)-1]
}
