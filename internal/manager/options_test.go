package manager

import (
	"testing"

	"github.com/spf13/pflag"
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
