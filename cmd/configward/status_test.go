package main

import (
	"testing"

	"github.com/configward/configward/internal/workload"
)

func TestParseWorkloadArg(t *testing.T) {
	for _, tc := range []struct{ arg, kind, name, err string }{
		{"deployment/web", "Deployment", "web", ""},
		{"deploy/web", "Deployment", "web", ""},
		{"Deployment/web", "Deployment", "web", ""},
		{"deployments.apps/web", "Deployment", "web", ""},
		{"sts/db", "StatefulSet", "db", ""},
		{"cronjobs.batch/nightly", "CronJob", "nightly", ""},
		{"cj/nightly", "CronJob", "nightly", ""},
		{"deployments.batch/web", "", "", `"deployments.batch" is not a workload kind configward stamps`},
		{"pod/web", "", "", `"pod" is not a workload kind configward stamps`},
		{"web", "", "", `expected KIND/NAME (for example deployment/web), not "web"`},
		{"deployment/", "", "", `expected KIND/NAME (for example deployment/web), not "deployment/"`},
	} {
		k, name, err := parseWorkloadArg(workload.Builtin(), tc.arg)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %s", tc.arg, err, tc.err)
			}
			continue
		}
		if err != nil || k.Kind != tc.kind || name != tc.name {
			t.Errorf("%s: %v %q %v, want %s %q", tc.arg, k, name, err, tc.kind, tc.name)
		}
	}
}
