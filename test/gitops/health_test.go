// Package gitops checks that tools which wait on objects (kstatus, which
// Flux's health checks and Helm's wait compute with, and the chart's Argo
// CD health checks, run by gopher-lua as Argo CD runs them) read each
// state of configward's records right. The interpreters live in their own
// module (test/tools/gitopshealth): the product's go.mod never carries
// them.
package gitops

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configset"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
	"github.com/configward/configward/test/framework"
)

type verdict struct {
	Name          string `json:"name"`
	KStatus       string `json:"kstatus"`
	KStatusReason string `json:"kstatusMessage"`
	Argo          string `json:"argo"`
	ArgoMessage   string `json:"argoMessage"`
}

// TestConfigDeliveryHealth records a ConfigDelivery in each state as the
// controller writes it (its status through delivery.Observe), and reads
// each with kstatus and with the chart's Argo CD health check.
func TestConfigDeliveryHealth(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	type state struct {
		name           string
		status         v1alpha1.ConfigDeliveryStatus
		kstatus, argo  string
		unobservedSpec bool // a request written after the last status
	}
	states := []state{
		{name: "placing", kstatus: "InProgress", argo: "Progressing"},
		{name: "progressing", status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryProgressing, Reason: "WaveRolling", Message: "waiting for 1 of 2 workloads", CurrentWave: "canary"},
			kstatus: "InProgress", argo: "Progressing"},
		{name: "waiting-for-approval", status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryWaitingForApproval, Reason: "ApprovalRequired", Message: "wave rest waits for a promote", CurrentWave: "rest"},
			kstatus: "InProgress", argo: "Suspended"},
		{name: "halted", status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryHalted, Reason: delivery.ReasonWaveFailed, Message: "deployment/web: CrashLoopBackOff", CurrentWave: "canary", RolledBack: true},
			kstatus: "Failed", argo: "Degraded"},
		{name: "succeeded", status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliverySucceeded, Reason: "Delivered", Message: "every wave is healthy"},
			kstatus: "Current", argo: "Healthy"},
		{name: "superseded", status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliverySuperseded, Reason: delivery.ReasonNewerContent, Message: "a newer content is delivered"},
			kstatus: "Failed", argo: "Degraded"},
		{name: "cancelled", status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryCancelled, Reason: delivery.ReasonNotDelivered, Message: "delivery is off"},
			kstatus: "Failed", argo: "Degraded"},
		{name: "halted-with-a-request-not-acted-on", status: v1alpha1.ConfigDeliveryStatus{State: v1alpha1.DeliveryHalted, Reason: delivery.ReasonWaveFailed, CurrentWave: "canary"},
			unobservedSpec: true, kstatus: "InProgress", argo: "Progressing"},
	}
	var objs []map[string]any
	for _, s := range states {
		rec := &v1alpha1.ConfigDelivery{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ConfigDelivery"},
			ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "shop", Generation: 2},
			Spec:       v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "web"}, Sequence: 1},
		}
		rec.Status = delivery.Observe(s.status, rec.Generation, now)
		if s.unobservedSpec {
			rec.Generation = 3
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rec)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	got := judge(t, "configdelivery-health.lua", objs)
	for i, s := range states {
		if got[i].KStatus != s.kstatus || got[i].Argo != s.argo {
			t.Errorf("%s: kstatus %s (%s), Argo CD %s (%s); want kstatus %s, Argo CD %s", s.name, got[i].KStatus, got[i].KStatusReason, got[i].Argo, got[i].ArgoMessage, s.kstatus, s.argo)
		}
		if got[i].ArgoMessage == "" {
			t.Errorf("%s: the Argo CD check says no message", s.name)
		}
	}
}

// judge runs test/tools/gitopshealth with the chart's Lua check named
// check over objs.
func judge(t *testing.T, check string, objs []map[string]any) []verdict {
	t.Helper()
	in, err := json.Marshal(objs)
	if err != nil {
		t.Fatal(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	root := framework.RepoRoot()
	cmd := exec.Command(goTool, "run", ".", filepath.Join(root, "charts", "configward", "files", "argocd", check))
	cmd.Dir = filepath.Join(root, "test", "tools", "gitopshealth")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gitopshealth: %v\n%s", err, stderr.String())
	}
	var verdicts []verdict
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var v verdict
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("gitopshealth said %q: %v", sc.Text(), err)
		}
		verdicts = append(verdicts, v)
	}
	if len(verdicts) != len(objs) {
		t.Fatalf("gitopshealth judged %d objects of %d:\n%s", len(verdicts), len(objs), out)
	}
	return verdicts
}

// TestConfigSetHealth records a ConfigSet in each state as the controller
// writes it (configset.Judge, over what a look saw), and reads each with
// kstatus and with the chart's Argo CD health check.
func TestConfigSetHealth(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	a, b := revision.Source{Kind: refs.ConfigMap, Name: "a"}, revision.Source{Kind: refs.Secret, Name: "b"}
	carry := func(version string) map[revision.Source]configset.Member {
		return map[revision.Source]configset.Member{
			a: {Exists: true, Version: version, Delivered: true, Current: "a-2"},
			b: {Exists: true, Version: "v2", Delivered: true, Current: "b-2"},
		}
	}
	record := func(state v1alpha1.DeliveryState, reason string) []*v1alpha1.ConfigDelivery {
		return []*v1alpha1.ConfigDelivery{{ObjectMeta: metav1.ObjectMeta{Name: "configset-checkout-2", Generation: 1},
			Spec: v1alpha1.ConfigDeliverySpec{ConfigSet: &v1alpha1.ConfigSetVersion{Name: "checkout", Version: "v2", Generation: 2},
				Members: []v1alpha1.ConfigRef{{Kind: "ConfigMap", Name: "a"}, {Kind: "Secret", Name: "b"}}},
			Status: v1alpha1.ConfigDeliveryStatus{State: state, Reason: reason, Message: "m", CurrentWave: "rest",
				Members: []v1alpha1.MemberStatus{{Kind: "ConfigMap", Name: "a", To: "a-2"}, {Kind: "Secret", Name: "b", To: "b-2"}}}}}
	}
	type state struct {
		name          string
		seen          configset.Seen
		late          time.Duration // looked at this long after the version was written
		kstatus, argo string
	}
	states := []state{
		{name: "waiting-for-members", seen: configset.Seen{Members: carry("v1"), DeliveryOn: true}, kstatus: "InProgress", argo: "Progressing"},
		{name: "timed-out", seen: configset.Seen{Members: carry("v1"), DeliveryOn: true}, late: time.Hour, kstatus: "Failed", argo: "Degraded"},
		{name: "member-claimed", seen: configset.Seen{Members: carry("v2"), DeliveryOn: true, ClaimedBy: map[revision.Source]string{b: "older"}}, kstatus: "Failed", argo: "Degraded"},
		{name: "starting", seen: configset.Seen{Members: carry("v2"), DeliveryOn: true}, kstatus: "InProgress", argo: "Progressing"},
		{name: "delivering", seen: configset.Seen{Members: carry("v2"), DeliveryOn: true, Records: record(v1alpha1.DeliveryProgressing, "WaveStarted")}, kstatus: "InProgress", argo: "Progressing"},
		{name: "waiting-for-approval", seen: configset.Seen{Members: carry("v2"), DeliveryOn: true, Records: record(v1alpha1.DeliveryWaitingForApproval, "ApprovalRequired")}, kstatus: "InProgress", argo: "Suspended"},
		{name: "halted", seen: configset.Seen{Members: carry("v2"), DeliveryOn: true, Records: record(v1alpha1.DeliveryHalted, delivery.ReasonWaveFailed)}, kstatus: "Failed", argo: "Degraded"},
		{name: "delivered", seen: configset.Seen{Members: carry("v2"), DeliveryOn: true, Records: record(v1alpha1.DeliverySucceeded, "AllWavesHealthy")}, kstatus: "Current", argo: "Healthy"},
		{name: "delivery-off", seen: configset.Seen{Members: carry("v2")}, kstatus: "Current", argo: "Healthy"},
	}
	var objs []map[string]any
	for _, s := range states {
		set := &v1alpha1.ConfigSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ConfigSet"},
			ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: "shop", Generation: 2},
			Spec:       v1alpha1.ConfigSetSpec{Version: "v2", Members: []v1alpha1.ConfigSetMember{{Kind: "ConfigMap", Name: "a"}, {Kind: "Secret", Name: "b"}}},
		}
		// The first look at this generation, then the look s.late after it.
		set.Status = configset.Judge(set, s.seen, now).Status
		set.Status = configset.Judge(set, s.seen, now.Add(s.late)).Status
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(set)
		if err != nil {
			t.Fatal(err)
		}
		u["metadata"].(map[string]any)["name"] = s.name
		objs = append(objs, u)
	}
	got := judge(t, "configset-health.lua", objs)
	for i, s := range states {
		if got[i].KStatus != s.kstatus || got[i].Argo != s.argo {
			t.Errorf("%s: kstatus %s (%s), Argo CD %s (%s); want kstatus %s, Argo CD %s", s.name, got[i].KStatus, got[i].KStatusReason, got[i].Argo, got[i].ArgoMessage, s.kstatus, s.argo)
		}
	}
}
