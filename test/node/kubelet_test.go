package node

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/test/framework"
)

// What configward's rules rest on, seen on the real node: the kubelet
// updates a ConfigMap mounted as a directory in a running container (by
// swapping its ..data symlink), never a subPath file of it, and env read
// from it is fixed when the container starts.
var _ = Describe("the kubelet, with a ConfigMap that changes under a running pod", func() {
	It("updates the mounted directory, never the subPath file, and leaves env as it started", func() {
		ctx := context.Background()
		ns := unmanagedNamespace
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hot",
			Annotations: map[string]string{v1alpha1.ReloadAnnotation: "hot"}}, Data: map[string]string{"level": "info"}}
		Expect(env.Client.Create(ctx, cm)).To(Succeed())
		pod := appPod(ns, "reader", hotReader("hot"))
		Expect(env.Client.Create(ctx, pod)).To(Succeed())
		running(pod)
		Eventually(output(pod), time.Minute, 200*time.Millisecond).Should(ContainElements(
			`env CONFIG_LEVEL "info"`, `file /config/dir/level "info"`, `file /config/sub/level "info"`))

		By("the ConfigMap changes")
		cm.Data["level"] = "debug"
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		changed := time.Now()
		Eventually(output(pod), 2*time.Minute, 200*time.Millisecond).Should(ContainElement(`file /config/dir/level "debug"`))
		seen := time.Since(changed)
		// Two more of the kubelet's syncs (5 s each here): the subPath file
		// would have been rewritten by now if it ever were.
		Consistently(output(pod), 12*time.Second, time.Second).ShouldNot(ContainElement(`file /config/sub/level "debug"`))
		Expect(output(pod)()).To(ContainElement(`file /config/sub/level "info"`))
		Expect(output(pod)()).NotTo(ContainElement(`env CONFIG_LEVEL "debug"`))
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(pod.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "the container ran throughout: what it saw changed under it")
		AddReportEntry("kubelet", fmt.Sprintf("mounted directory updated %s after the ConfigMap changed (kubelet syncFrequency 5s); subPath file and env unchanged", seen.Round(time.Second)))

		By("configward, installed by the chart, refuses the same pod through kubectl apply where it enforces its rules")
		managed := namespace(nil)
		hot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: managed, Name: "hot",
			Annotations: map[string]string{v1alpha1.ReloadAnnotation: "hot"}}, Data: map[string]string{"level": "info"}}
		Expect(env.Client.Create(ctx, hot)).To(Succeed())
		refused := appPod(managed, "reader", hotReader("hot"))
		refused.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		manifest, err := yaml.Marshal(refused)
		Expect(err).NotTo(HaveOccurred())
		res := env.Kubectl(string(manifest), "apply", "-f", "-")
		Expect(res.ExitCode).NotTo(BeZero(), res.Stdout)
		Expect(res.Stderr).To(ContainSubstring("subPath"))
		Expect(res.Stderr).To(ContainSubstring(`denied the request`))
		Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(refused), &corev1.Pod{}))).To(BeTrue(), "a refused pod is not stored")
	})
})

func namespace(labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-", Labels: labels}}
	Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// hotReader is a container of the app image that reads ConfigMap cm three
// ways: its key level as a file of the mounted directory, as a subPath
// file, and as env.
func hotReader(cm string) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "app", Image: framework.AppImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"/config/dir/level", "/config/sub/level"},
			Env: []corev1.EnvVar{{Name: "CONFIG_LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: "level"}}}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/config/dir"},
				{Name: "config", MountPath: "/config/sub/level", SubPath: "level"},
			},
		}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}},
		AutomountServiceAccountToken:  new(false),
		TerminationGracePeriodSeconds: new(int64(1)),
	}
}

func appPod(ns, name string, spec corev1.PodSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

// running waits for pod to run on the real node.
func running(pod *corev1.Pod) {
	Eventually(func() corev1.PodPhase {
		Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		return pod.Status.Phase
	}, 2*time.Minute, 250*time.Millisecond).Should(Equal(corev1.PodRunning), func() string {
		return fmt.Sprintf("%+v\nkubelet log:\n%s", pod.Status, tailFile(node.KubeletLog()))
	})
	Expect(pod.Spec.NodeName).To(Equal(node.Name))
}

// output is what the pod's app container has printed so far.
func output(pod *corev1.Pod) func() []string {
	return func() []string {
		lines, err := node.ContainerOutput(pod, "app")
		if err != nil {
			return nil
		}
		return lines
	}
}
