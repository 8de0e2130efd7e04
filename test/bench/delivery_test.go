package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/test/framework"
)

// BenchmarkDelivery delivers one content change of a ConfigMap that 1,000
// Deployments consume in three waves (canary of one, 30 %, the rest) with
// no soak, on a whole cluster (kube-controller-manager rolls them). The
// Deployments have no replicas, so a rollout is complete as soon as the
// deployment controller has seen the new template: what remains of each
// wave's time is configward's own (writing the wave's start, re-stamping at
// --rollout-rate, judging the gate). It reports each wave's time and the
// API writes configward made besides the workload patches (from the audit
// log). A load run: use -benchtime=1x.
func BenchmarkDelivery(b *testing.B) {
	for range b.N {
		deliveryRun(b, 1000)
	}
}

func deliveryRun(b *testing.B, workloads int) {
	b.StopTimer()
	// configward's controller writes snapshots and ConfigDeliveries; the
	// webhook lets only configward's own identity do that, as the chart
	// names it.
	env, err := framework.Start(framework.Options{Webhook: func(o *manager.Webhook) {
		o.ChangeControl.ConfigwardServiceAccounts = []string{framework.ControllerServiceAccount}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	}()
	if err := env.StartControllerManager(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := env.InstallWebhookConfigurations(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := env.StartController(manager.Controller{RolloutBatchWindow: 2 * time.Second, RolloutRate: manager.DefaultRolloutRate}); err != nil {
		b.Fatal(err)
	}
	c := env.Client
	const ns = "delivery"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"delivery": "on"}}}); err != nil {
		b.Fatal(err)
	}
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "delivery"}, Spec: v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"delivery": "on"}},
		Revisions:         v1alpha1.RevisionSettings{Enabled: true},
		Delivery: &v1alpha1.DeliverySettings{ProgressDeadlineSeconds: 600, SoakSeconds: ptr.To[int32](0), Waves: []v1alpha1.Wave{
			{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.WaveLabel: "canary"}}},
			{Name: "early", Percent: ptr.To[int32](30)},
			{Name: "rest"},
		}}}}
	if err := c.Create(ctx, policy); err != nil {
		b.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}, Data: map[string]string{"level": "info"}}
	if err := c.Create(ctx, cm); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the webhook's cache has the ConfigMap and the policy
	var g errgroup.Group
	g.SetLimit(20)
	for i := range workloads {
		g.Go(func() error {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%04d", i)}, Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint(i)}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": fmt.Sprint(i)}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", EnvFrom: []corev1.EnvFromSource{{
						ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}}}}}}}
			if i == 0 {
				d.Labels = map[string]string{v1alpha1.WaveLabel: "canary"}
			}
			return c.Create(ctx, d)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(5 * time.Second) // stamped and rolled out on the old content
	cm.Data["level"] = "debug"
	start := time.Now()
	b.StartTimer()
	if err := c.Update(ctx, cm); err != nil {
		b.Fatal(err)
	}
	var rec v1alpha1.ConfigDelivery
	for {
		var list v1alpha1.ConfigDeliveryList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) == 1 && list.Items[0].Status.State == v1alpha1.DeliverySucceeded {
			rec = list.Items[0]
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("not delivered after 10 minutes: %+v", list.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	total := time.Since(start)
	b.StopTimer()
	b.ReportMetric(total.Seconds(), "s/delivery")
	for _, w := range rec.Status.Waves {
		b.ReportMetric(w.CompletedAt.Sub(w.StartedAt.Time).Seconds(), "s/wave-"+w.Name)
		b.Logf("wave %s: %d workloads, started %s, healthy %s, completed %s", w.Name, len(w.Workloads),
			w.StartedAt.Format(time.TimeOnly), w.HealthySince.Format(time.TimeOnly), w.CompletedAt.Format(time.TimeOnly))
	}
	time.Sleep(3 * time.Second) // the audit log is written
	events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return ev.User.Username == framework.ControllerUser && ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" && !ev.DryRun() &&
			(ev.ObjectRef.Namespace == ns || ev.ObjectRef.Resource == "configdeliveries")
	})
	if err != nil {
		b.Fatal(err)
	}
	writes := map[string]int{}
	var first, last = map[string]time.Time{}, map[string]time.Time{}
	for _, ev := range events {
		k := ev.ObjectRef.Resource + "/" + ev.ObjectRef.Subresource + " " + ev.Verb
		writes[k]++
		at := ev.StageTimestamp.Time
		if f, ok := first[k]; !ok || at.Before(f) {
			first[k] = at
		}
		if at.After(last[k]) {
			last[k] = at
		}
		if ev.ObjectRef.Name == "app-0000" && ev.ObjectRef.Resource == "deployments" {
			b.Logf("the canary re-stamped at %s", at.Format("15:04:05.000"))
		}
	}
	for k := range writes {
		b.Logf("%s: %d, from %s to %s", k, writes[k], first[k].Format("15:04:05.000"), last[k].Format("15:04:05.000"))
	}
	b.Logf("configward's writes in the namespace: %v", writes)
	other := 0
	for k, n := range writes {
		if k != "deployments/ patch" {
			other += n
		}
	}
	b.ReportMetric(float64(writes["deployments/ patch"]), "workload-patches")
	b.ReportMetric(float64(other), "other-writes")
}
