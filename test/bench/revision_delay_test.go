package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// BenchmarkRevisionDelay measures how long a rollout waits for its config
// snapshot: the time from a ConfigMap change to the rollout controller's
// re-stamp of a Deployment that consumes it, in a namespace with revisions
// (the snapshot is written first) and in one without, against kube-apiserver
// and etcd with the controller running (batch window 10 ms, unpaced). It
// reports the median of each and their difference. A load run: use
// -benchtime=1x.
func BenchmarkRevisionDelay(b *testing.B) {
	env, err := framework.Start(framework.Options{WithoutWebhook: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	}()
	if _, err := env.StartController(manager.Controller{RolloutBatchWindow: 10 * time.Millisecond}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c := env.Client
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "revisions"}, Spec: v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"revisions": "on"}},
		Revisions:         v1alpha1.RevisionSettings{Enabled: true}}}
	if err := c.Create(ctx, policy); err != nil {
		b.Fatal(err)
	}
	median := map[bool]time.Duration{}
	for _, revisions := range []bool{false, true} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "delay-", Labels: map[string]string{"revisions": fmt.Sprint(map[bool]string{true: "on", false: "off"}[revisions])}}}
		if err := c.Create(ctx, ns); err != nil {
			b.Fatal(err)
		}
		// Ten keys of 1 KiB, the shape of a typical application config.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "cfg"}, Data: map[string]string{"v": "0"}}
		for k := range 10 {
			cm.Data[fmt.Sprintf("key-%d.yaml", k)] = strings.Repeat("x", 1024)
		}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{v1alpha1.ConfigHashAnnotation: "hmac-sha256:unset"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", EnvFrom: []corev1.EnvFromSource{{
					ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}}}}}
		for _, o := range []client.Object{cm, d} {
			if err := c.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		hash := func() string {
			var got appsv1.Deployment
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
				b.Fatal(err)
			}
			return got.Spec.Template.Annotations[v1alpha1.ConfigHashAnnotation]
		}
		waitChange := func(from string) time.Duration {
			start := time.Now()
			for hash() == from {
				if time.Since(start) > 30*time.Second {
					b.Fatal("the Deployment was never re-stamped")
				}
				time.Sleep(2 * time.Millisecond)
			}
			return time.Since(start)
		}
		waitChange("hmac-sha256:unset") // the first stamp, from its own create
		var took []time.Duration
		for i := 1; i <= 20; i++ {
			before := hash()
			cm.Data["v"] = fmt.Sprint(i)
			if err := c.Update(ctx, cm); err != nil {
				b.Fatal(err)
			}
			took = append(took, waitChange(before))
		}
		slices.Sort(took)
		median[revisions] = took[len(took)/2]
		if revisions {
			reportSnapshotCost(b, ctx, c, cm, len(took))
		}
		b.Logf("revisions=%v: median %v from the change to the re-stamp (min %v, max %v)", revisions, median[revisions], took[0], took[len(took)-1])
	}
	b.ReportMetric(float64(median[false].Microseconds())/1000, "without-revisions-ms")
	b.ReportMetric(float64(median[true].Microseconds())/1000, "with-revisions-ms")
	b.ReportMetric(float64((median[true]-median[false]).Microseconds())/1000, "snapshot-wait-ms")
}

// reportSnapshotCost reports what the changes to original left in the API
// server: snapshots per revision and their stored (protobuf) size beside the
// original's. Every change is a new content, so each names one new snapshot.
func reportSnapshotCost(b *testing.B, ctx context.Context, c client.Client, original *corev1.ConfigMap, changes int) {
	var snaps corev1.ConfigMapList
	if err := c.List(ctx, &snaps, client.InNamespace(original.Namespace), client.MatchingLabels{v1alpha1.SnapshotLabel: v1alpha1.SnapshotLabelValue}); err != nil {
		b.Fatal(err)
	}
	if len(snaps.Items) == 0 {
		b.Fatal("no snapshots were written")
	}
	var stored int
	for i := range snaps.Items {
		stored += snaps.Items[i].Size()
	}
	var live corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(original), &live); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d snapshots after %d changes (and the first stamp); %d bytes each on average, the original %d", len(snaps.Items), changes, stored/len(snaps.Items), live.Size())
	b.ReportMetric(float64(len(snaps.Items))/float64(changes+1), "snapshots/revision")
	b.ReportMetric(float64(stored)/float64(len(snaps.Items)), "snapshot-bytes")
	b.ReportMetric(float64(live.Size()), "original-bytes")
}
