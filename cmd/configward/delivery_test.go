package main

import (
	"errors"
	"strings"
	"testing"
)

func TestDeliveryRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"delivery", "frobnicate", "configmap/app"}, `unknown action "frobnicate": want promote, halt, resume or wait`},
		{[]string{"delivery", "promote", "deployment/app"}, `"deployment/app" is not configmap/NAME, secret/NAME or configset/NAME`},
		{[]string{"delivery", "promote", "configmap/"}, `"configmap/" is not configmap/NAME, secret/NAME or configset/NAME`},
		{[]string{"delivery", "promote"}, "want an action (promote, halt, resume, wait) and a config"},
	} {
		out, code := runCLI(t, "", tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("configward %s: exit %d, output %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out, tc.want)
		}
	}
}

func TestExitCodeSaysWhyUnlessShown(t *testing.T) {
	var buf strings.Builder
	if code := exitCode(exitError{1, errors.New("the newest delivery is finished")}, &buf); code != 1 || !strings.Contains(buf.String(), "configward: the newest delivery is finished") {
		t.Errorf("exit %d, stderr %q: want 1 and the reason", code, buf.String())
	}
	buf.Reset()
	if code := exitCode(exitError{1, alreadyShown{errors.New("2 denied")}}, &buf); code != 1 || buf.Len() != 0 {
		t.Errorf("exit %d, stderr %q: want 1 and nothing repeated", code, buf.String())
	}
}
