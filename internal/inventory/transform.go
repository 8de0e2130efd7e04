// Package inventory is configward's memory of the cluster's ConfigMaps and
// Secrets: which exist, their per-key content digests, reload mode and
// immutability, and which workloads consume each. It is backed by the
// manager's informer cache, so answering never costs an API call.
//
// Values never enter it. A cache transform replaces every value with its
// digest before the object is stored, so memory grows with the number of
// objects, not their size, and no Secret value lives in the process.
package inventory

import (
	"strings"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/workload"
)

// lastApplied is kubectl's client-side apply annotation. On a Secret it
// holds the values in clear text, so it is dropped with the values.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// TransformConfigMap keeps metadata and replaces data and binaryData with
// per-key digests (KeyDigestsOf), packed into one data entry.
func TransformConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || isPacked(len(cm.Data), hasKey(cm.Data, packedKey)) {
		return obj, nil
	}
	meta := slimMeta(cm.ObjectMeta)
	meta.ManagedFields = lastWriter(cm.ManagedFields)
	internMeta(&meta)
	out := &corev1.ConfigMap{
		TypeMeta:   cm.TypeMeta,
		ObjectMeta: meta,
		Immutable:  cm.Immutable,
		Data:       map[string]string{packedKey: pack(KeyDigestsOf(cm))},
	}
	return out, nil
}

// TransformSecret keeps of a Secret only what configward reads: its
// identity, type, immutability, configward's own annotations and labels, and
// a digest of every value. Every other annotation and label goes: tools
// copy whole objects into annotations (kubectl's last-applied
// configuration holds the values in clear text), and what is not kept
// cannot leak from a heap dump.
func TransformSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok || isPacked(len(s.Data), hasKey(s.Data, packedKey)) {
		return obj, nil
	}
	data := map[string][]byte{packedKey: []byte(pack(KeyDigestsOf(s)))}
	meta := slimMeta(s.ObjectMeta)
	meta.Annotations, meta.Labels = onlyConfigward(s.Annotations), onlyConfigward(s.Labels)
	if name, ok := s.Annotations[cmapi.CertificateNameKey]; ok {
		// The Certificate that issues the Secret: a name, shown beside a
		// pod that serves a stale certificate.
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		meta.Annotations[cmapi.CertificateNameKey] = name
	}
	meta.ManagedFields = lastWriter(s.ManagedFields)
	internMeta(&meta)
	out := &corev1.Secret{
		TypeMeta:   s.TypeMeta,
		ObjectMeta: meta,
		Immutable:  s.Immutable,
		Type:       s.Type,
		Data:       data,
	}
	return out, nil
}

// TransformPod keeps of a Pod only what tells who consumes which ConfigMap
// or Secret (the webhook caches every Pod for config-in-use-delete): its
// metadata, the containers' names, env, envFrom and volume mounts, the
// volumes, and the phase. Images, probes, resources and the rest of the
// status are most of a Pod and are never read from the cache.
func TransformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: slimMeta(p.ObjectMeta),
		Spec: corev1.PodSpec{
			Volumes:             p.Spec.Volumes,
			InitContainers:      slimContainers(p.Spec.InitContainers),
			Containers:          slimContainers(p.Spec.Containers),
			EphemeralContainers: slimEphemeral(p.Spec.EphemeralContainers),
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase, Conditions: readyCondition(p.Status.Conditions),
			InitContainerStatuses: restarts(p.Status.InitContainerStatuses), ContainerStatuses: restarts(p.Status.ContainerStatuses)},
	}
	internMeta(&out.ObjectMeta)
	internAll(&out.Spec)
	internAll(&out.Status)
	return out, nil
}

// readyCondition keeps a pod's Ready condition, and restarts each
// container's restart count: a delivery's health gate reads them. It keeps
// configward's reload conditions too, which say what the pod's program
// applied and which certificate it serves (configward writes them from its
// reload agent's reports).
func readyCondition(cs []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range cs {
		switch c.Type {
		case corev1.PodReady:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status})
		case v1alpha1.ReloadConditionType, v1alpha1.ServingCertConditionType:
			out = append(out, c)
		}
	}
	return out
}

func restarts(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i, c := range cs {
		out[i] = corev1.ContainerStatus{Name: c.Name, RestartCount: c.RestartCount, Ready: c.Ready}
		// When it last stopped: a wave of hot config fails on a restart
		// after it wrote its channels, not on one from before.
		if t := c.LastTerminationState.Terminated; t != nil {
			out[i].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: t.FinishedAt}
		}
	}
	return out
}

func slimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Env: withoutValues(c.Env), EnvFrom: c.EnvFrom, VolumeMounts: c.VolumeMounts}
	}
	return out
}

func slimEphemeral(cs []corev1.EphemeralContainer) []corev1.EphemeralContainer {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.EphemeralContainer, len(cs))
	for i, c := range cs {
		out[i] = corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: c.Name, Env: withoutValues(c.Env), EnvFrom: c.EnvFrom, VolumeMounts: c.VolumeMounts}}
	}
	return out
}

// withoutValues keeps each env var's name and where it comes from, and
// drops inline values: people put passwords there, and configward only
// reads references.
func withoutValues(env []corev1.EnvVar) []corev1.EnvVar {
	if len(env) == 0 {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		out[i] = corev1.EnvVar{Name: e.Name, ValueFrom: e.ValueFrom}
	}
	return out
}

// TransformWorkload drops managed fields, the largest part of most objects
// and never read by configward, kubectl's last-applied configuration, and
// the inline env values of its pod template (see withoutValues).
//
// A declared custom kind arrives as *unstructured.Unstructured, whose
// accessors return copies and whose template path this transform does not
// know (the cache's default transform is one function for every kind):
// every env list anywhere in it loses its inline values instead.
func TransformWorkload(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		transformUnstructured(u)
		return u, nil
	}
	if o, ok := obj.(client.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			delete(a, lastApplied)
		}
		// The cache's transforms know only the built-in kinds; a declared
		// kind is unstructured and handled above.
		if m, ok := o.(metav1.ObjectMetaAccessor); ok {
			if meta, ok := m.GetObjectMeta().(*metav1.ObjectMeta); ok {
				internMeta(meta)
			}
		}
		if w, ok := workload.Builtin().For(o); ok {
			spec, _ := w.PodSpec()
			for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
				for i := range cs {
					cs[i].Env = withoutValues(cs[i].Env)
				}
			}
			for i := range spec.EphemeralContainers {
				spec.EphemeralContainers[i].Env = withoutValues(spec.EphemeralContainers[i].Env)
			}
			internAll(spec)
		}
	}
	return obj, nil
}

func transformUnstructured(u *unstructured.Unstructured) {
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(u.Object, "metadata", "annotations", lastApplied)
	dropEnvValues(u.Object)
}

// dropEnvValues deletes "value" from every entry of every list named env
// under v: the containers' env of a pod template, wherever the kind keeps
// it. valueFrom stays, since it is what configward reads.
func dropEnvValues(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if list, ok := child.([]any); ok && k == "env" {
				for _, e := range list {
					if m, ok := e.(map[string]any); ok {
						delete(m, "value")
					}
				}
				continue
			}
			dropEnvValues(child)
		}
	case []any:
		for _, child := range t {
			dropEnvValues(child)
		}
	}
}

// onlyConfigward keeps the configward.dev/ entries of a label or
// annotation map.
func onlyConfigward(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, "configward.dev/") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// lastWriter keeps, of an object's managed fields, the entry written last
// (without its field set, most of the entry): the flapping count names
// it as the writer of a change.
func lastWriter(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var last *metav1.ManagedFieldsEntry
	for i := range entries {
		e := &entries[i]
		if e.Subresource != "" || e.Time == nil {
			continue
		}
		if last == nil || !e.Time.Before(last.Time) {
			last = e
		}
	}
	if last == nil {
		return nil
	}
	return []metav1.ManagedFieldsEntry{{Manager: last.Manager, Operation: last.Operation, Time: last.Time}}
}

// Writer is the field manager that last wrote a cached ConfigMap or
// Secret ("" when the API server recorded none).
func Writer(obj client.Object) string {
	if mf := obj.GetManagedFields(); len(mf) > 0 {
		return mf[0].Manager
	}
	return ""
}

func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            m.Labels,
		OwnerReferences:   m.OwnerReferences,
	}
	if len(m.Annotations) > 0 {
		out.Annotations = make(map[string]string, len(m.Annotations))
		for k, v := range m.Annotations {
			if k != lastApplied {
				out.Annotations[k] = v
			}
		}
	}
	return out
}

// isPacked tells a transformed object from one straight from the API server:
// only the transform writes the empty key, which the API server refuses. The
// informer may hand an already transformed object to the transform again,
// and digesting digests would corrupt them.
func isPacked(entries int, hasPackedKey bool) bool { return entries == 1 && hasPackedKey }

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
