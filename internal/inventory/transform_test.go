package inventory

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/digest"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/workload"
)

func TestTransformSecretKeepsNoValue(t *testing.T) {
	in := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop",
			Annotations: map[string]string{
				lastApplied:               `{"stringData":{"password":"hunter2"}}`,
				v1alpha1.ReloadAnnotation: "hot",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("hunter2")},
	}
	out, err := TransformSecret(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if strings.Contains(s.String(), "hunter2") {
		t.Fatalf("a Secret value survived the transform: %s", s.String())
	}
	if s.Annotations[v1alpha1.ReloadAnnotation] != "hot" || s.Type != corev1.SecretTypeOpaque || s.ManagedFields != nil {
		t.Fatalf("metadata not kept as expected: %+v", s.ObjectMeta)
	}
	got, err := unpack(string(s.Data[packedKey]))
	if err != nil {
		t.Fatal(err)
	}
	if want := digest.SecretKeyDigests(in.Data); len(got) != 1 || got["password"] != want["password"] {
		t.Fatalf("digests %v, want %v", got, want)
	}
	again, _ := TransformSecret(s)
	if again.(*corev1.Secret).String() != s.String() {
		t.Fatal("transforming twice digested the digests")
	}
}

func TestTransformConfigMapDigestsDataAndBinaryData(t *testing.T) {
	in := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "flags"},
		Data:       map[string]string{"a": strings.Repeat("x", 10<<10)},
		BinaryData: map[string][]byte{"b": {0, 1, 2}},
		Immutable:  new(bool),
	}
	out, _ := TransformConfigMap(in)
	cm := out.(*corev1.ConfigMap)
	if cm.BinaryData != nil || len(cm.Data) != 1 {
		t.Fatalf("want both keys digested into one packed entry, got %d / %v", len(cm.Data), cm.BinaryData)
	}
	got, err := unpack(cm.Data[packedKey])
	if err != nil {
		t.Fatal(err)
	}
	want := digest.KeyDigests(in.Data, in.BinaryData)
	if len(got) != len(want) || got["a"] != want["a"] || got["b"] != want["b"] {
		t.Fatalf("digests %v, want %v", got, want)
	}
	if cm.Immutable == nil {
		t.Fatal("immutable dropped")
	}
}

func TestModeOf(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  Mode
		ok    bool
	}{{"", Rollout, true}, {"rollout", Rollout, true}, {"hot", Hot, true}, {"ignore", Ignore, true}, {"Hot", Rollout, false}, {"hott", Rollout, false}} {
		got, ok := ModeOf(map[string]string{v1alpha1.ReloadAnnotation: tc.value})
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: got %v,%v want %v,%v", tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

func TestUnpackRefusesCorruptInput(t *testing.T) {
	for _, bad := range []string{"\x05ab", "\x01a" + strings.Repeat("x", 3), "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"} {
		if _, err := unpack(bad); err == nil {
			t.Errorf("unpack(%q) accepted corrupt input", bad)
		}
	}
	if m, err := unpack(""); err != nil || len(m) != 0 {
		t.Fatalf("empty: %v %v", m, err)
	}
}

func TestTransformPodKeepsWhatItConsumes(t *testing.T) {
	isController := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: &isController}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "i", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}},
			Containers: []corev1.Container{{Name: "app", Image: "a", Args: []string{"--x"},
				Env:          []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/etc/x", SubPath: "x"}}}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "d",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "dbg"}}}}}}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol"}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Message: "m", ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}},
	}
	out, err := TransformPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Pod)
	if !reflect.DeepEqual(refs.FromPodSpec(&slim.Spec), refs.FromPodSpec(&pod.Spec)) {
		t.Errorf("the slim Pod consumes something else:\n%+v\n%+v", refs.FromPodSpec(&slim.Spec), refs.FromPodSpec(&pod.Spec))
	}
	if slim.Spec.Containers[0].Image != "" || slim.Status.Message != "" || slim.ManagedFields != nil {
		t.Errorf("the slim Pod kept what it does not need: %+v", slim)
	}
	// A delivery's health gate reads readiness and restarts, and nothing
	// else of a container's status.
	if want := []corev1.ContainerStatus{{Name: "app"}}; !reflect.DeepEqual(slim.Status.ContainerStatuses, want) {
		t.Errorf("the slim Pod's container statuses: %+v, want %+v", slim.Status.ContainerStatuses, want)
	}
	if slim.Status.Phase != corev1.PodRunning || metav1.GetControllerOf(slim) == nil {
		t.Errorf("phase and owner are needed to tell live consumers: %+v", slim)
	}
}

// Nothing a cached Secret or workload keeps may hold a value: only digests,
// names and configward's own metadata.
func TestTransformsKeepNoValues(t *testing.T) {
	const canary = "CANARY-d6f1e3"
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop",
			Annotations: map[string]string{
				lastApplied:                           `{"stringData":{"password":"` + canary + `"}}`,
				"backup.example.com/object":           `{"data":{"password":"` + canary + `"}}`,
				v1alpha1.ReloadAnnotation:             "hot",
				"configward.dev/exempt.secret-in-env": "why",
			},
			Labels: map[string]string{"team": canary, "configward.dev/x": "y"}},
		Data: map[string][]byte{"password": []byte(canary)},
	}
	out, err := TransformSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if dump := fmt.Sprintf("%#v", s); strings.Contains(dump, canary) {
		t.Fatalf("the cached Secret holds the value: %s", dump)
	}
	if s.Annotations[v1alpha1.ReloadAnnotation] != "hot" || s.Annotations["configward.dev/exempt.secret-in-env"] != "why" || s.Labels["configward.dev/x"] != "y" {
		t.Fatalf("configward's own metadata was dropped: %v %v", s.Annotations, s.Labels)
	}

	env := []corev1.EnvVar{{Name: "PASSWORD", Value: canary}, {Name: "FROM", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}
	spec := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", Env: env}}, Containers: []corev1.Container{{Name: "c", Env: env}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Env: env}}}}
	pod, err := TransformPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: *spec.DeepCopy()})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := TransformWorkload(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]any{"Pod": pod, "Deployment": dep} {
		if dump := fmt.Sprintf("%#v", o); strings.Contains(dump, canary) {
			t.Errorf("the cached %s holds an inline env value: %s", name, dump)
		}
		w, _ := workload.Builtin().For(o.(client.Object))
		spec, _ := w.PodSpec()
		if got := spec.Containers[0].Env[1].ValueFrom.SecretKeyRef.Name; got != "db" {
			t.Errorf("%s lost its reference: %q", name, got)
		}
	}
}

// A declared kind is cached unstructured: the same things must go as for a
// Deployment, wherever the kind keeps its pod template.
func TestTransformUnstructuredWorkload(t *testing.T) {
	const canary = "canary-7f3a9c"
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "web",
			"annotations":   map[string]any{lastApplied: `{"env":"` + canary + `"}`, "keep": "me"},
			"managedFields": []any{map[string]any{"manager": canary}}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "env": []any{
				map[string]any{"name": "PASSWORD", "value": canary},
				map[string]any{"name": "FROM", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "password"}}},
			}}},
			"initContainers": []any{map[string]any{"name": "i", "env": []any{map[string]any{"name": "P", "value": canary}}}},
		}}},
	}}
	out, err := TransformWorkload(u)
	if err != nil {
		t.Fatal(err)
	}
	if dump := fmt.Sprintf("%#v", out); strings.Contains(dump, canary) {
		t.Fatalf("the cached Rollout holds a value: %s", dump)
	}
	got := out.(*unstructured.Unstructured)
	if got.GetAnnotations()["keep"] != "me" {
		t.Errorf("other annotations were dropped: %v", got.GetAnnotations())
	}
	name, _, _ := unstructured.NestedString(got.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"].([]any)[1].(map[string]any), "valueFrom", "secretKeyRef", "name")
	if name != "db" {
		t.Errorf("the reference was dropped: %q", name)
	}
}
