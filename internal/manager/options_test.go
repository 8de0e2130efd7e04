package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The chart passes --cert-manager-service-accounts= for an empty
// certManager.serviceAccounts: it must mean no one, not the default.
func TestCertManagerServiceAccountsEmptyMeansNone(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"system:serviceaccount:cert-manager:cert-manager"}},
		{[]string{"--cert-manager-service-accounts="}, nil},
		{[]string{"--cert-manager-service-accounts=certs/issuer,certs/other"}, []string{"system:serviceaccount:certs:issuer", "system:serviceaccount:certs:other"}},
	} {
		for _, proc := range []string{"webhook", "controller"} {
			fs := pflag.NewFlagSet(proc, pflag.ContinueOnError)
			var c *ChangeControl
			if proc == "webhook" {
				var w Webhook
				w.AddFlags(fs)
				c = &w.ChangeControl
			} else {
				var ctl Controller
				ctl.AddFlags(fs)
				c = &ctl.ChangeControl
			}
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("%s %v: %v", proc, tc.args, err)
			}
			settings, err := c.Settings()
			if err != nil {
				t.Fatalf("%s %v: %v", proc, tc.args, err)
			}
			got := settings(nil).CertManager.ServiceAccounts
			if len(got) != len(tc.want) {
				t.Errorf("%s %v: cert-manager identities %q, want %q", proc, tc.args, got, tc.want)
				continue
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%s %v: cert-manager identities %q, want %q", proc, tc.args, got, tc.want)
				}
			}
		}
	}
}

// Both processes take --workload-kinds and refuse to start on a bad file,
// naming it and the entry, instead of running without the kinds.
func TestWorkloadKindsFlag(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("- {group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts, podTemplatePath: spec.template}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("- {group: argoproj.io, version: v1alpha1, kind: Rollout, resource: rollouts, podTemplatePath: spec.template, paused: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, proc := range []string{"webhook", "controller"} {
		fs := pflag.NewFlagSet(proc, pflag.ContinueOnError)
		var c *Common
		if proc == "webhook" {
			var w Webhook
			w.AddFlags(fs)
			c = &w.Common
		} else {
			var ctl Controller
			ctl.AddFlags(fs)
			c = &ctl.Common
		}
		if err := fs.Parse([]string{"--workload-kinds=" + good}); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", proc, err)
		}
		reg, _ := c.Kinds()
		if _, ok := reg.Type(schema.GroupKind{Group: "argoproj.io", Kind: "Rollout"}); !ok {
			t.Errorf("%s: the declared kind is not in the registry", proc)
		}
		c.WorkloadKindsFile = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `--workload-kinds: workload kinds in `+bad+`: workload kind 1: unknown field "paused"`) ||
			!strings.Contains(err.Error(), `unknown field "paused"`) {
			t.Errorf("%s: error %v, want one naming the file and the unknown field", proc, err)
		}
	}
}
