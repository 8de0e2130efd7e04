package main

import (
	"strings"
	"testing"
)

func TestDeliveryRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"delivery", "frobnicate", "configmap/app"}, `unknown action "frobnicate": want promote, halt, resume or wait`},
		{[]string{"delivery", "promote", "deployment/app"}, `"deployment/app" is not configmap/NAME or secret/NAME`},
		{[]string{"delivery", "promote", "configmap/"}, `"configmap/" is not configmap/NAME or secret/NAME`},
		{[]string{"delivery", "promote"}, "want an action (promote, halt, resume, wait) and a config"},
	} {
		out, code := runCLI(t, "", tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("configward %s: exit %d, output %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out, tc.want)
		}
	}
}
