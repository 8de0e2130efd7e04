package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cluster grows a namespace at a time, each the same: a team's
// services, their config, and config nobody mounts any more.
const (
	// workloadsPerNamespace Deployments, each with podsPerWorkload pods and
	// two ReplicaSets (the current one and the last, scaled to zero, as the
	// deployment controller keeps them).
	workloadsPerNamespace = 100
	podsPerWorkload       = 5
	podsPerNamespace      = workloadsPerNamespace * podsPerWorkload
	// configPerNamespace ConfigMaps and as many Secrets: one of each per
	// workload, the rest unreferenced, so that config objects number as
	// many as Pods.
	configPerNamespace = podsPerNamespace / 2
	// podsPerNode is the kubelet's default pod limit.
	podsPerNode = 110
)

// size is the cluster at one step of the benchmark.
type size struct {
	Factor     int `json:"factor"`
	Namespaces int `json:"namespaces"`
	Pods       int `json:"pods"`
	ConfigMaps int `json:"configMaps"`
	Secrets    int `json:"secrets"`
	Workloads  int `json:"workloads"`
	// ReplicaSets are two per workload.
	ReplicaSets int `json:"replicaSets"`
	Nodes       int `json:"nodes"`
}

func sizeOf(basePods, factor int) size {
	ns := (basePods*factor + podsPerNamespace - 1) / podsPerNamespace
	pods := ns * podsPerNamespace
	return size{Factor: factor, Namespaces: ns, Pods: pods, ConfigMaps: ns * configPerNamespace, Secrets: ns * configPerNamespace,
		Workloads: ns * workloadsPerNamespace, ReplicaSets: 2 * ns * workloadsPerNamespace, Nodes: (pods + podsPerNode - 1) / podsPerNode}
}

// seeder creates objects with a pool of workers: the API server, not one
// client's round trips, sets the pace.
type seeder struct {
	c     client.Client
	nodes int
}

const seedWorkers = 32

// namespaces creates namespaces [from, to) with everything in them and
// returns once all exist.
func (s *seeder) namespaces(ctx context.Context, from, to int) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	jobs := make(chan int)
	for range seedWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				if err := s.job(ctx, job); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for n := from; n < to; n++ {
		ns := namespaceName(n)
		if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	for n := from; n < to; n++ {
		for w := range workloadsPerNamespace {
			jobs <- n*workloadsPerNamespace + w
		}
	}
	close(jobs)
	wg.Wait()
	return first
}

func namespaceName(n int) string { return fmt.Sprintf("team-%03d", n) }

// job creates one workload (its ConfigMap and Secret, the spare ones that
// fall to it, its Deployment, two ReplicaSets and its pods, bound to a
// node).
func (s *seeder) job(ctx context.Context, global int) error {
	ns, w := namespaceName(global/workloadsPerNamespace), global%workloadsPerNamespace
	name := fmt.Sprintf("svc-%03d", w)
	perWorkload := configPerNamespace / workloadsPerNamespace
	for i := range perWorkload {
		cfg := fmt.Sprintf("%s-config-%d", name, i)
		if i == 0 {
			cfg = name + "-config"
		}
		if err := s.c.Create(ctx, configMap(ns, cfg, global*perWorkload+i)); err != nil {
			return err
		}
		if err := s.c.Create(ctx, secret(ns, strings.Replace(cfg, "-config", "-secret", 1))); err != nil {
			return err
		}
	}
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": ns}
	template := podTemplate(name, labels)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(podsPerWorkload)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: template},
	}
	if err := s.c.Create(ctx, dep); err != nil {
		return err
	}
	var current *appsv1.ReplicaSet
	for i, replicas := range []int32{0, podsPerWorkload} {
		hash := rand.String(10)
		rsLabels := with(labels, "pod-template-hash", hash)
		t := *template.DeepCopy()
		t.Labels = rsLabels
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + hash, Namespace: ns, Labels: rsLabels,
				Annotations:     map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(i + 1)},
				OwnerReferences: []metav1.OwnerReference{owner("apps/v1", "Deployment", dep.Name, dep.UID)}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr(replicas), Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: t},
		}
		if err := s.c.Create(ctx, rs); err != nil {
			return err
		}
		current = rs
	}
	for p := range podsPerWorkload {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: current.Name + "-" + rand.String(5), Namespace: ns,
				Labels: current.Spec.Template.Labels, OwnerReferences: []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", current.Name, current.UID)}},
			Spec: *current.Spec.Template.Spec.DeepCopy(),
		}
		pod.Spec.NodeName = fmt.Sprintf("kwok-node-%d", (global*podsPerWorkload+p)%s.nodes)
		withServiceAccountToken(&pod.Spec)
		if err := s.c.Create(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// podTemplate is a service's pod: an app container and a proxy sidecar,
// the app reading its ConfigMap as files and as env, a Secret as env and as
// files, the usual probes and resources.
func podTemplate(name string, labels map[string]string) corev1.PodTemplateSpec {
	container := func(c, image string, port int32) corev1.Container {
		return corev1.Container{
			Name: c, Image: "registry.example/team/" + image + ":1.42.0",
			Args: []string{"--config=/etc/app/app.yaml", "--log-level=info"},
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: name + "-secret"}, Key: "password"}}},
				{Name: "REGION", Value: "eu-west-1"},
			},
			EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}}},
			Ports:        []corev1.ContainerPort{{Name: c, ContainerPort: port}},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "tls", MountPath: "/etc/tls", ReadOnly: true}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString(c)}},
				PeriodSeconds: 5},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}},
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("app", name, 8080), container("proxy", "envoy", 15001)},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name + "-secret"}}},
			},
		},
	}
}

// withServiceAccountToken adds what the API server's ServiceAccount
// admission gives every pod of a real cluster (the test API server runs
// without it): a projected volume of a name unique to the pod, with the
// token, the cluster's CA (a ConfigMap) and the namespace, mounted in
// every container.
func withServiceAccountToken(spec *corev1.PodSpec) {
	name := "kube-api-access-" + rand.String(5)
	spec.ServiceAccountName = "default"
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr(int32(0o644)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr(int64(3607)), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}})
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts,
			corev1.VolumeMount{Name: name, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
	}
}

// configMap holds three keys of a few hundred bytes each; the values
// differ per object, as real config does.
func configMap(ns, name string, n int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/part-of": ns}},
		Data: map[string]string{
			"app.yaml":     fmt.Sprintf("listen: :8080\nworkers: %d\n", n%16+1) + strings.Repeat("feature: on\n", 30),
			"logging.yaml": strings.Repeat("level: info\n", 25),
			"LOG_LEVEL":    "info",
		},
	}
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte(rand.String(32)), "tls.key": []byte(rand.String(1200))},
	}
}

func owner(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range m {
		out[key] = val
	}
	return out
}

var (
	cpu    = resource.MustParse("100m")
	memory = resource.MustParse("128Mi")
)

func ptr[T any](v T) *T { return &v }
