package revision

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/refs"
)

var key = []byte("revision-test-installation-key-0")

func TestSnapshotName(t *testing.T) {
	a := SnapshotName(key, "shop", refs.ConfigMap, "web-config", "content-1")
	if !strings.HasPrefix(a, "web-config-") || len(a) != len("web-config-")+digestLen {
		t.Fatalf("name %q", a)
	}
	if a != SnapshotName(key, "shop", refs.ConfigMap, "web-config", "content-1") {
		t.Fatal("the same content gives another name")
	}
	for name, other := range map[string]string{
		"another content":   SnapshotName(key, "shop", refs.ConfigMap, "web-config", "content-2"),
		"another namespace": SnapshotName(key, "shop2", refs.ConfigMap, "web-config", "content-1"),
		"a Secret":          SnapshotName(key, "shop", refs.Secret, "web-config", "content-1"),
		"another key":       SnapshotName([]byte("another-installation-key-0000000"), "shop", refs.ConfigMap, "web-config", "content-1"),
	} {
		if other == a {
			t.Errorf("%s gives the same name %q", name, a)
		}
	}
	long := strings.Repeat("a", 250) + "-.b"
	n := SnapshotName(key, "shop", refs.ConfigMap, long, "c")
	if len(n) > maxName || strings.Contains(n, "-.") || strings.Contains(n, ".-") {
		t.Fatalf("a long name gives %q (%d)", n, len(n))
	}
}

func TestAnnotation(t *testing.T) {
	s := Snapshots{{refs.Secret, "db"}: "db-0123456789", {refs.ConfigMap, "app"}: "app-9876543210"}
	v := s.Encode()
	if v != "ConfigMap/app=app-9876543210,Secret/db=db-0123456789" {
		t.Fatalf("Encode = %q", v)
	}
	back, err := Decode(v)
	if err != nil || back.Encode() != v {
		t.Fatalf("Decode = %v, %v", back, err)
	}
	if got, err := Decode(""); err != nil || len(got) != 0 {
		t.Fatalf("Decode of nothing = %v, %v", got, err)
	}
	for _, bad := range []string{"app=x", "ConfigMap/app", "Pod/p=x", "ConfigMap/=x", "ConfigMap/app=", "ConfigMap/app=x,,"} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) took it", bad)
		}
	}
}

// The patch, applied to the pod as the API server holds it, rewrites every
// kind of reference to a snapshotted source and no other.
func TestPodPatch(t *testing.T) {
	cmRef := func(n string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: n} }
	spec := corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef("app")}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef("other")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("db")}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef("app")}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("app")}}}}},
		Containers: []corev1.Container{{Name: "app",
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("app"), Key: "k"}}},
				{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("db"), Key: "p"}}},
			},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("db")}}},
		}},
	}
	snaps := Snapshots{{refs.ConfigMap, "app"}: "app-1111111111", {refs.Secret, "db"}: "db-2222222222"}
	ops, pinned := PodPatch(&spec, snaps)
	if len(ops) != 8 || len(pinned) != 2 {
		t.Fatalf("%d ops pinning %v: %v", len(ops), pinned, ops)
	}
	doc, _ := json.Marshal(corev1.Pod{Spec: spec})
	patch, _ := json.Marshal(ops)
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	g := got.Spec
	for what, name := range map[string]string{
		"volume":               g.Volumes[0].ConfigMap.Name,
		"secret volume":        g.Volumes[1].Secret.SecretName,
		"projected secret":     g.Volumes[2].Projected.Sources[1].Secret.Name,
		"projected ConfigMap":  g.Volumes[2].Projected.Sources[2].ConfigMap.Name,
		"init envFrom":         g.InitContainers[0].EnvFrom[0].ConfigMapRef.Name,
		"env configMapKeyRef":  g.Containers[0].Env[1].ValueFrom.ConfigMapKeyRef.Name,
		"env secretKeyRef":     g.Containers[0].Env[2].ValueFrom.SecretKeyRef.Name,
		"envFrom secretRef":    g.Containers[0].EnvFrom[0].SecretRef.Name,
		"an unsnapshotted one": "other-" + g.Volumes[2].Projected.Sources[0].ConfigMap.Name,
	} {
		if !strings.HasSuffix(name, "-1111111111") && !strings.HasSuffix(name, "-2222222222") && name != "other-other" {
			t.Errorf("%s: %q", what, name)
		}
	}
	if spec.Volumes[0].ConfigMap.Name != "app" {
		t.Error("PodPatch changed the spec it read")
	}
}

func TestNext(t *testing.T) {
	now := Stamp{Hash: "now", Snapshots: "ConfigMap/a=a-now"}
	base := Write{Now: "now", NowSnapshots: "ConfigMap/a=a-now"}
	with := func(f func(*Write)) Write { w := base; f(&w); return w }
	for name, tc := range map[string]struct {
		w    Write
		want Stamp
	}{
		"a create":                     {with(func(w *Write) { w.Create, w.Written = true, "old" }), now},
		"a write keeping the hash":     {with(func(w *Write) { w.Written, w.Stored = "now", "now" }), now},
		"a stale hash kept by a write": {with(func(w *Write) { w.Written, w.Stored = "old", "old"; w.Restorable = true }), now},
		"a rollback": {with(func(w *Write) {
			w.Written, w.WrittenSnapshots, w.Stored, w.Restorable = "old", "ConfigMap/a=a-old", "now", true
		}), Stamp{Hash: "old", Snapshots: "ConfigMap/a=a-old", Marker: "now", RolledBack: true}},
		"a rollback to a revision without snapshots": {with(func(w *Write) { w.Written, w.Stored = "old", "now" }), now},
		"a scale of a rolled-back workload": {with(func(w *Write) {
			w.Written, w.WrittenSnapshots, w.Stored, w.Marker = "old", "ConfigMap/a=a-old", "old", "now"
		}), Stamp{Hash: "old", Snapshots: "ConfigMap/a=a-old", Marker: "now"}},
		"config changed since the rollback": {with(func(w *Write) {
			w.Written, w.Stored, w.Marker, w.Now = "old", "old", "then", "now"
		}), now},
		"a new revision from the pipeline": {with(func(w *Write) {
			w.Written, w.Stored, w.Marker, w.TemplateChanged = "old", "old", "now", true
		}), now},
		"no config counted": {with(func(w *Write) { w.Now, w.NowSnapshots, w.Written, w.Stored = "", "", "old", "x" }), Stamp{}},
	} {
		if got := Next(tc.w); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}
