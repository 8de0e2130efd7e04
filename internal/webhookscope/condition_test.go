package webhookscope

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configward/configward/internal/workload"
)

// The expression's behaviour, request by request, is tested against the
// real API server (test/controllers/webhookscope_test.go); here, how it is
// built from the kinds' table.
func TestExpressionFollowsTheKindsTable(t *testing.T) {
	reg, err := workload.NewRegistry([]workload.Declaration{{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout", Resource: "rollouts",
		PodTemplatePath: "spec.template", TemplateRefPath: "spec.workloadRef"}})
	if err != nil {
		t.Fatal(err)
	}
	e := WithConfig(reg)
	for _, want := range []string{
		// Kinds it does not know are always sent.
		"!(request.kind.group + '/' + request.kind.kind in ['apps/Deployment', ",
		// Kinds with the template at one path share a clause, the
		// declared kind with them.
		"'batch/Job', 'argoproj.io/Rollout'] && (object.?spec.?template.?metadata",
		"'batch/CronJob'] && (object.?spec.?jobTemplate.?spec.?template.?metadata",
		"['/Pod'] && (object.?metadata",
		// A Rollout that takes its template from another object is sent.
		"(request.kind.group + '/' + request.kind.kind == 'argoproj.io/Rollout' && object.?spec.?workloadRef.hasValue())",
	} {
		if !strings.Contains(e, want) {
			t.Errorf("the expression lacks %q:\n%s", want, e)
		}
	}
	// Objects a workload controls are left out only when its controller
	// writes them; a declared kind without controllers never is, and
	// a declared user name cannot end the CEL string.
	owner := NotJudgedAtOwner(reg)
	for _, want := range []string{
		"(o.kind == 'ReplicaSet' && o.apiVersion.startsWith('apps/') && request.userInfo.username in ['system:kube-controller-manager', 'system:serviceaccount:kube-system:replicaset-controller'])",
		"(o.kind == 'Job' && o.apiVersion.startsWith('batch/') && request.userInfo.username in ['system:kube-controller-manager', 'system:serviceaccount:kube-system:job-controller'])",
	} {
		if !strings.Contains(owner, want) {
			t.Errorf("the owner expression lacks %q:\n%s", want, owner)
		}
	}
	if strings.Contains(owner, "'Rollout'") || strings.Contains(owner, "o.kind == 'Pod'") {
		t.Errorf("the owner expression names a kind without controllers:\n%s", owner)
	}
	quoted, err := workload.NewRegistry([]workload.Declaration{{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout", Resource: "rollouts",
		PodTemplatePath: "spec.template", Controllers: []string{`o'brien\`}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := NotJudgedAtOwner(quoted); !strings.Contains(e, `in ['o\'brien\\']`) {
		t.Errorf("a quote in a user name is not escaped:\n%s", e)
	}
	if strings.Contains(WithConfig(workload.Builtin()), "argoproj.io") {
		t.Error("the built-in kinds' expression names a declared kind")
	}
}

// The webhooks the condition goes on are configward's, by the names
// `make manifests` generates from the handlers' markers.
func TestWebhookNamesAreConfigwards(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ConfigHashWebhook, ValidateWorkloadWebhook} {
		if !strings.Contains(string(b), "name: "+name+"\n") {
			t.Errorf("config/webhook/manifests.yaml has no webhook %s", name)
		}
	}
}
