package framework

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// HelmPath is the helm binary: $CONFIGWARD_HELM (which `make test` sets to
// the helm it builds from test/tools/helm), else the one `make helm` built,
// else helm on $PATH.
func HelmPath() string {
	if p := os.Getenv("CONFIGWARD_HELM"); p != "" {
		return p
	}
	// `make helm` builds it into a folder named after its pin.
	if built, _ := filepath.Glob(filepath.Join(RepoRoot(), "bin", "helm-*", "helm")); len(built) > 0 {
		sort.Slice(built, func(i, j int) bool { return modTime(built[i]) > modTime(built[j]) })
		return built[0]
	}
	return "helm"
}

// Helm runs the real helm binary against the test API server. Helm's
// caches go under the Env's directory so runs leave nothing in $HOME.
func (e *Env) Helm(args ...string) KubectlResult {
	return runTool(HelmPath(), []string{"KUBECONFIG=" + e.Kubeconfig, "HELM_CACHE_HOME=" + e.Dir + "/helm/cache",
		"HELM_CONFIG_HOME=" + e.Dir + "/helm/config", "HELM_DATA_HOME=" + e.Dir + "/helm/data"}, "", args...)
}

// HelmOffline runs helm for commands that need no cluster (lint, template).
func HelmOffline(args ...string) KubectlResult {
	return runTool(HelmPath(), nil, "", args...)
}

func runTool(bin string, extraEnv []string, stdin string, args ...string) KubectlResult {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	if stdin != "" {
		cmd.Stdin = bytes.NewBufferString(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res := KubectlResult{Stdout: out.String(), Stderr: errOut.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		res.ExitCode = -1
		res.Stderr += "\nrunning " + bin + ": " + err.Error()
	}
	return res
}
