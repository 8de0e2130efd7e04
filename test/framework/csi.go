package framework

import (
	"errors"
	"os"
	"path/filepath"
)

// CSIDriverCRDs is the directory holding the Secrets Store CSI driver's
// SecretProviderClass and SecretProviderClassPodStatus CRDs, which `make
// csi-crds` (a step of `make test`) copies out of the driver's pinned
// module: $CONFIGWARD_CSI_CRDS when set, else the newest
// bin/crds/secrets-store-csi-driver-* folder.
func CSIDriverCRDs() (string, error) {
	dir := os.Getenv("CONFIGWARD_CSI_CRDS")
	if dir == "" {
		dir = newest(filepath.Join(RepoRoot(), "bin", "crds", "secrets-store-csi-driver-*"))
	}
	if dir == "" {
		return "", errors.New("the Secrets Store CSI driver's CRDs are not in bin/crds: run `make csi-crds` (part of `make test`) or set CONFIGWARD_CSI_CRDS")
	}
	if _, err := os.Stat(filepath.Join(dir, "secrets-store.csi.x-k8s.io_secretproviderclasspodstatuses.yaml")); err != nil {
		return "", errors.New("the Secrets Store CSI driver's CRDs: " + err.Error() + " (run `make csi-crds`)")
	}
	return dir, nil
}
