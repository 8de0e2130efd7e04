package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// RequireEnv is set by `make test`: a suite that cannot find what it needs
// fails instead of skipping, so CI never passes on skipped suites.
const RequireEnv = "CONFIGWARD_REQUIRE_CLUSTER"

// ControlPlane returns the folder of the control plane binaries:
// $KUBEBUILDER_ASSETS, else the newest complete build `make controlplane`
// left under bin/k8s, which it then exports as $KUBEBUILDER_ASSETS for
// envtest and the components. "" when there is none.
func ControlPlane() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	done, _ := filepath.Glob(filepath.Join(RepoRoot(), "bin", "k8s", "*", ".complete"))
	if len(done) == 0 {
		return ""
	}
	sort.Slice(done, func(i, j int) bool { return modTime(done[i]) > modTime(done[j]) })
	dir := filepath.Dir(done[0])
	if _, err := os.Stat(filepath.Join(dir, "kwok")); err != nil {
		return ""
	}
	os.Setenv("KUBEBUILDER_ASSETS", dir)
	return dir
}

func modTime(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.ModTime().UnixNano()
}

// RequireControlPlane lets a suite that runs against a cluster built from
// source go on only when the binaries are there. Run by hand without them,
// it skips, saying how to build them; under `make test` (RequireEnv) it
// fails.
func RequireControlPlane(t testing.TB) {
	t.Helper()
	if ControlPlane() != "" {
		return
	}
	missing(t, "no control plane is built: run `make controlplane` once (10-15 minutes cold), then this suite, or `make e2e`")
}

// RequireHelm is RequireControlPlane for the helm binary the chart suite
// drives.
func RequireHelm(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(HelmPath()); err == nil {
		return
	}
	missing(t, "no helm is built: run `make helm` once, then this suite")
}

// skipper is what missing needs of a test: testing.TB, or Ginkgo's
// GinkgoT() for a requirement only some specs of a suite have.
type skipper interface {
	Helper()
	Fatal(...any)
	Skip(...any)
}

func missing(t skipper, why string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatal(why + fmt.Sprintf(" (%s is set: `make test` builds everything first, so this is a broken build)", RequireEnv))
	}
	t.Skip(why)
}

// ImageTarEnv names configward's image as `make image` writes it (an OCI
// layout tarball); `make test` sets it.
const ImageTarEnv = "CONFIGWARD_IMAGE_TAR"

// ImageTar is configward's image tarball: $CONFIGWARD_IMAGE_TAR, else the
// one `make image` left in bin/.
func ImageTar() string {
	if p := os.Getenv(ImageTarEnv); p != "" {
		return p
	}
	return filepath.Join(RepoRoot(), "bin", "configward-image.tar")
}

// RequireImage is RequireControlPlane for configward's image, which the
// node suite runs as the chart installs it.
func RequireImage(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(ImageTar()); err == nil {
		return
	}
	missing(t, "no configward image is built at "+ImageTar()+": run `make image` once, then this suite")
}
