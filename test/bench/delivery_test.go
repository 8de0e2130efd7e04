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
		deliveryRun(b, 1000, true)
	}
}

// BenchmarkFleetChange is one content change consumed by 5,000 workloads,
// once without delivery (the controller re-stamps every consumer at
// --rollout-rate) and once in the same three waves: it should take about
// 5,000 / --rollout-rate seconds either way, and it reports every write the
// API server took meanwhile, configward's and everyone else's. Not in `make
// test` or `make bench`: `make bench-fleet` runs it (about 25 minutes).
func BenchmarkFleetChange(b *testing.B) {
	for _, waves := range []bool{false, true} {
		name := "without-delivery"
		if waves {
			name = "three-waves"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				deliveryRun(b, 5000, waves)
			}
		})
	}
}

func deliveryRun(b *testing.B, workloads int, waves bool) {
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
	// Both runs keep revisions, so what waves cost is all that differs.
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "delivery"}, Spec: v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"delivery": "on"}},
		Revisions:         v1alpha1.RevisionSettings{Enabled: true},
	}}
	if waves {
		// A wave has its progress deadline to finish; the last of 5,000
		// re-stamps 3,500 at 10 a second.
		policy.Spec.Delivery = &v1alpha1.DeliverySettings{ProgressDeadlineSeconds: 1200, SoakSeconds: ptr.To[int32](0), Waves: []v1alpha1.Wave{
			{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.WaveLabel: "canary"}}},
			{Name: "early", Percent: ptr.To[int32](30)},
			{Name: "rest"},
		}}
	}
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
			labels := map[string]string{"app": fmt.Sprint(i), "storm": "true"}
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%04d", i), Labels: map[string]string{"storm": "true"}},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](0),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", EnvFrom: []corev1.EnvFromSource{{
							ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}}}}}}}
			if i == 0 {
				d.Labels[v1alpha1.WaveLabel] = "canary"
			}
			return c.Create(ctx, d)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	// Counted from informers, so watching adds no polling of thousands of
	// Deployments to the API server's load.
	w := newStormWatch(b, env, ns)
	var first string
	w.waitFor(b, "every Deployment stamped and seen by the deployment controller", 10*time.Minute, func(s stormState) bool {
		for h, n := range s.deploymentsObserved {
			if h != "" && n == workloads {
				first = h
				return true
			}
		}
		return false
	})
	time.Sleep(5 * time.Second) // configward's first look at the workloads is written
	cm.Data["level"] = "debug"
	start := time.Now()
	b.StartTimer()
	if err := c.Update(ctx, cm); err != nil {
		b.Fatal(err)
	}
	var second string
	w.waitFor(b, "every Deployment re-stamped and seen by the deployment controller", 30*time.Minute, func(s stormState) bool {
		second = s.onlyDeploymentHashOtherThan(first)
		return second != "" && s.deploymentsObserved[second] == workloads
	})
	rolled := time.Since(start)
	var rec v1alpha1.ConfigDelivery
	for waves {
		var list v1alpha1.ConfigDeliveryList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) == 1 && list.Items[0].Status.State == v1alpha1.DeliverySucceeded {
			rec = list.Items[0]
			break
		}
		if time.Since(start) > 30*time.Minute {
			b.Fatalf("not delivered after 30 minutes: %+v", list.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	total := time.Since(start)
	b.StopTimer()
	b.ReportMetric(rolled.Seconds(), "s/all-rolled")
	b.Logf("%d workloads: every one re-stamped and seen by the deployment controller %s after the change (%g s at --rollout-rate %d)",
		workloads, rolled.Round(100*time.Millisecond), float64(workloads)/manager.DefaultRolloutRate, manager.DefaultRolloutRate)
	if waves {
		b.ReportMetric(total.Seconds(), "s/delivery")
		b.Logf("delivered (every wave healthy) %s after the change", total.Round(100*time.Millisecond))
	}
	for _, w := range rec.Status.Waves {
		b.ReportMetric(w.CompletedAt.Sub(w.StartedAt.Time).Seconds(), "s/wave-"+w.Name)
		b.Logf("wave %s: %d workloads, started %s, healthy %s, completed %s", w.Name, len(w.Workloads),
			w.StartedAt.Format(time.TimeOnly), w.HealthySince.Format(time.TimeOnly), w.CompletedAt.Format(time.TimeOnly))
	}
	time.Sleep(3 * time.Second) // the audit log is written
	reportDeliveryWrites(b, env, ns, start)
}

// reportDeliveryWrites counts, from the API server's audit log, the writes
// configward's controller made for the change (in the namespace, and its
// ConfigDeliveries) and every write anyone made from the change on.
func reportDeliveryWrites(b *testing.B, env *framework.Env, ns string, since time.Time) {
	isWrite := func(ev framework.AuditEvent) bool {
		return ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" && !ev.DryRun()
	}
	events, err := env.AuditEvents(func(ev framework.AuditEvent) bool {
		return isWrite(ev) && !ev.StageTimestamp.Time.Before(since)
	})
	if err != nil {
		b.Fatal(err)
	}
	writes, all := map[string]int{}, map[string]int{}
	var first, last = map[string]time.Time{}, map[string]time.Time{}
	for _, ev := range events {
		k := ev.ObjectRef.Resource + "/" + ev.ObjectRef.Subresource + " " + ev.Verb
		all[ev.User.Username]++
		if ev.User.Username != framework.ControllerUser || (ev.ObjectRef.Namespace != ns && ev.ObjectRef.Resource != "configdeliveries") {
			continue
		}
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
	b.Logf("every write the API server took from the change on, by user: %v (%d)", all, len(events))
	other := 0
	for k, n := range writes {
		if k != "deployments/ patch" {
			other += n
		}
	}
	b.ReportMetric(float64(writes["deployments/ patch"]), "workload-patches")
	b.ReportMetric(float64(other), "other-writes")
	b.ReportMetric(float64(len(events)), "api-writes")
}
