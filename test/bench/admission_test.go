package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

const admissionNamespace = "bench-admission"

// benchKey is the installation key the benchmarks' webhooks hash with.
var benchKey = []byte("bench-installation-key-000000000")

// BenchmarkConfigHashAdmission measures the mutating config-hash webhook's
// handler on a CREATE of a Deployment consuming 10 ConfigMaps/Secrets, with
// the inventory read from a real informer cache synced against a real API
// server: decode, reference extraction, 10 cache reads, hashing and the
// patch. HTTP and AdmissionReview (de)serialisation are not included.
func BenchmarkConfigHashAdmission(b *testing.B) {
	cfg := controlPlane(b)
	c := newClient(b, cfg)
	ctx := context.Background()

	createNamespace(b, c, admissionNamespace)
	dep := seedAdmissionFixture(b, ctx, c)

	inv, namespaces := startInventoryCache(b, cfg)

	// Every reference must be found in the cache: a missing one would still
	// be hashed (as missing) and stamped, and the benchmark would measure
	// NotFound lookups instead of the real path.
	keys := hashkey.Fixed(benchKey)
	_, counted, err := inv.TemplateHash(ctx, keys.Current().Bytes(), admissionNamespace, refs.ConsumedBy(&dep.Spec.Template.Spec), nil, true, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range referencedConfigMaps() {
		o, err := inv.Get(ctx, refs.ConfigMap, admissionNamespace, name)
		if err != nil || !o.Exists {
			b.Fatalf("ConfigMap %s not in the cache (err=%v)", name, err)
		}
	}
	if o, err := inv.Get(ctx, refs.Secret, admissionNamespace, "bench-secret-vol"); err != nil || !o.Exists {
		b.Fatalf("Secret bench-secret-vol not in the cache (err=%v)", err)
	}
	if counted != 10 {
		b.Fatalf("hash counted %d objects, want 10", counted)
	}

	raw, err := json.Marshal(dep)
	if err != nil {
		b.Fatal(err)
	}
	req := cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("bench-0000"),
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: admissionNamespace,
		Name:      dep.Name,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}}
	policies, err := configpolicy.New(ctx, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	h := webhookserver.Adapt(&admission.ConfigHash{Inventory: inv, Keys: keys, Namespaces: namespaces, Policies: policies, Kinds: workload.Builtin()},
		webhookserver.Decoder{Scheme: scheme.Scheme()})

	resp := h.Handle(ctx, req)
	if !resp.Allowed {
		b.Fatalf("not allowed: %+v", resp.Result)
	}
	if len(resp.Patches) == 0 {
		b.Fatalf("no patch in the response (warnings %v): the benchmark would not measure the stamping path", resp.Warnings)
	}
	b.Logf("patch: %+v", resp.Patches)

	b.ReportAllocs()
	for b.Loop() {
		resp = h.Handle(ctx, req)
	}
	if len(resp.Patches) == 0 {
		b.Fatal("no patch in the last response")
	}
}

// startInventoryCache builds the webhook's cache (inventory.CacheOptions, the
// project's scheme), registers the inventory's informers, starts it and waits
// for it to sync. The cache stops when the benchmark ends.
func startInventoryCache(b testing.TB, cfg *rest.Config) (*inventory.Inventory, client.Reader) {
	b.Helper()
	opts := inventory.CacheOptions()
	opts.Scheme = scheme.Scheme()
	ca, err := cache.New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inv, err := inventory.Start(ctx, ca, workload.Builtin(), nil)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	if _, err := ca.GetInformer(ctx, &corev1.Namespace{}); err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ca.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("cache: %v", err)
		}
	})
	if !ca.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	return inv, ca
}

func referencedConfigMaps() []string {
	var names []string
	for i := range 4 {
		names = append(names, fmt.Sprintf("bench-envfrom-%d", i))
	}
	for i := range 3 {
		names = append(names, fmt.Sprintf("bench-envkey-%d", i))
	}
	for i := range 2 {
		names = append(names, fmt.Sprintf("bench-vol-%d", i))
	}
	return names
}

// seedAdmissionFixture creates the 9 ConfigMaps and the Secret the
// Deployment references and returns the Deployment (not created).
func seedAdmissionFixture(b testing.TB, ctx context.Context, c client.Client) *appsv1.Deployment {
	b.Helper()
	data := func(n int) map[string]string {
		d := make(map[string]string, n)
		for k := range n {
			d[fmt.Sprintf("key-%d", k)] = fmt.Sprintf("value %d of a benchmark config", k)
		}
		return d
	}
	var objs []client.Object
	for _, name := range referencedConfigMaps() {
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: admissionNamespace},
			Data:       data(5),
		})
	}
	objs = append(objs, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-secret-vol", Namespace: admissionNamespace},
		StringData: data(3),
	})
	for _, o := range objs {
		if err := createIgnoringExisting(ctx, c, o); err != nil {
			b.Fatal(err)
		}
	}

	var container corev1.Container
	container.Name, container.Image = "app", "registry.example/app:1.0"
	for i := range 4 {
		container.EnvFrom = append(container.EnvFrom, corev1.EnvFromSource{
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("bench-envfrom-%d", i)}},
		})
	}
	for i := range 3 {
		container.Env = append(container.Env, corev1.EnvVar{
			Name: fmt.Sprintf("VALUE_%d", i),
			ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("bench-envkey-%d", i)},
				Key:                  "key-1",
			}},
		})
	}
	var volumes []corev1.Volume
	for i := range 2 {
		name := fmt.Sprintf("bench-vol-%d", i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: name},
				Items: []corev1.KeyToPath{
					{Key: "key-0", Path: "a.conf"},
					{Key: "key-2", Path: "b.conf"},
				},
			},
		}})
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/etc/" + name})
	}
	volumes = append(volumes, corev1.Volume{Name: "secret", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "bench-secret-vol"},
	}})
	container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "secret", MountPath: "/etc/secret"})

	labels := map[string]string{"app": "bench"}
	replicas := int32(2)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench-app", Namespace: admissionNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{container},
					Volumes:    volumes,
				},
			},
		},
	}
}
