package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

// The delivery specs run without kube-controller-manager and without
// kubelets (kwok): what those would write, cluster writes, as plainly as
// the specs need it and no further. A Deployment here is rolled with a
// surge of all its replicas: its new pods first, its old ones deleted once
// every new one is ready, as a Deployment of one replica is by default.

// health is how the application runs in one pod.
type health struct {
	// unready: its readiness probe fails.
	unready bool
	// restarts: its container crashed once and was restarted.
	restarts bool
}

// app says how the application runs on the content it reads (the value of
// the one key of its config); a spec may change its mind while it runs.
type app func(content string) health

// runs is an application that runs on any content.
func runs(string) health { return health{} }

// failsOn is an application that does not come up on content bad: its
// pods stay unready, and, with crashes, their container restarts.
func failsOn(bad string, crashes bool) app {
	return func(content string) health {
		if content != bad {
			return health{}
		}
		return health{unready: true, restarts: crashes}
	}
}

// clusterOptions say what cluster plays in a namespace.
type clusterOptions struct {
	// app runs in every pod.
	app app
	// deployments: the Deployment and ReplicaSet controllers roll
	// Deployments; without, the spec makes their pods (hot config's, which
	// the Pod path points at their channels), and their Deployments only
	// count them.
	deployments bool
}

// cluster plays, until the spec ends, what kube-controller-manager and the
// kubelet would write in namespace ns:
//   - with o.deployments, a Deployment whose template is not the one its
//     newest ReplicaSet has (and that is not paused) gets a ReplicaSet of
//     that template and its replicas as pods, which copy the template's
//     labels, annotations and spec; once every one of them is available
//     (ready for the Deployment's minReadySeconds), the pods of its other
//     ReplicaSets are deleted.
//   - each Deployment's status counts its pods as the Deployment
//     controller does, at its generation.
//   - every pod of ns runs: Running, and ready unless o.app says otherwise
//     of the content the pod reads (a restart, once counted, stays).
func cluster(ns string, o clusterOptions) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for ctx.Err() == nil {
			// Errors (a conflict with a controller's write, an object gone
			// meanwhile) are met again at the next pass.
			var deployments appsv1.DeploymentList
			listed := env.Client.List(ctx, &deployments, client.InNamespace(ns)) == nil
			if listed && o.deployments {
				rollDeployments(ctx, ns, deployments.Items)
			}
			runPods(ctx, ns, o.app)
			if listed {
				countDeploymentPods(ctx, ns, deployments.Items)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	DeferCleanup(func() { cancel(); <-done })
}

// templateRS names the ReplicaSet of a Deployment's current template.
func templateRS(d *appsv1.Deployment) string {
	b, _ := json.Marshal(d.Spec.Template)
	sum := sha256.Sum256(b)
	return d.Name + "-" + hex.EncodeToString(sum[:])[:8]
}

// controlledBy is the controller reference to o, a Deployment or a
// ReplicaSet (kind).
func controlledBy(o client.Object, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: o.GetName(), UID: o.GetUID(), Controller: ptr.To(true)}
}

// rollDeployments rolls the Deployments of ns as the Deployment and
// ReplicaSet controllers would.
func rollDeployments(ctx context.Context, ns string, deployments []appsv1.Deployment) {
	for i := range deployments {
		d := &deployments[i]
		if d.Spec.Paused || d.DeletionTimestamp != nil {
			continue
		}
		rs := &appsv1.ReplicaSet{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: templateRS(d)}, rs)
		if client.IgnoreNotFound(err) != nil {
			continue
		}
		if err != nil {
			rs = &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: templateRS(d), Labels: d.Spec.Template.Labels,
					OwnerReferences: []metav1.OwnerReference{controlledBy(d, "Deployment")}},
				Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template},
			}
			if env.Client.Create(ctx, rs) != nil {
				continue
			}
		}
		pods := podsOf(ctx, ns, d.Name)
		var ours []*corev1.Pod
		for _, p := range pods {
			if metav1.IsControlledBy(p, rs) {
				ours = append(ours, p)
			}
		}
		want := int(ptr.Deref(d.Spec.Replicas, 1))
		for n := len(ours); n < want; n++ {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: rs.Name + "-", Labels: rs.Spec.Template.Labels,
					Annotations: rs.Spec.Template.Annotations, OwnerReferences: []metav1.OwnerReference{controlledBy(rs, "ReplicaSet")}},
				Spec: rs.Spec.Template.Spec,
			}
			_ = env.Client.Create(ctx, p)
		}
		if len(ours) < want || !allAvailable(ours, d.Spec.MinReadySeconds) {
			continue
		}
		for _, p := range pods {
			if !metav1.IsControlledBy(p, rs) {
				_ = env.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
			}
		}
	}
}

// countDeploymentPods writes each Deployment's status as the Deployment
// controller would from its pods.
func countDeploymentPods(ctx context.Context, ns string, deployments []appsv1.Deployment) {
	for i := range deployments {
		d := &deployments[i]
		s := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Conditions: d.Status.Conditions}
		if d.Spec.Paused {
			s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas =
				d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas
		} else {
			current := templateRS(d)
			for _, p := range podsOf(ctx, ns, d.Name) {
				s.Replicas++
				if metav1.GetControllerOf(p).Name == current {
					s.UpdatedReplicas++
				}
				if podReady(p) {
					s.ReadyReplicas++
				}
				if available(p, d.Spec.MinReadySeconds) {
					s.AvailableReplicas++
				}
			}
		}
		if apiequality.Semantic.DeepEqual(s, d.Status) {
			continue
		}
		d.Status = s
		_ = env.Client.Status().Update(ctx, d)
	}
}

// podsOf lists the live pods of ns labelled app=name that a ReplicaSet
// controls.
func podsOf(ctx context.Context, ns, name string) []*corev1.Pod {
	var list corev1.PodList
	if env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": name}) != nil {
		return nil
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil && metav1.GetControllerOf(p) != nil {
			out = append(out, p)
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// available: ready for minReadySeconds, as the Deployment controller
// counts a pod available.
func available(p *corev1.Pod, minReadySeconds int32) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && time.Since(c.LastTransitionTime.Time) >= time.Duration(minReadySeconds)*time.Second
		}
	}
	return false
}

func allAvailable(pods []*corev1.Pod, minReadySeconds int32) bool {
	for _, p := range pods {
		if !available(p, minReadySeconds) {
			return false
		}
	}
	return true
}

// runPods writes each pod's status as its kubelet would, running a.
func runPods(ctx context.Context, ns string, a app) {
	var list corev1.PodList
	config, ok := readConfig(ctx, ns)
	if !ok || env.Client.List(ctx, &list, client.InNamespace(ns)) != nil {
		return
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		content, ok := config.contentOf(p)
		if !ok {
			continue
		}
		h := a(content)
		s := p.Status.DeepCopy()
		s.Phase = corev1.PodRunning
		cond := corev1.ConditionTrue
		if h.unready {
			cond = corev1.ConditionFalse
		}
		for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
			setCondition(s, t, cond)
		}
		restarts := int32(0)
		if len(s.ContainerStatuses) > 0 {
			restarts = s.ContainerStatuses[0].RestartCount
		}
		c := corev1.ContainerStatus{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image, Ready: !h.unready, Started: ptr.To(true),
			RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		if len(s.ContainerStatuses) > 0 {
			c.LastTerminationState, c.State = s.ContainerStatuses[0].LastTerminationState, s.ContainerStatuses[0].State
		}
		if h.restarts && restarts == 0 {
			c.RestartCount = 1
			c.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.Now()}}
		}
		s.ContainerStatuses = []corev1.ContainerStatus{c}
		if apiequality.Semantic.DeepEqual(s, &p.Status) {
			continue
		}
		p.Status = *s
		_ = env.Client.Status().Update(ctx, p)
	}
}

func setCondition(s *corev1.PodStatus, t corev1.PodConditionType, status corev1.ConditionStatus) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			if s.Conditions[i].Status != status {
				s.Conditions[i].Status, s.Conditions[i].LastTransitionTime = status, metav1.Now()
			}
			return
		}
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.Now()})
}

// configOf is the ConfigMaps and Secrets of a namespace, as one pass of
// cluster reads them: listed once, for every pod of the pass.
type configOf struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

// readConfig lists the ConfigMaps and Secrets of ns; ok is false when it
// could not.
func readConfig(ctx context.Context, ns string) (c configOf, ok bool) {
	var cms corev1.ConfigMapList
	var secrets corev1.SecretList
	if env.Client.List(ctx, &cms, client.InNamespace(ns)) != nil || env.Client.List(ctx, &secrets, client.InNamespace(ns)) != nil {
		return c, false
	}
	c = configOf{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for i := range cms.Items {
		c.configMaps[cms.Items[i].Name] = &cms.Items[i]
	}
	for i := range secrets.Items {
		c.secrets[secrets.Items[i].Name] = &secrets.Items[i]
	}
	return c, true
}

// contentOf is what the application in pod reads: the value of the one key
// of the first ConfigMap or Secret it mounts, through the snapshot its
// revision names where it names one (the Pod path points a revision's pods
// at its snapshots), or else as mounted (a hot config's channel). ok is
// false while that object is not there.
func (c configOf) contentOf(p *corev1.Pod) (content string, ok bool) {
	snaps, _ := revision.Decode(p.Annotations[v1alpha1.ConfigSnapshotsAnnotation])
	read := func(kind refs.Kind, name string) (string, bool) {
		if s, named := snaps[revision.Source{Kind: kind, Name: name}]; named {
			name = s
		}
		if kind == refs.Secret {
			s, ok := c.secrets[name]
			if !ok {
				return "", false
			}
			return string(s.Data[configKey]), true
		}
		cm, ok := c.configMaps[name]
		if !ok {
			return "", false
		}
		return cm.Data[configKey], true
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			return read(refs.ConfigMap, v.ConfigMap.Name)
		case v.Secret != nil:
			return read(refs.Secret, v.Secret.SecretName)
		}
	}
	return "", true
}

// reads lists what the running pods of Deployment name read.
func reads(ns, name string) func() []string {
	return func() []string {
		config, ok := readConfig(ctx, ns)
		Expect(ok).To(BeTrue())
		var out []string
		for _, p := range podsOf(ctx, ns, name) {
			if c, ok := config.contentOf(p); ok && p.Status.Phase == corev1.PodRunning {
				out = append(out, c)
			}
		}
		return out
	}
}
