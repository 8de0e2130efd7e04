package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControllerManagerControllers are the kube-controller-manager controllers
// the suites run: the ones that write or delete ConfigMaps and Secrets in
// every namespace, which change control must never get in the way of. The
// workload controllers (deployments, replicasets, ...) stay off: no kubelet
// runs here, and the suites read pod templates, not pods.
var ControllerManagerControllers = []string{
	"namespace-controller",
	"garbage-collector-controller",
	"root-ca-certificate-publisher-controller",
	"serviceaccount-token-controller",
}

// StartControllerManager runs kube-controller-manager (built with the
// API server by `make controlplane`) against the test API server the way
// kubeadm runs it: authenticated as system:kube-controller-manager, each
// controller with its own service account. It stops with the Env.
func (e *Env) StartControllerManager() error {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-controller-manager not found in KUBEBUILDER_ASSETS (run `make controlplane`): %w", err)
	}
	user, err := e.testEnv.AddUser(envtest.User{Name: "system:kube-controller-manager"}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	dir := filepath.Join(e.Dir, "kube-controller-manager")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	kubeconfig, rootCA := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(rootCA, e.Config.CAData, 0o600); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(e.testEnv.ControlPlane.APIServer.CertDir, "sa-signer.key"),
		"--root-ca-file="+rootCA,
		"--controllers="+strings.Join(ControllerManagerControllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-namespace-syncs=5",
		"--v=2",
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); log.Close() }()
	e.stops = append(e.stops, func() error {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		return nil
	})
	select {
	case err := <-exited:
		out, _ := os.ReadFile(log.Name())
		return errors.Join(fmt.Errorf("kube-controller-manager exited at start: %v", err), errors.New(tail(string(out), 2000)))
	case <-time.After(time.Second):
	}
	e.ControllerManagerLog = log.Name()
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
