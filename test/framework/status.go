package framework

import (
	"os"
	"path/filepath"
	"sync"
)

// Status runs `configward status` with args against the test API server,
// as the kubeconfig's user (an administrator).
func (e *Env) Status(args ...string) KubectlResult {
	return e.Configward(append([]string{"status"}, args...)...)
}

// Configward runs the configward CLI with args against the test API
// server, as the kubeconfig's user (an administrator).
func (e *Env) Configward(args ...string) KubectlResult {
	bin, err := Binary()
	if err != nil {
		return KubectlResult{ExitCode: -1, Stderr: err.Error()}
	}
	return runTool(bin, []string{"KUBECONFIG=" + e.Kubeconfig}, "", args...)
}

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// KubectlPlugin runs `kubectl configward args...`: the real kubectl finding
// the configward binary on PATH as kubectl-configward, as a user who
// installed the plugin would have it.
func (e *Env) KubectlPlugin(args ...string) KubectlResult {
	pluginOnce.Do(func() {
		var bin string
		if bin, pluginErr = Binary(); pluginErr != nil {
			return
		}
		if pluginDir, pluginErr = os.MkdirTemp(filepath.Dir(bin), "plugin-"); pluginErr != nil {
			return
		}
		pluginErr = os.Symlink(bin, filepath.Join(pluginDir, "kubectl-configward"))
	})
	if pluginErr != nil {
		return KubectlResult{ExitCode: -1, Stderr: pluginErr.Error()}
	}
	path := "PATH=" + pluginDir + string(os.PathListSeparator) + os.Getenv("PATH")
	return e.KubectlEnv([]string{path}, "", append([]string{"configward"}, args...)...)
}
