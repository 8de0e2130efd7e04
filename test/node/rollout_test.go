package node

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// The pods a rollout starts, on the real node: a config change rolls the
// Deployment and its new pods see the new bytes; with config revisions,
// kubectl rollout undo brings back pods that see the old bytes, though the
// ConfigMap holds the new ones.
var _ = Describe("a Deployment on the real node whose ConfigMap changes, with config revisions", func() {
	It("rolls to pods that see the new bytes, and kubectl rollout undo to pods that see the old ones", func() {
		ctx := context.Background()
		ns := namespace(map[string]string{"configward-test/revisions": "on"})
		policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "node-revisions-" + ns}, Spec: v1alpha1.ConfigPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Revisions:         v1alpha1.RevisionSettings{Enabled: true},
		}}
		Expect(env.Client.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, policy)).To(Succeed()) })
		Eventually(func() []metav1.Condition {
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			return policy.Status.Conditions
		}, 30*time.Second).Should(ContainElement(HaveField("Status", metav1.ConditionTrue)))

		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"level": "info"}}
		Expect(env.Client.Create(ctx, cm)).To(Succeed())
		spec := reader("settings")
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: spec},
		}}
		// The policy's Ready condition says the controller compiled it; each
		// webhook replica learns it from its own cache, and one that has not
		// yet stamps the first revision without snapshots, to which kubectl
		// rollout undo can bring nothing back (seen under CI load). So dry
		// runs, answered by either replica, must carry snapshots repeatedly
		// (the webhook's cache must also hold the ConfigMap) before the
		// Deployment is written.
		Eventually(func() string {
			dry := d.DeepCopy()
			if err := env.Client.Create(ctx, dry, client.DryRunAll); err != nil {
				return err.Error()
			}
			return dry.Spec.Template.Annotations[v1alpha1.ConfigSnapshotsAnnotation]
		}, 30*time.Second, 100*time.Millisecond).MustPassRepeatedly(10).ShouldNot(BeEmpty())
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		Expect(d.Spec.Template.Annotations).To(HaveKey(v1alpha1.ConfigSnapshotsAnnotation), "the first revision names its snapshots")
		Eventually(seenBy(ns, "web"), 2*time.Minute, 250*time.Millisecond).Should(Equal([]string{"info/info"}))

		By("the ConfigMap changes: the Deployment rolls, its new pod sees the new bytes")
		cm.Data["level"] = "debug"
		Expect(env.Client.Update(ctx, cm)).To(Succeed())
		Eventually(seenBy(ns, "web"), 2*time.Minute, 250*time.Millisecond).Should(Equal([]string{"debug/debug"}))

		By("kubectl rollout undo: the restored revision's pod sees the old bytes")
		res := env.Kubectl("", "rollout", "undo", "deployment/web", "-n", ns)
		Expect(res.ExitCode).To(Equal(0), res.Stderr)
		Expect(res.Stderr).To(ContainSubstring("[config-revision]"))
		Eventually(seenBy(ns, "web"), 2*time.Minute, 250*time.Millisecond).Should(Equal([]string{"info/info"}))
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		Expect(cm.Data["level"]).To(Equal("debug"), "the ConfigMap itself still holds the new bytes")
	})
})

// reader is a container of the app image that reads ConfigMap cm's key
// level through env and as a file of the mounted directory.
func reader(cm string) corev1.PodSpec {
	spec := hotReader(cm)
	c := &spec.Containers[0]
	c.Args = []string{"/config/dir/level"}
	c.VolumeMounts = c.VolumeMounts[:1]
	return spec
}

// seenBy is what the running, not terminating pods of app see, as
// "env/file" values of level; the pods still starting are left out.
func seenBy(ns, app string) func() []string {
	return func() []string {
		var pods corev1.PodList
		Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		var out []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil {
				out = append(out, "terminating")
				continue
			}
			if p.Status.Phase != corev1.PodRunning {
				out = append(out, string(p.Status.Phase))
				continue
			}
			var envValue, fileValue string
			for _, line := range output(p)() {
				fmt.Sscanf(line, "env CONFIG_LEVEL %q", &envValue)
				fmt.Sscanf(line, "file /config/dir/level %q", &fileValue)
			}
			out = append(out, envValue+"/"+fileValue)
		}
		return out
	}
}
