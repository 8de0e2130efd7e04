package refs

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func ptr[T any](v T) *T { return &v }

func cmRef(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }

func TestFromPodSpec(t *testing.T) {
	tests := []struct {
		name string
		spec *corev1.PodSpec
		want []Ref
	}{
		{
			name: "nil spec",
			spec: nil,
			want: nil,
		},
		{
			name: "nothing consumed",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				Containers: []corev1.Container{{
					Name:         "app",
					Env:          []corev1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
				}},
			},
			want: nil,
		},
		{
			name: "configMap volume, all keys, mounted",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{
					{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef("flags")}}},
				},
				Containers: []corev1.Container{{
					Name:         "api",
					VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "cfg", MountPath: "/etc/app", ReadOnly: true}},
				}},
			},
			want: []Ref{{
				Kind: ConfigMap, Name: "flags", Via: Volume, Path: "spec.volumes[1].configMap", NamePath: "spec.volumes[1].configMap.name",
				Container: "api", ContainerType: Regular, Volume: "cfg",
				MountFieldPath: "spec.containers[0].volumeMounts[1]", MountPath: "/etc/app", ReadOnly: true,
				MaxMode: 0o644,
			}},
		},
		{
			name: "configMap volume with items, optional, subPath",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: cmRef("flags"),
					Items:                []corev1.KeyToPath{{Key: "z.yaml", Path: "z"}, {Key: "a.yaml", Path: "a"}, {Key: "z.yaml", Path: "z2"}},
					Optional:             ptr(true),
					DefaultMode:          ptr(int32(0o400)),
				}}}},
				Containers: []corev1.Container{{
					Name:         "api",
					VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app/a.yaml", SubPath: "a"}},
				}},
			},
			want: []Ref{{
				Kind: ConfigMap, Name: "flags", Optional: true, Keys: []string{"a.yaml", "z.yaml"}, Via: Volume,
				Path: "spec.volumes[0].configMap", NamePath: "spec.volumes[0].configMap.name", Container: "api", ContainerType: Regular, Volume: "cfg",
				MountFieldPath: "spec.containers[0].volumeMounts[0]", MountPath: "/etc/app/a.yaml", SubPath: "a",
				MaxMode: 0o400, Files: map[string]string{"z": "z.yaml", "a": "a.yaml", "z2": "z.yaml"},
			}},
		},
		{
			name: "empty items list means all keys",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: cmRef("flags"), Items: []corev1.KeyToPath{},
				}}}},
			},
			want: []Ref{{Kind: ConfigMap, Name: "flags", Via: Volume, Path: "spec.volumes[0].configMap", NamePath: "spec.volumes[0].configMap.name", Volume: "cfg", MaxMode: 0o644}},
		},
		{
			name: "unmounted secret volume still consumed",
			spec: &corev1.PodSpec{
				Volumes:    []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Optional: ptr(false)}}}},
				Containers: []corev1.Container{{Name: "api"}},
			},
			want: []Ref{{Kind: Secret, Name: "tls", Via: Volume, Path: "spec.volumes[0].secret", NamePath: "spec.volumes[0].secret.secretName", Volume: "tls", MaxMode: 0o644}},
		},
		{
			name: "secret volume modes: OR of default and item modes",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{
					{Name: "a", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1", DefaultMode: ptr(int32(0o400))}}},
					{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: "s2", DefaultMode: ptr(int32(0o400)),
						Items: []corev1.KeyToPath{{Key: "k1", Path: "k1", Mode: ptr(int32(0o640))}, {Key: "k2", Path: "k2", Mode: ptr(int32(0o604))}},
					}}},
					{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: "s3", DefaultMode: ptr(int32(0o600)),
						Items: []corev1.KeyToPath{{Key: "k1", Path: "k1", Mode: ptr(int32(0o400))}, {Key: "k2", Path: "k2"}},
					}}},
					{Name: "d", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: "s4", DefaultMode: ptr(int32(0o644)),
						Items: []corev1.KeyToPath{{Key: "k1", Path: "k1", Mode: ptr(int32(0o400))}},
					}}},
				},
			},
			want: []Ref{
				{Kind: Secret, Name: "s1", Via: Volume, Path: "spec.volumes[0].secret", NamePath: "spec.volumes[0].secret.secretName", Volume: "a", MaxMode: 0o400},
				{Kind: Secret, Name: "s2", Keys: []string{"k1", "k2"}, Via: Volume, Path: "spec.volumes[1].secret", NamePath: "spec.volumes[1].secret.secretName", Volume: "b", MaxMode: 0o644, Files: map[string]string{"k1": "k1", "k2": "k2"}},
				{Kind: Secret, Name: "s3", Keys: []string{"k1", "k2"}, Via: Volume, Path: "spec.volumes[2].secret", NamePath: "spec.volumes[2].secret.secretName", Volume: "c", MaxMode: 0o600, Files: map[string]string{"k1": "k1", "k2": "k2"}},
				{Kind: Secret, Name: "s4", Keys: []string{"k1"}, Via: Volume, Path: "spec.volumes[3].secret", NamePath: "spec.volumes[3].secret.secretName", Volume: "d", MaxMode: 0o400, Files: map[string]string{"k1": "k1"}},
			},
		},
		{
			name: "projected sources with items; other sources ignored",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr(int32(0o440)),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef("app"), Items: []corev1.KeyToPath{{Key: "b", Path: "b"}, {Key: "a", Path: "a"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{}},
						{Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("creds"), Optional: ptr(true), Items: []corev1.KeyToPath{{Key: "pw", Path: "pw", Mode: ptr(int32(0o404))}}}},
						{Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("ca")}},
					},
				}}}},
				Containers: []corev1.Container{{
					Name:         "api",
					VolumeMounts: []corev1.VolumeMount{{Name: "all", MountPath: "/etc/all", SubPathExpr: "$(POD_NAME)"}},
				}},
			},
			want: []Ref{
				{
					Kind: ConfigMap, Name: "app", Keys: []string{"a", "b"}, Via: Projected, Path: "spec.volumes[0].projected.sources[1].configMap", NamePath: "spec.volumes[0].projected.sources[1].configMap.name",
					Container: "api", ContainerType: Regular, Volume: "all", MountFieldPath: "spec.containers[0].volumeMounts[0]",
					MountPath: "/etc/all", SubPathExpr: "$(POD_NAME)", MaxMode: 0o440, Files: map[string]string{"a": "a", "b": "b"},
				},
				{
					Kind: Secret, Name: "creds", Optional: true, Keys: []string{"pw"}, Via: Projected, Path: "spec.volumes[0].projected.sources[3].secret", NamePath: "spec.volumes[0].projected.sources[3].secret.name",
					Container: "api", ContainerType: Regular, Volume: "all", MountFieldPath: "spec.containers[0].volumeMounts[0]",
					MountPath: "/etc/all", SubPathExpr: "$(POD_NAME)", MaxMode: 0o404, Files: map[string]string{"pw": "pw"},
				},
				{
					Kind: Secret, Name: "ca", Via: Projected, Path: "spec.volumes[0].projected.sources[4].secret", NamePath: "spec.volumes[0].projected.sources[4].secret.name",
					Container: "api", ContainerType: Regular, Volume: "all", MountFieldPath: "spec.containers[0].volumeMounts[0]",
					MountPath: "/etc/all", SubPathExpr: "$(POD_NAME)", MaxMode: 0o440,
				},
			},
		},
		{
			name: "projected without defaultMode uses 0644",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("s")}}},
				}}}},
			},
			want: []Ref{{Kind: Secret, Name: "s", Via: Projected, Path: "spec.volumes[0].projected.sources[0].secret", NamePath: "spec.volumes[0].projected.sources[0].secret.name", Volume: "p", MaxMode: 0o644}},
		},
		{
			name: "one volume mounted by init, regular and ephemeral containers, twice in one",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef("c")}}}},
				InitContainers: []corev1.Container{{
					Name:         "setup",
					VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}},
				}},
				Containers: []corev1.Container{
					{Name: "other"},
					{Name: "api", VolumeMounts: []corev1.VolumeMount{
						{Name: "cfg", MountPath: "/etc/a.conf", SubPath: "a.conf"},
						{Name: "cfg", MountPath: "/etc/cfg"},
					}},
				},
				EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name:         "debug",
					VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/dbg", ReadOnly: true}},
				}}},
			},
			want: []Ref{
				{
					Kind: ConfigMap, Name: "c", Via: Volume, Path: "spec.volumes[0].configMap", NamePath: "spec.volumes[0].configMap.name", Volume: "cfg", MaxMode: 0o644,
					Container: "setup", ContainerType: Init, MountFieldPath: "spec.initContainers[0].volumeMounts[0]", MountPath: "/cfg",
				},
				{
					Kind: ConfigMap, Name: "c", Via: Volume, Path: "spec.volumes[0].configMap", NamePath: "spec.volumes[0].configMap.name", Volume: "cfg", MaxMode: 0o644,
					Container: "api", ContainerType: Regular, MountFieldPath: "spec.containers[1].volumeMounts[0]", MountPath: "/etc/a.conf", SubPath: "a.conf",
				},
				{
					Kind: ConfigMap, Name: "c", Via: Volume, Path: "spec.volumes[0].configMap", NamePath: "spec.volumes[0].configMap.name", Volume: "cfg", MaxMode: 0o644,
					Container: "api", ContainerType: Regular, MountFieldPath: "spec.containers[1].volumeMounts[1]", MountPath: "/etc/cfg",
				},
				{
					Kind: ConfigMap, Name: "c", Via: Volume, Path: "spec.volumes[0].configMap", NamePath: "spec.volumes[0].configMap.name", Volume: "cfg", MaxMode: 0o644,
					Container: "debug", ContainerType: Ephemeral, MountFieldPath: "spec.ephemeralContainers[0].volumeMounts[0]", MountPath: "/dbg", ReadOnly: true,
				},
			},
		},
		{
			name: "env key refs and envFrom, envFrom first per container",
			spec: &corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "api",
					Env: []corev1.EnvVar{
						{Name: "PLAIN", Value: "v"},
						{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("flags"), Key: "level"}}},
						{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("db"), Key: "password", Optional: ptr(true)}}},
					},
					EnvFrom: []corev1.EnvFromSource{
						{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("common")}},
						{Prefix: "DB_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("db"), Optional: ptr(true)}},
					},
				}},
			},
			want: []Ref{
				{Kind: ConfigMap, Name: "common", Via: EnvFrom, Path: "spec.containers[0].envFrom[0].configMapRef", NamePath: "spec.containers[0].envFrom[0].configMapRef.name", Container: "api", ContainerType: Regular},
				{Kind: Secret, Name: "db", Optional: true, Via: EnvFrom, Path: "spec.containers[0].envFrom[1].secretRef", NamePath: "spec.containers[0].envFrom[1].secretRef.name", Container: "api", ContainerType: Regular, EnvPrefix: "DB_"},
				{Kind: ConfigMap, Name: "flags", Keys: []string{"level"}, Via: Env, Path: "spec.containers[0].env[1].valueFrom.configMapKeyRef", NamePath: "spec.containers[0].env[1].valueFrom.configMapKeyRef.name", Container: "api", ContainerType: Regular},
				{Kind: Secret, Name: "db", Optional: true, Keys: []string{"password"}, Via: Env, Path: "spec.containers[0].env[2].valueFrom.secretKeyRef", NamePath: "spec.containers[0].env[2].valueFrom.secretKeyRef.name", Container: "api", ContainerType: Regular},
			},
		},
		{
			name: "env in init and ephemeral containers",
			spec: &corev1.PodSpec{
				InitContainers: []corev1.Container{{
					Name: "migrate",
					EnvFrom: []corev1.EnvFromSource{
						{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("m")}},
						{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("db")}},
					},
				}},
				Containers: []corev1.Container{{Name: "api"}},
				EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: "debug",
					Env: []corev1.EnvVar{
						{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("tok"), Key: "t"}}},
						{Name: "Y", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("dbg"), Key: "y"}}},
					},
					EnvFrom: []corev1.EnvFromSource{{Prefix: "D_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("dbg"), Optional: ptr(true)}}},
				}}},
			},
			want: []Ref{
				{Kind: ConfigMap, Name: "m", Via: EnvFrom, Path: "spec.initContainers[0].envFrom[0].configMapRef", NamePath: "spec.initContainers[0].envFrom[0].configMapRef.name", Container: "migrate", ContainerType: Init},
				{Kind: Secret, Name: "db", Via: EnvFrom, Path: "spec.initContainers[0].envFrom[1].secretRef", NamePath: "spec.initContainers[0].envFrom[1].secretRef.name", Container: "migrate", ContainerType: Init},
				{Kind: ConfigMap, Name: "dbg", Optional: true, Via: EnvFrom, Path: "spec.ephemeralContainers[0].envFrom[0].configMapRef", NamePath: "spec.ephemeralContainers[0].envFrom[0].configMapRef.name", Container: "debug", ContainerType: Ephemeral, EnvPrefix: "D_"},
				{Kind: Secret, Name: "tok", Keys: []string{"t"}, Via: Env, Path: "spec.ephemeralContainers[0].env[0].valueFrom.secretKeyRef", NamePath: "spec.ephemeralContainers[0].env[0].valueFrom.secretKeyRef.name", Container: "debug", ContainerType: Ephemeral},
				{Kind: ConfigMap, Name: "dbg", Keys: []string{"y"}, Via: Env, Path: "spec.ephemeralContainers[0].env[1].valueFrom.configMapKeyRef", NamePath: "spec.ephemeralContainers[0].env[1].valueFrom.configMapKeyRef.name", Container: "debug", ContainerType: Ephemeral},
			},
		},
		{
			name: "volumes come before env",
			spec: &corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}},
				Containers: []corev1.Container{{
					Name:         "api",
					Env:          []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("c"), Key: "k"}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/s"}},
				}},
			},
			want: []Ref{
				{
					Kind: Secret, Name: "s", Via: Volume, Path: "spec.volumes[0].secret", NamePath: "spec.volumes[0].secret.secretName", Volume: "v", MaxMode: 0o644,
					Container: "api", ContainerType: Regular, MountFieldPath: "spec.containers[0].volumeMounts[0]", MountPath: "/s",
				},
				{Kind: ConfigMap, Name: "c", Keys: []string{"k"}, Via: Env, Path: "spec.containers[0].env[0].valueFrom.configMapKeyRef", NamePath: "spec.containers[0].env[0].valueFrom.configMapKeyRef.name", Container: "api", ContainerType: Regular},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromPodSpec(tt.spec)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromPodSpec:\n got: %s\nwant: %s", dump(got), dump(tt.want))
			}
		})
	}
}

// Mount copies must not share a Keys backing array, or a caller editing one
// Ref would silently edit its siblings.
func TestFromPodSpecKeysNotShared(t *testing.T) {
	spec := &corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: cmRef("c"), Items: []corev1.KeyToPath{{Key: "a", Path: "a"}},
		}}}},
		Containers: []corev1.Container{
			{Name: "one", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/a"}}},
			{Name: "two", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/b"}}},
		},
	}
	got := FromPodSpec(spec)
	got[0].Keys[0] = "changed"
	if got[1].Keys[0] != "a" {
		t.Fatalf("Keys shared between refs: %v", got[1].Keys)
	}
}

func TestConsumed(t *testing.T) {
	tests := []struct {
		name string
		refs []Ref
		want []Consumption
	}{
		{name: "none", refs: nil, want: []Consumption{}},
		{
			name: "sorted by kind then name",
			refs: []Ref{
				{Kind: Secret, Name: "a"},
				{Kind: ConfigMap, Name: "z", Keys: []string{"k"}},
				{Kind: ConfigMap, Name: "b"},
			},
			want: []Consumption{
				{Kind: ConfigMap, Name: "b"},
				{Kind: ConfigMap, Name: "z", Keys: []string{"k"}},
				{Kind: Secret, Name: "a"},
			},
		},
		{
			name: "same name, different kinds stay apart",
			refs: []Ref{{Kind: Secret, Name: "x", Keys: []string{"s"}}, {Kind: ConfigMap, Name: "x", Keys: []string{"c"}}},
			want: []Consumption{{Kind: ConfigMap, Name: "x", Keys: []string{"c"}}, {Kind: Secret, Name: "x", Keys: []string{"s"}}},
		},
		{
			name: "keys are unioned, sorted and deduplicated",
			refs: []Ref{
				{Kind: ConfigMap, Name: "c", Keys: []string{"b", "d"}},
				{Kind: ConfigMap, Name: "c", Keys: []string{"a", "b"}},
			},
			want: []Consumption{{Kind: ConfigMap, Name: "c", Keys: []string{"a", "b", "d"}}},
		},
		{
			name: "one all-keys use takes all keys",
			refs: []Ref{
				{Kind: ConfigMap, Name: "c", Keys: []string{"a"}},
				{Kind: ConfigMap, Name: "c"},
				{Kind: ConfigMap, Name: "c", Keys: []string{"b"}},
			},
			want: []Consumption{{Kind: ConfigMap, Name: "c"}},
		},
		{
			name: "optional only if every use is optional",
			refs: []Ref{
				{Kind: Secret, Name: "mixed", Optional: true},
				{Kind: Secret, Name: "mixed"},
				{Kind: Secret, Name: "opt", Optional: true},
				{Kind: Secret, Name: "opt", Optional: true},
			},
			want: []Consumption{{Kind: Secret, Name: "mixed"}, {Kind: Secret, Name: "opt", Optional: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Consumed(tt.refs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Consumed:\n got: %s\nwant: %s", dump(got), dump(tt.want))
			}
		})
	}
}

func TestConsumedFromPodSpec(t *testing.T) {
	spec := &corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: cmRef("app"), Items: []corev1.KeyToPath{{Key: "a.yaml", Path: "a.yaml"}}, Optional: ptr(true),
		}}}},
		Containers: []corev1.Container{{
			Name:    "api",
			Env:     []corev1.EnvVar{{Name: "L", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("app"), Key: "level"}}}},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("db")}}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "v", MountPath: "/a"},
				{Name: "v", MountPath: "/b"},
			},
		}},
	}
	want := []Consumption{
		{Kind: ConfigMap, Name: "app", Keys: []string{"a.yaml", "level"}},
		{Kind: Secret, Name: "db"},
	}
	if got := Consumed(FromPodSpec(spec)); !reflect.DeepEqual(got, want) {
		t.Errorf("Consumed:\n got: %s\nwant: %s", dump(got), dump(want))
	}
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
