package scale

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/workload"
	"github.com/configward/configward/test/framework"
)

// A content change consumed by a few workloads, made again and again at
// each size: how long until configward's controller has rolled every
// consumer (its template stamped with the new content's hash), which is
// what a cluster's size could slow (the controller finds consumers through
// its caches' indexes, the webhook stamps from its inventory).
const (
	latencyWorkloads = 10
	latencyChanges   = 50
	latencyConfig    = "shared"
)

// Latency is one size's stamping latency, over latencyChanges changes (the p99 of 50 is the slowest).
type Latency struct {
	Factor  int       `json:"factor"`
	Seconds []float64 `json:"seconds"`
	P50     float64   `json:"p50"`
	P99     float64   `json:"p99"`
}

func latencyNamespace(factor int) string { return fmt.Sprintf("latency-%d", factor) }

// seedLatency creates the namespace of one size's latency run: the shared
// ConfigMap, the workloads that consume it, and a ConfigPolicy that lets
// latencyChanges changes roll (the default holds an object changed more
// than 3 times in 10 minutes as flapping).
func seedLatency(ctx context.Context, c client.Client, factor int) error {
	ns := latencyNamespace(factor)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	policy := &v1alpha1.ConfigPolicy{ObjectMeta: metav1.ObjectMeta{Name: "scale-" + ns}, Spec: v1alpha1.ConfigPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		Rollouts: v1alpha1.RolloutSettings{Flapping: &v1alpha1.FlappingSettings{Changes: 100,
			Window: metav1.Duration{Duration: 10 * time.Minute}}},
	}}
	if err := c.Create(ctx, policy); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: latencyConfig, Namespace: ns},
		Data: map[string]string{"app.yaml": "change: 0\n"}}); err != nil {
		return err
	}
	for i := range latencyWorkloads {
		name := fmt.Sprintf("consumer-%d", i)
		labels := map[string]string{"app": name}
		t := podTemplate(name, labels)
		t.Spec.Volumes[0].ConfigMap.Name = latencyConfig
		t.Spec.Containers[0].EnvFrom = nil
		t.Spec.Containers[1].EnvFrom = nil
		t.Spec.Volumes = t.Spec.Volumes[:1]
		for j := range t.Spec.Containers {
			t.Spec.Containers[j].Env = t.Spec.Containers[j].Env[:1]
			t.Spec.Containers[j].VolumeMounts = t.Spec.Containers[j].VolumeMounts[:1]
		}
		if err := c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: t}}); err != nil {
			return err
		}
	}
	return nil
}

// stampLatency changes the shared ConfigMap of one size's namespace once to
// warm up, then latencyChanges times, each time timing from the write to the
// moment every consumer's template carries a new hash (read every 10 ms).
func stampLatency(ctx context.Context, env *framework.Env, c client.Client, factor int) (Latency, error) {
	configs, err := env.InstallWebhookConfigurations(ctx)
	if err != nil {
		return Latency{}, err
	}
	defer func() {
		for _, o := range configs {
			_ = env.Client.Delete(context.Background(), o)
		}
	}()
	ns := latencyNamespace(factor)
	if err := stampFirst(ctx, c, ns); err != nil {
		return Latency{}, err
	}
	out := Latency{Factor: factor}
	for i := 0; i <= latencyChanges; i++ {
		before, err := hashes(ctx, c, ns)
		if err != nil {
			return out, err
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: latencyConfig}, &cm); err != nil {
			return out, err
		}
		cm.Data["app.yaml"] = fmt.Sprintf("change: %d\n", i+1)
		start := time.Now()
		if err := c.Update(ctx, &cm); err != nil {
			return out, err
		}
		for {
			now, err := hashes(ctx, c, ns)
			if err == nil && allChanged(before, now) {
				break
			}
			if time.Since(start) > time.Minute {
				return out, fmt.Errorf("change %d of %s: not every consumer stamped after a minute (hashes before %v, now %v, error %v)", i, ns, before, now, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if i > 0 { // the first warms up
			out.Seconds = append(out.Seconds, time.Since(start).Seconds())
		}
		// The controller paces rollouts (--rollout-rate, 10 a second with
		// a burst of 10): waiting a second and more between changes lets
		// its bucket refill, so each change measures configward's work,
		// not the pacing of the one before.
		time.Sleep(1200 * time.Millisecond)
	}
	sorted := slices.Sorted(slices.Values(out.Seconds))
	out.P50, out.P99 = quantile(sorted, 0.5), quantile(sorted, 0.99)
	return out, nil
}

// stampFirst has the webhook stamp each consumer, created before it was
// installed, by writing an annotation on it, so that every change measured
// is the re-stamp of a stamped workload: one configward never stamped
// rolls only for a change it has logged (an install restarts nothing),
// which is another path.
func stampFirst(ctx context.Context, c client.Client, ns string) error {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		d := &list.Items[i]
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations["scale.configward.dev/touched"] = "true"
		if err := c.Update(ctx, d); err != nil {
			return err
		}
	}
	now, err := hashes(ctx, c, ns)
	if err == nil && !allChanged(map[string]string{}, now) {
		err = fmt.Errorf("the webhook did not stamp every consumer of %s on update: %v", ns, now)
	}
	return err
}

// quantile is the nearest-rank quantile of sorted values: with 50 changes
// the p99 is the slowest.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func hashes(ctx context.Context, c client.Client, ns string) (map[string]string, error) {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range list.Items {
		w, ok := workload.Builtin().For(&list.Items[i])
		if !ok {
			return nil, fmt.Errorf("%s is no workload configward knows", list.Items[i].Name)
		}
		out[list.Items[i].Name], _ = w.ConfigHash()
	}
	return out, nil
}

func allChanged(before, now map[string]string) bool {
	if len(now) != latencyWorkloads {
		return false
	}
	for name, h := range now {
		if h == "" || h == before[name] {
			return false
		}
	}
	return true
}
