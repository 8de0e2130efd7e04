package refs

import (
	corev1 "k8s.io/api/core/v1"
)

// The readers of the entries, one per entry, each of its List's items.

func volumeConfigMap(item any) (use, bool) {
	s := item.(*corev1.Volume).ConfigMap
	if s == nil {
		return use{}, false
	}
	return use{name: s.Name, optional: s.Optional, items: s.Items, mode: modeOr(s.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode)}, true
}

func volumeSecret(item any) (use, bool) {
	s := item.(*corev1.Volume).Secret
	if s == nil {
		return use{}, false
	}
	return use{name: s.SecretName, optional: s.Optional, items: s.Items, mode: modeOr(s.DefaultMode, corev1.SecretVolumeSourceDefaultMode)}, true
}

// projectedConfigMap and projectedSecret leave the mode to the volume,
// whose defaultMode the projection's files take.
func projectedConfigMap(item any) (use, bool) {
	s := item.(*corev1.VolumeProjection).ConfigMap
	if s == nil {
		return use{}, false
	}
	return use{name: s.Name, optional: s.Optional, items: s.Items}, true
}

func projectedSecret(item any) (use, bool) {
	s := item.(*corev1.VolumeProjection).Secret
	if s == nil {
		return use{}, false
	}
	return use{name: s.Name, optional: s.Optional, items: s.Items}, true
}

func csiClass(item any) (use, bool) {
	s := item.(*corev1.Volume).CSI
	if s == nil {
		return use{}, false
	}
	return use{name: s.VolumeAttributes[CSIClassAttribute], driver: s.Driver}, true
}

func envFromConfigMap(item any) (use, bool) {
	s := item.(*corev1.EnvFromSource).ConfigMapRef
	if s == nil {
		return use{}, false
	}
	return use{name: s.Name, optional: s.Optional}, true
}

func envFromSecret(item any) (use, bool) {
	s := item.(*corev1.EnvFromSource).SecretRef
	if s == nil {
		return use{}, false
	}
	return use{name: s.Name, optional: s.Optional}, true
}

func envConfigMapKey(item any) (use, bool) {
	from := item.(*corev1.EnvVar).ValueFrom
	if from == nil || from.ConfigMapKeyRef == nil {
		return use{}, false
	}
	s := from.ConfigMapKeyRef
	return use{name: s.Name, optional: s.Optional, key: s.Key}, true
}

func envSecretKey(item any) (use, bool) {
	from := item.(*corev1.EnvVar).ValueFrom
	if from == nil || from.SecretKeyRef == nil {
		return use{}, false
	}
	s := from.SecretKeyRef
	return use{name: s.Name, optional: s.Optional, key: s.Key}, true
}
