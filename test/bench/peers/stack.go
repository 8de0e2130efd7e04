// Package peers measures configward side by side with the admission engines
// platform teams already run (Gatekeeper, Kyverno, ValidatingAdmissionPolicy)
// and with no policy at all, on one control plane, in one run. It is run by
// `make bench-peers` (BenchmarkPeers), never by `make test`: the peers are
// heavy builds.
package peers

import (
	"context"

	"github.com/configward/configward/test/framework"
)

// World is what every stack runs against: one kube-apiserver and etcd, the
// test CA (whose certificate the API server trusts for webhooks), and the
// folder holding the peers' binaries and manifests (`make peers`).
type World struct {
	Env *framework.Env
	// PeersDir holds gatekeeper, kyverno and the manifests copied from their
	// modules (CRDs), as `make peers` leaves them.
	PeersDir string
	// Namespace is where the benchmark's Deployments and config live.
	Namespace string
}

// Stack is one admission engine configured with the benchmark's policy.
type Stack interface {
	// Name as printed in the results ("gatekeeper", "kyverno", ...).
	Name() string
	// Install starts the engine's process (if it has one), installs its
	// webhook configuration and the policy: secret-in-env (Warn),
	// subpath-config for ConfigMaps (Deny), missing-config-ref where the
	// engine can express it, plus extra rules that never match (rule i denies
	// a container with an env var named FORBIDDEN_<i>, i = 1..extra). It
	// returns once every rule is in force (probed with dry-run requests).
	Install(ctx context.Context, w *World, extra int) error
	// PID of the policy process whose CPU and memory are measured; 0 when
	// the engine runs inside kube-apiserver or there is none.
	PID() int
	// Uninstall removes the webhook configuration and policies and stops
	// the process, leaving the API server as before Install.
	Uninstall(ctx context.Context, w *World) error
}
