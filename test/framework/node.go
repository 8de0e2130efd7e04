package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A real node beside the API server: the kubelet (from test/tools/controlplane,
// beside kube-apiserver), containerd and runc (from test/tools/node), built by
// `make node`, CNI bridge networking on a subnet of
// its own, and the test images imported into containerd. Everything it
// changes on the machine (processes, mounts, the bridge, cgroups and the
// host sysctls the kubelet and the bridge plugin set) is written to a state
// file under NodeStateDir before it is changed, so the next StartNode on
// this machine undoes what a crashed test left.

// NodeDirEnv names the folder `make node` builds the node's binaries into.
const NodeDirEnv = "CONFIGWARD_NODE_DIR"

// NodeImagesEnv names the folder `make node` builds the test images into
// (one of its own, keyed by their sources, so that changing a test program
// never rebuilds the kubelet).
const NodeImagesEnv = "CONFIGWARD_NODE_IMAGES"

// RequireNodeEnv makes a node suite fail, instead of skipping, where the
// node cannot start; .ci/run sets it.
const RequireNodeEnv = "CONFIGWARD_REQUIRE_NODE"

// NodeStateDir holds one state file per running test node.
const NodeStateDir = "/run/configward-test-nodes"

// The test images `make node` builds, by the reference their pods use. The
// tag is fixed: each node imports them into a containerd root of its own.
const (
	PauseImage = "localhost/configward-test/pause:test"
	AppImage   = "localhost/configward-test/app:test"
	// ReloadAppImage runs test/tools/node/reloadapp, a program that
	// reloads its config in place (on SIGHUP, POST /-/reload or, with
	// -watch, a swap of its directory).
	ReloadAppImage = "localhost/configward-test/reloadapp:test"
	// TLSOnceImage runs test/tools/node/tlsonce, a program that loads its
	// serving certificate once, at start.
	TLSOnceImage = "localhost/configward-test/tlsonce:test"
	// PrometheusImage runs the Prometheus server of test/tools/prometheus
	// (`make node` assembles it from the binary `make prometheus` builds;
	// a spec imports it with Node.ImportImage from PrometheusImageEnv).
	PrometheusImage = "localhost/configward-test/prometheus:test"
	// AlertmanagerImage runs Alertmanager, unmodified, from
	// test/tools/alertmanager (`make node` assembles it from the binary
	// `make alertmanager` builds; a spec imports it with Node.ImportImage
	// from AlertmanagerImageEnv). Its web UI is a one-page stand-in.
	AlertmanagerImage = "localhost/configward-test/alertmanager:test"
	// CaddyImage runs Caddy with its standard modules, unmodified, from
	// test/tools/caddy (`make node` assembles it from the binary `make
	// caddy` builds; a spec imports it with Node.ImportImage from
	// CaddyImageEnv).
	CaddyImage = "localhost/configward-test/caddy:test"
)

// PrometheusImageEnv names the tarball of PrometheusImage.
const PrometheusImageEnv = "CONFIGWARD_NODE_PROMETHEUS_IMAGE"

// AlertmanagerImageEnv names the tarball of AlertmanagerImage.
const AlertmanagerImageEnv = "CONFIGWARD_NODE_ALERTMANAGER_IMAGE"

// CaddyImageEnv names the tarball of CaddyImage.
const CaddyImageEnv = "CONFIGWARD_NODE_CADDY_IMAGE"

// nodeImages are the images each node imports, by their tarballs' names.
var nodeImages = []string{"pause", "app", "reloadapp", "tlsonce"}

// nodeHostPaths are the places outside its root a node writes to, whatever
// it is told: the kubelet's device-plugin socket folder and container log
// links, the CNI result cache, the root shims' socket folder. Those that
// did not exist before the node started are removed with it.
var nodeHostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/lib/cni", "/run/containerd"}

// nodeSysctls are the host settings the kubelet (protectKernelDefaults:
// false) and the CNI bridge plugin (a gateway needs forwarding) change; they
// are put back when the node stops.
var nodeSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward",
}

// NodeMissing says why no real node can start on this machine ("" when one
// can): not root, `make node` not run, no overlay filesystem.
func NodeMissing() string {
	dir, images := os.Getenv(NodeDirEnv), os.Getenv(NodeImagesEnv)
	switch {
	case os.Geteuid() != 0:
		return "the real node needs root (mounts, network interfaces, cgroups)"
	case dir == "" || images == "":
		return NodeDirEnv + " or " + NodeImagesEnv + " is not set: run `make node` once, then this suite with " + NodeDirEnv + " and " +
			NodeImagesEnv + " set to its folders (`make -pn | grep CONFIGWARD_NODE` names them), or `make test`"
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		return fmt.Sprintf("no node is built in %s: run `make node`", dir)
	}
	if _, err := os.Stat(filepath.Join(images, ".complete")); err != nil {
		return fmt.Sprintf("no test images are built in %s: run `make node`", images)
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		return "the kernel offers no overlay filesystem, which containerd's snapshotter needs"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command (iproute2) to make the node's bridge"
	}
	return ""
}

// RequireNode skips t where no node can start, and fails it instead where
// RequireNodeEnv is set.
func RequireNode(t testing.TB) {
	t.Helper()
	why := NodeMissing()
	if why == "" {
		return
	}
	if os.Getenv(RequireNodeEnv) != "" {
		t.Fatal(why + fmt.Sprintf(" (%s is set: `make test` builds the node first, so this machine cannot run it)", RequireNodeEnv))
	}
	t.Skip(why)
}

// Node is a running real node.
type Node struct {
	Name string
	// IP is the node's address: the gateway of its pod bridge.
	IP string
	// Subnet is its pods' (a /24 no other route uses).
	Subnet string
	state  nodeState
	bin    string
	socket string

	containerd, kubelet *Component
	// apiServer serves the `kubernetes` Service to the node's pods.
	apiServer *Balancer
	// services are what ServeService started, stopped with the node.
	services []func()
}

// nodeState is what teardown needs, written before anything is changed.
type nodeState struct {
	Owner   int               `json:"owner"`
	Root    string            `json:"root"`
	Bin     string            `json:"bin"`
	Bridge  string            `json:"bridge"`
	Sysctls map[string]string `json:"sysctls"`
	PIDs    []int             `json:"pids,omitempty"`
	// Created are the nodeHostPaths the node made.
	Created []string `json:"created,omitempty"`
}

func (s nodeState) file() string { return filepath.Join(NodeStateDir, filepath.Base(s.Root)+".json") }

func (s nodeState) save() error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(s.file(), b, 0o600)
}

// StartNode starts a real node called name: containerd with the test images
// imported, CNI bridge networking, and a kubelet registered with the API
// server. The Env stops it; so does the next StartNode on this machine if
// the test crashes.
func (e *Env) StartNode(name string) (*Node, error) {
	if why := NodeMissing(); why != "" {
		return nil, errors.New(why)
	}
	if err := os.MkdirAll(NodeStateDir, 0o700); err != nil {
		return nil, err
	}
	sweepNodes()
	bin := os.Getenv(NodeDirEnv)
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("/var/tmp", "configward-node-")
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, Subnet: subnet + ".0/24", IP: subnet + ".1", bin: bin, socket: filepath.Join(root, "containerd.sock")}
	n.state = nodeState{Owner: os.Getpid(), Root: root, Bin: bin, Bridge: "cw" + filepath.Base(root)[len("configward-node-"):], Sysctls: map[string]string{}}
	if len(n.state.Bridge) > 15 {
		n.state.Bridge = n.state.Bridge[:15]
	}
	for _, k := range nodeSysctls {
		if v, err := os.ReadFile(sysctlPath(k)); err == nil {
			n.state.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range nodeHostPaths {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			n.state.Created = append(n.state.Created, p)
		}
	}
	if err := n.state.save(); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, n.stop)
	if err := n.network(); err != nil {
		return nil, err
	}
	if err := n.serveKubernetesService(e); err != nil {
		return nil, err
	}
	if err := n.startContainerd(e); err != nil {
		return nil, err
	}
	if err := n.startKubelet(e); err != nil {
		return nil, err
	}
	return n, nil
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

// freeSubnet is the first 10.250.N of a /24 no route of this machine covers.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip route: %w", err)
	}
	for i := 0; i < 256; i++ {
		prefix := fmt.Sprintf("10.250.%d", i)
		if !strings.Contains(string(out), prefix+".") {
			return prefix, nil
		}
	}
	return "", errors.New("no free 10.250.N.0/24 for the node's pods")
}

// network makes the pod bridge with the node's address on it: the CNI
// bridge plugin attaches pods to it, and the node registers with that
// address (the kubelet refuses a loopback one). Nothing routes the subnet
// anywhere but this machine.
func (n *Node) network() error {
	br := n.state.Bridge
	for _, args := range [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", n.IP + "/24", "dev", br},
		{"link", "set", br, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	dir := filepath.Join(n.state.Root, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := map[string]any{
		"cniVersion": "1.0.0", "name": "configward-test",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": br, "isGateway": true, "ipMasq": false, "hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  []any{[]any{map[string]any{"subnet": n.Subnet, "gateway": n.IP}}},
				"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
				"dataDir": filepath.Join(n.state.Root, "cni", "ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-configward-test.conflist"), b, 0o644)
}

// serveKubernetesService puts the `kubernetes` Service's cluster IP on the
// node's bridge, where its pods' default route ends, and forwards its port
// to the API server (see incluster.go).
func (n *Node) serveKubernetesService(e *Env) error {
	var svc corev1.Service
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, &svc); err != nil {
		return fmt.Errorf("reading the kubernetes Service: %w", err)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" {
		return fmt.Errorf("the kubernetes Service has no cluster IP and port: %+v", svc.Spec)
	}
	if out, err := exec.Command("ip", "addr", "add", svc.Spec.ClusterIP+"/32", "dev", n.state.Bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr add %s: %v: %s", svc.Spec.ClusterIP, err, out)
	}
	apiServer, err := url.Parse(e.Config.Host)
	if err != nil {
		return err
	}
	b, err := NewBalancerAt(net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))))
	if err != nil {
		return fmt.Errorf("serving the kubernetes Service: %w", err)
	}
	b.SetEndpoints(apiServer.Host)
	n.apiServer = b
	return nil
}

// ServeService makes port of Service namespace/name reachable from the
// node's pods at the node's address, as kube-proxy would at the Service's
// cluster IP: the pods here have no Service network but the `kubernetes`
// Service, and no DNS, so what must reach another Service is pointed at
// <node IP>:port (with the Service's DNS name as the TLS server name where
// it checks a certificate). A Balancer listens there, on this machine, and
// forwards each connection to one of the Service's ready endpoints, which
// it reads from the Service's EndpointSlices (kube-controller-manager keeps
// them) every half second until the node stops: pods that come and go are
// followed, and the Service need not exist yet. It returns the address.
func (n *Node) ServeService(e *Env, namespace, name string, port int32) (string, error) {
	b, err := NewBalancerAt(net.JoinHostPort(n.IP, strconv.Itoa(int(port))))
	if err != nil {
		return "", fmt.Errorf("serving Service %s/%s on the node: %w", namespace, name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.services = append(n.services, func() { cancel(); _ = b.Close() })
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if eps, err := serviceEndpoints(ctx, e.Client, namespace, name, port); err == nil {
				b.SetEndpoints(eps...)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return b.Addr(), nil
}

// serviceEndpoints are the ready endpoints (IP:target port) of port of a
// Service, from its EndpointSlices.
func serviceEndpoints(ctx context.Context, c client.Client, namespace, name string, port int32) ([]string, error) {
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc); err != nil {
		return nil, err
	}
	portName, found := "", false
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			portName, found = p.Name, true
		}
	}
	if !found {
		return nil, fmt.Errorf("the Service %s/%s has no port %d", namespace, name, port)
	}
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices.Items {
		for _, p := range s.Ports {
			if p.Port == nil || p.Name == nil || *p.Name != portName {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					for _, a := range ep.Addresses {
						out = append(out, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
					}
				}
			}
		}
	}
	return out, nil
}

// startContainerd runs containerd with everything under the node's root
// and imports the test images.
func (n *Node) startContainerd(e *Env) error {
	r := n.state.Root
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
temp = %[3]q
imports = []
[grpc]
  address = %[4]q
[ttrpc]
  address = "%[4]s.ttrpc"
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[5]q
  [plugins.'io.containerd.cri.v1.runtime']
    # The sandbox's oom_score_adj of -998 needs CAP_SYS_RESOURCE, which a
    # CI sandbox's root may lack.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[6]q
          Root = %[7]q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[8]q]
      conf_dir = %[9]q
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.internal.v1.opt']
    path = %[10]q
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
`, filepath.Join(r, "containerd", "root"), filepath.Join(r, "containerd", "state"), filepath.Join(r, "containerd", "tmp"), n.socket,
		PauseImage, filepath.Join(n.bin, "runc"), filepath.Join(r, "runc"), filepath.Join(n.bin, "cni"),
		filepath.Join(r, "cni", "net.d"), filepath.Join(r, "containerd", "opt"))
	path := filepath.Join(r, "containerd.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return err
	}
	c, err := n.start(e, "containerd", []string{"PATH=" + n.bin + ":" + os.Getenv("PATH")}, "--config", path)
	if err != nil {
		return err
	}
	n.containerd = c
	for _, image := range nodeImages {
		tar := filepath.Join(os.Getenv(NodeImagesEnv), image+".tar")
		var out []byte
		for range 50 { // containerd's socket comes up within a second
			if out, err = n.ctr("images", "import", tar); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("importing %s: %v: %s", tar, err, out)
		}
	}
	return nil
}

// start runs one of the node's binaries and records its process in the
// state file, for a teardown after a crash.
func (n *Node) start(e *Env, binary string, environ []string, args ...string) (*Component, error) {
	c, err := e.startProcess(n.Name+"-"+binary, filepath.Join(n.bin, binary), environ, args...)
	if err != nil {
		return nil, err
	}
	n.state.PIDs = append(n.state.PIDs, c.PID())
	return c, n.state.save()
}

func (n *Node) ctr(args ...string) ([]byte, error) {
	return exec.Command(filepath.Join(n.bin, "ctr"), append([]string{"-a", n.socket, "-n", "k8s.io"}, args...)...).CombinedOutput()
}

// startKubelet registers the node. Its configuration fits a CI sandbox:
// cgroup v1 with the cgroupfs driver and no QoS cgroups, no iptables
// chains, eviction and image garbage collection that a busy disk does not
// set off, and a sync every 5 s, so a ConfigMap change reaches a running
// pod's volume within seconds instead of the default minute.
func (n *Node) startKubelet(e *Env) error {
	r := n.state.Root
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	user := envtest.User{Name: "system:node:" + n.Name, Groups: []string{"system:nodes"}}
	kubeconfig, err := e.componentKubeconfig(n.Name+"-kubelet", user)
	if err != nil {
		return err
	}
	// RBAC, not the Node authorizer, decides here: the node's identity
	// gets the role the bootstrap policy keeps for nodes.
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configward-test-node-" + n.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user.Name}},
	}
	if err := e.Client.Create(context.Background(), binding); err != nil {
		return fmt.Errorf("binding the node's role: %w", err)
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%[1]s
imageServiceEndpoint: unix://%[1]s
address: %[2]s
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
failSwapOn: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
localStorageCapacityIsolation: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: %[5]q
syncFrequency: 5s
resolvConf: ""
serializeImagePulls: true
`, n.socket, n.IP, ports[0], ports[1], filepath.Join(r, "pod-logs"))
	path := filepath.Join(r, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return err
	}
	c, err := n.start(e, "kubelet", nil,
		"--config", path, "--kubeconfig", kubeconfig, "--root-dir", filepath.Join(r, "kubelet"), "--cert-dir", filepath.Join(r, "kubelet-pki"),
		"--hostname-override", n.Name, "--node-ip", n.IP, "--v", "2")
	if err != nil {
		return err
	}
	n.kubelet = c
	// Ready once the runtime and CNI answer.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var node corev1.Node
		err := e.Client.Get(context.Background(), client.ObjectKey{Name: n.Name}, &node)
		if err == nil && nodeReady(&node) {
			return nil
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(c.Log)
			return fmt.Errorf("node %s not Ready after 2 minutes (%v); kubelet log:\n%s", n.Name, err, tail(string(out), 4000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ImportImage imports an image tarball (docker-archive or OCI layout, as
// `make image` writes configward's) into the node's containerd, where the
// kubelet finds it by the reference the tarball names: no registry.
func (n *Node) ImportImage(tar string) error {
	if out, err := n.ctr("images", "import", tar); err != nil {
		return fmt.Errorf("importing %s: %v: %s", tar, err, out)
	}
	return nil
}

// KillContainer kills a running container of a pod on the node with
// SIGKILL, as the kernel's OOM killer or a crash would: nothing in the
// process runs on its way out.
func (n *Node) KillContainer(pod *corev1.Pod, container string) error {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name != container {
			continue
		}
		id, ok := strings.CutPrefix(s.ContainerID, "containerd://")
		if !ok {
			return fmt.Errorf("container %s of pod %s/%s has no containerd ID (%q)", container, pod.Namespace, pod.Name, s.ContainerID)
		}
		if out, err := n.ctr("tasks", "kill", "-s", "SIGKILL", id); err != nil {
			return fmt.Errorf("killing container %s of pod %s/%s: %v: %s", container, pod.Namespace, pod.Name, err, out)
		}
		return nil
	}
	return fmt.Errorf("pod %s/%s has no status of a container %s", pod.Namespace, pod.Name, container)
}

// KubeletLog is the kubelet's log file.
func (n *Node) KubeletLog() string { return n.kubelet.Log }

// ContainerOutput is what a container of a pod on the node has printed:
// the lines of the CRI log files the kubelet keeps (one per restart),
// oldest first, without their timestamp and stream prefix.
func (n *Node) ContainerOutput(pod *corev1.Pod, container string) ([]string, error) {
	dir := filepath.Join(n.state.Root, "pod-logs", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), container)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			// "<RFC3339Nano> <stdout|stderr> <F|P> <text>"
			if parts := strings.SplitN(s.Text(), " ", 4); len(parts) == 4 {
				out = append(out, parts[3])
			}
		}
		f.Close()
	}
	return out, nil
}

// stop tears the node down (see teardown).
func (n *Node) stop() error {
	if n.kubelet != nil {
		_ = n.kubelet.Stop()
	}
	// The pods' containers first, while containerd can still remove them.
	if n.containerd != nil {
		if out, err := n.ctr("tasks", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(string(out)) {
				_, _ = n.ctr("tasks", "kill", "-s", "SIGKILL", id)
			}
		}
		_ = n.containerd.Stop()
	}
	if n.apiServer != nil {
		_ = n.apiServer.Close()
	}
	for _, stop := range n.services {
		stop()
	}
	return teardown(n.state)
}

// sweepNodes tears down the nodes of test processes that are gone.
func sweepNodes() {
	files, _ := filepath.Glob(filepath.Join(NodeStateDir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		var s nodeState
		if err != nil || json.Unmarshal(b, &s) != nil {
			continue
		}
		if s.Owner != os.Getpid() && !alive(s.Owner) {
			_ = teardown(s)
		}
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie's state is Z: it is gone but for its exit status.
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

// teardown undoes what a node changed, whether its processes still run or
// not: it kills them and the containers' shims and processes, unmounts
// everything under its root (overlay rootfs, network namespaces, volume
// tmpfs), deletes its bridge and the veths on it, puts the sysctls back,
// removes the cgroups its containers used, and deletes its root.
func teardown(s nodeState) error {
	var errs []error
	// A process's executable is its resolved path: bin/ may be a link (a
	// second work tree sharing one build cache).
	bin := s.Bin
	if resolved, err := filepath.EvalSymlinks(s.Bin); err == nil {
		bin = resolved
	}
	for _, pid := range s.PIDs {
		if alive(pid) && strings.HasPrefix(exe(pid), bin+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	runc := filepath.Join(s.Bin, "runc")
	roots, _ := filepath.Glob(filepath.Join(s.Root, "runc", "*"))
	for _, root := range roots {
		out, _ := exec.Command(runc, "--root", root, "list", "-q").Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command(runc, "--root", root, "kill", id, "KILL").Run()
			_ = exec.Command(runc, "--root", root, "delete", "-f", id).Run()
		}
	}
	// The shims: started by containerd with its socket as their address.
	procs, _ := filepath.Glob("/proc/[0-9]*")
	socket := filepath.Join(s.Root, "containerd.sock")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		if strings.HasPrefix(exe(pid), bin+"/") && strings.Contains(string(cmdline), socket) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	time.Sleep(200 * time.Millisecond)
	mounts, _ := os.ReadFile("/proc/mounts")
	var under []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], s.Root+"/") {
			under = append(under, f[1])
		}
	}
	for i := len(under) - 1; i >= 0; i-- { // deepest (latest) first
		if err := syscall.Unmount(under[i], 0); err != nil {
			if err := syscall.Unmount(under[i], syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", under[i], err))
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show", "master", s.Bridge).Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				_ = exec.Command("ip", "link", "del", strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]).Run()
			}
		}
	}
	if exec.Command("ip", "link", "show", s.Bridge).Run() == nil {
		if out, err := exec.Command("ip", "link", "del", s.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting bridge %s: %v: %s", s.Bridge, err, out))
		}
	}
	for k, v := range s.Sysctls {
		if err := os.WriteFile(sysctlPath(k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", k, v, err))
		}
	}
	// containerd puts pod containers under /k8s.io/<id> in each hierarchy
	// (no QoS cgroups, cgroupfs driver).
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	for _, h := range hierarchies {
		removeCgroups(h)
	}
	// The kubelet links each container's log into /var/log/containers.
	links, _ := filepath.Glob("/var/log/containers/*")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, s.Root+"/") {
			_ = os.Remove(l)
		}
	}
	for _, p := range s.Created {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(s.Root); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(s.file()); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeCgroups removes an empty cgroup tree, deepest first.
func removeCgroups(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroups(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}

func exe(pid int) string {
	p, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return p
}
