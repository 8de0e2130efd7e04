package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ArgoRolloutCRDs is the directory holding Argo Rollouts' real Rollout CRD,
// which `make argo-crds` (a step of `make test`) copies out of the pinned
// argo-rollouts module: $CONFIGWARD_ARGO_CRDS when set, else the newest
// bin/crds/argo-rollouts-* folder.
func ArgoRolloutCRDs() (string, error) {
	if dir := os.Getenv("CONFIGWARD_ARGO_CRDS"); dir != "" {
		return dir, checkCRD(dir)
	}
	dir := newest(filepath.Join(RepoRoot(), "bin", "crds", "argo-rollouts-*"))
	if dir == "" {
		return "", errors.New("the Rollout CRD of Argo Rollouts is not in bin/crds: run `make argo-crds` (part of `make test`) or set CONFIGWARD_ARGO_CRDS")
	}
	return dir, checkCRD(dir)
}

func checkCRD(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "rollout-crd.yaml")); err != nil {
		return fmt.Errorf("the Rollout CRD of Argo Rollouts: %w (run `make argo-crds`)", err)
	}
	return nil
}
