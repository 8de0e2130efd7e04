package manager

import (
	"os"
	"path/filepath"
	"testing"
)

// A kubeconfig given by flag gets no client-side rate limit, as one from
// $KUBECONFIG or the pod's service account does (ctrl.GetConfig).
func TestRESTConfigFromFlagIsNotRateLimited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := (&Common{Kubeconfig: path}).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != -1 {
		t.Errorf("QPS %v: client-go would limit the process to 5 requests a second", cfg.QPS)
	}
}
