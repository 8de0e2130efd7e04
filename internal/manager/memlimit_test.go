package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/pflag"
)

// cgroupFiles writes the cgroup v2 and v1 files (skipping empty contents)
// and returns their paths in the order ApplyMemoryLimit reads them.
func cgroupFiles(t *testing.T, v2, v1 string) []string {
	t.Helper()
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "memory.max"), filepath.Join(dir, "memory", "memory.limit_in_bytes")}
	for i, content := range []string{v2, v1} {
		if content == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(paths[i]), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(paths[i], []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

func recordingLogger() (logr.Logger, *strings.Builder) {
	var b strings.Builder
	return funcr.New(func(prefix, args string) { b.WriteString(args + "\n") }, funcr.Options{Verbosity: 1}), &b
}

func TestApplyMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name     string
		v2, v1   string
		ratio    float64
		env      func(string) string
		want     int64
		wantLogs string
	}{
		{name: "cgroup v2 limit", v2: "536870912\n", ratio: 0.9, want: 483183820, wantLogs: `"containerLimitBytes"=536870912`},
		{name: "cgroup v2 wins over v1", v2: "536870912\n", v1: "268435456\n", ratio: 0.5, want: 256 * mi, wantLogs: `memory.max`},
		{name: "cgroup v2 without a limit", v2: "max\n", v1: "268435456\n", ratio: 0.9, want: 0, wantLogs: "the container has no memory limit"},
		{name: "cgroup v1 limit", v1: "268435456\n", ratio: 0.9, want: 241591910, wantLogs: `memory.limit_in_bytes`},
		{name: "cgroup v1 without a limit", v1: "9223372036854771712\n", ratio: 0.9, want: 0, wantLogs: "the container has no memory limit"},
		{name: "no cgroup files", ratio: 0.9, want: 0, wantLogs: "could not read the container's memory limit"},
		{name: "not a number", v2: "lots\n", ratio: 0.9, want: 0, wantLogs: `holds \"lots\", not a memory limit`},
		{name: "a full ratio", v2: "536870912", ratio: 1, want: 512 * mi},
		{name: "ratio 0 turns it off", v2: "536870912\n", ratio: 0, want: 0, wantLogs: "--memory-limit-ratio is 0"},
		{name: "GOMEMLIMIT wins", v2: "536870912\n", ratio: 0.9, want: 0, wantLogs: `GOMEMLIMIT is set`,
			env: func(k string) string {
				if k == "GOMEMLIMIT" {
					return "300MiB"
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := cgroupFiles(t, tc.v2, tc.v1)
			env := tc.env
			if env == nil {
				env = noEnv
			}
			var set []int64
			log, logs := recordingLogger()
			got := applyMemoryLimit(log, tc.ratio, env, func(n int64) int64 { set = append(set, n); return 0 }, paths...)
			if got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
			switch {
			case tc.want == 0 && len(set) != 0:
				t.Errorf("set the runtime's limit to %v; want it left alone", set)
			case tc.want != 0 && (len(set) != 1 || set[0] != tc.want):
				t.Errorf("set the runtime's limit to %v; want [%d]", set, tc.want)
			}
			if !strings.Contains(logs.String(), tc.wantLogs) {
				t.Errorf("logs %q do not say %q", logs.String(), tc.wantLogs)
			}
		})
	}
}

func TestCgroupMemoryLimitUnreadable(t *testing.T) {
	// A directory where the v2 file should be: it exists but cannot be read
	// (whoever runs the test, root included).
	paths := cgroupFiles(t, "", "268435456\n")
	if err := os.Mkdir(paths[0], 0o755); err != nil {
		t.Fatal(err)
	}
	// An unreadable v2 file is passed over for a readable v1 one...
	if n, src, err := cgroupMemoryLimit(paths...); err != nil || n != 256<<20 || src != paths[1] {
		t.Errorf("got %d from %q (%v); want the v1 limit", n, src, err)
	}
	// ...and with nothing readable there is no limit, and an error saying why.
	if _, _, err := cgroupMemoryLimit(paths[0]); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("error %v, want the read error", err)
	}
	log, logs := recordingLogger()
	if got := applyMemoryLimit(log, 0.9, func(string) string { return "" }, func(int64) int64 { t.Error("set a limit"); return 0 }, paths[0]); got != 0 {
		t.Errorf("limit %d with nothing readable", got)
	}
	if !strings.Contains(logs.String(), "could not read the container's memory limit") {
		t.Errorf("logs %q do not say why no limit was set", logs.String())
	}
}

func TestMemoryLimitRatioFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    float64
		wantErr string
	}{
		{nil, DefaultMemoryLimitRatio, ""},
		{[]string{"--memory-limit-ratio=0"}, 0, ""},
		{[]string{"--memory-limit-ratio=0.75"}, 0.75, ""},
		{[]string{"--memory-limit-ratio=1.5"}, 0, "--memory-limit-ratio must be between 0 (off) and 1"},
		{[]string{"--memory-limit-ratio=-0.1"}, 0, "--memory-limit-ratio must be between 0 (off) and 1"},
	} {
		var c Common
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		c.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case c.MemoryLimitRatio != tc.want:
			t.Errorf("%v: ratio %g, want %g", tc.args, c.MemoryLimitRatio, tc.want)
		}
	}
}

func TestApplyGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		percent int
		gogc    string
		want    int
	}{
		{"the flag's value", 200, "", 200},
		{"GOGC wins", 200, "50", 0},
		{"0 leaves Go's default", 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := -1
			set := func(p int) int { got = p; return 100 }
			ret := applyGCPercent(logr.Discard(), tc.percent, func(k string) string {
				if k == "GOGC" {
					return tc.gogc
				}
				return ""
			}, set)
			if ret != tc.want || (tc.want != 0 && got != tc.want) || (tc.want == 0 && got != -1) {
				t.Fatalf("returned %d, set %d; want %d", ret, got, tc.want)
			}
		})
	}
}
